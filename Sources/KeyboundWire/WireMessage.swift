import Foundation

/// A request or response body of Server API v1. Decoding is strict (unknown members rejected,
/// types checked); encoding writes compact JSON with members in a fixed order.
///
/// Package-level: apps get the messages through the SDK's typed calls and never handle JSON.
package protocol WireMessage: Sendable {
    /// Decodes the message from a parsed JSON value.
    /// - Throws: ``WireError`` for unknown members, missing members, wrong types or bad values.
    init(json: JSONValue) throws(WireFailure)
    /// The message as a JSON value.
    var json: JSONValue { get }
}

extension WireMessage {
    /// Decodes the message from a body.
    /// - Throws: ``WireError`` for malformed JSON or a message that does not match.
    package init(jsonData: Data) throws(WireFailure) {
        try self.init(json: JSON.parse(jsonData))
    }

    /// The message as a compact JSON body.
    package var jsonData: Data { JSON.serialize(json) }
}
