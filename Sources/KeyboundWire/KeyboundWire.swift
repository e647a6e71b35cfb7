// The KeyboundWire module; see DESIGN in README.md.
