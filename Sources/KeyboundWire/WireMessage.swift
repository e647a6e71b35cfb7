import Foundation

/// A request or response body of Server API v1. Decoding is strict (unknown members rejected,
/// types checked); encoding writes compact JSON with members in a fixed order.
///
/// Package-level: apps get the messages through the SDK's typed calls and never handle JSON.
package protocol WireMessage: Sendable {
    /// The name of its schema in docs/openapi.yaml (`#/components/schemas/<name>`).
    static var schemaName: String { get }
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

/// A ``WireMessage`` that is one JSON object with the members of its `Member` enum. The message
/// only reads its members from a strict ``JSONReader`` and writes them into a
/// ``JSONObjectBuilder``; making the reader from the body and the body from the builder is done
/// here, once for every message.
package protocol WireObject: WireMessage {
    /// The JSON member names, in the order they are written.
    associatedtype Member: MemberName
    /// Decodes the message from a strict reader over its object.
    /// - Throws: ``WireError`` for missing members, wrong types or bad values.
    init(reader: JSONReader<Member>) throws(WireFailure)
    /// Appends the message's members, in the order of `Member`.
    func write(to object: inout JSONObjectBuilder<Member>)
}

extension WireObject {
    /// Decodes the message from a parsed JSON value.
    /// - Throws: ``WireError`` for unknown members, missing members, wrong types or bad values.
    package init(json: JSONValue) throws(WireFailure) {
        try self.init(json: json, path: "")
    }

    /// Decodes the object where it sits in a larger message.
    /// - Parameters:
    ///   - json: the object.
    ///   - path: where it sits (`app_attest`), for error messages; `""` for a whole body.
    /// - Throws: ``WireError`` for unknown members, missing members, wrong types or bad values.
    package init(json: JSONValue, path: String) throws(WireFailure) {
        try self.init(reader: JSONReader(json, path: path))
    }

    /// The message as a JSON object.
    package var json: JSONValue {
        var object = JSONObjectBuilder<Member>()
        write(to: &object)
        return object.value
    }
}
