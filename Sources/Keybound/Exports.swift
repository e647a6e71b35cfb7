// The wire types (approval actions, problem codes, signing payloads) are part of the SDK's API:
// an app that imports Keybound has them without importing a second module.
@_exported import KeyboundWire
