import Foundation

/// A request or response body of Server API v1. Decoding is strict (unknown members rejected,
/// types checked); encoding writes compact JSON with members in a fixed order.
public protocol WireMessage: Sendable {
    /// Decodes the message from a parsed JSON value.
    /// - Throws: ``WireError`` for unknown members, missing members, wrong types or bad values.
    init(json: JSONValue) throws(WireFailure)
    /// The message as a JSON value.
    var json: JSONValue { get }
}

extension WireMessage {
    /// Decodes the message from a body.
    /// - Throws: ``WireError`` for malformed JSON or a message that does not match.
    public init(jsonData: Data) throws(WireFailure) {
        try self.init(json: JSON.parse(jsonData))
    }

    /// The message as a compact JSON body.
    public var jsonData: Data { JSON.serialize(json) }
}

extension JSONReader {
    /// A required RFC 3339 timestamp member.
    public func timestamp(_ name: String) throws(WireFailure) -> Date {
        guard let date = Timestamp.parse(try string(name)) else {
            throw WireError(.invalidRequest, "member \"\(name)\" must be an RFC 3339 UTC timestamp")
        }
        return date
    }

    /// An optional RFC 3339 timestamp member.
    public func optionalTimestamp(_ name: String) throws(WireFailure) -> Date? {
        guard has(name) else { return nil }
        return try timestamp(name)
    }
}
