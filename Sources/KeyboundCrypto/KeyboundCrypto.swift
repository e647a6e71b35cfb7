// The KeyboundCrypto module; see DESIGN in README.md.
