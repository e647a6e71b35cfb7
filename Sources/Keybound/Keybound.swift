// The Keybound module; see DESIGN in README.md.
