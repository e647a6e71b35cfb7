// The KeyboundServer module; see DESIGN in README.md.
