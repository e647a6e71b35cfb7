// The public wire types (approval actions, signing payloads, problem codes, the messages the
// client returns, usernames and client ids) are part of the SDK's API: an app that imports
// Keybound has them without importing a second module. KeyboundWire's JSON machinery (`JSON`,
// `JSONValue`, readers and builders, the request messages) is `package`: apps never see it.
@_exported import KeyboundWire
