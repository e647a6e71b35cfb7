// The KeyboundEmulator module.
