// The KeyboundEmulator module; see DESIGN in README.md.
