// The KeyboundApple module; see DESIGN in README.md.
