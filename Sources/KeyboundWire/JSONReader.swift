import Foundation

/// The member names of one JSON object, each spelled once: a `String` enum whose cases are the
/// members in the order they are written. The strict reader takes its allowed set from it and
/// the builder its names, so a message cannot read a member it does not write.
///
/// ```swift
/// enum Member: String, MemberName { case deviceID = "device_id", name }
/// ```
package protocol MemberName: RawRepresentable, CaseIterable, Sendable where RawValue == String {}

/// Reads the members of one JSON object strictly: a member outside `Member` is rejected (a
/// duplicate member was already rejected by ``JSON/parse(_:)``), every accessor checks the type.
/// Used by every ``WireMessage`` decoder.
package struct JSONReader<Member: MemberName>: Sendable {
    private let members: [String: JSONValue]
    private let path: String

    /// A reader over `value`, checked at once against the members the message allows.
    ///
    /// - Parameters:
    ///   - value: the value that must be an object.
    ///   - path: where this object sits, for error messages (`""` for the top level).
    /// - Throws: ``WireError`` (`invalid_request` if not an object, `unknown_member`).
    package init(_ value: JSONValue, path: String = "") throws(WireFailure) {
        guard case .object(let list) = value else {
            throw WireError(.invalidRequest, "\(path.isEmpty ? "the body" : path) must be a JSON object")
        }
        var members: [String: JSONValue] = [:]
        for member in list {
            guard Member(rawValue: member.name) != nil else {
                throw WireError(.unknownMember, "unknown member \"\(Self.join(path, member.name))\"")
            }
            // JSON.parse rejects duplicates; a value built in code must not slip one past either.
            guard members.updateValue(member.value, forKey: member.name) == nil else {
                throw WireError(.invalidRequest, "duplicate member \"\(Self.join(path, member.name))\"")
            }
        }
        self.members = members
        self.path = path
    }

    private static func join(_ path: String, _ name: String) -> String {
        path.isEmpty ? name : path + "." + name
    }

    private func missing(_ member: Member) -> WireError {
        WireError(.invalidRequest, "missing member \"\(Self.join(path, member.rawValue))\"")
    }

    private func wrongType(_ member: Member, _ type: String) -> WireError {
        WireError(.invalidRequest, "member \"\(Self.join(path, member.rawValue))\" must be \(type)")
    }

    /// Whether the member is present (and not null).
    package func has(_ member: Member) -> Bool {
        if let value = members[member.rawValue], value != .null { return true }
        return false
    }

    /// The raw value of a required member.
    package func value(_ member: Member) throws(WireFailure) -> JSONValue {
        guard let value = members[member.rawValue] else { throw missing(member) }
        return value
    }

    /// A required string member.
    package func string(_ member: Member) throws(WireFailure) -> String {
        guard case .string(let text) = try value(member) else { throw wrongType(member, "a string") }
        return text
    }

    /// An optional string member (absent or null gives nil).
    package func optionalString(_ member: Member) throws(WireFailure) -> String? {
        try optional(member, string)
    }

    /// An optional member read by `read` when present: absent or null gives nil.
    private func optional<T>(_ member: Member, _ read: (Member) throws(WireFailure) -> T) throws(WireFailure)
        -> T?
    {
        guard has(member) else { return nil }
        return try read(member)
    }

    /// A required string member that `parse` turns into a value; a string it refuses is reported
    /// as not being `type`.
    private func parsed<T>(_ member: Member, as type: String, _ parse: (String) -> T?) throws(WireFailure)
        -> T
    {
        guard let value = parse(try string(member)) else { throw wrongType(member, type) }
        return value
    }

    /// A required integer member (no fraction, no exponent, fits in `Int`).
    package func integer(_ member: Member) throws(WireFailure) -> Int {
        guard case .number(let text) = try value(member), let number = Int(text) else {
            throw wrongType(member, "an integer")
        }
        return number
    }

    /// A required boolean member.
    package func bool(_ member: Member) throws(WireFailure) -> Bool {
        guard case .bool(let flag) = try value(member) else { throw wrongType(member, "a boolean") }
        return flag
    }

    /// A required member holding base64url (no padding) binary data.
    package func bytes(_ member: Member) throws(WireFailure) -> Data {
        try parsed(member, as: "base64url without padding", Base64URL.decode)
    }

    /// An optional member holding base64url (no padding) binary data (absent or null gives nil).
    package func optionalBytes(_ member: Member) throws(WireFailure) -> Data? {
        try optional(member, bytes)
    }

    /// A required array member.
    package func array(_ member: Member) throws(WireFailure) -> [JSONValue] {
        guard case .array(let items) = try value(member) else { throw wrongType(member, "an array") }
        return items
    }

    /// A required array member, each item decoded by `decode`.
    package func array<T>(_ member: Member, each decode: (JSONValue) throws(WireFailure) -> T)
        throws(WireFailure)
        -> [T]
    {
        var result: [T] = []
        for item in try array(member) { result.append(try decode(item)) }
        return result
    }

    /// A required RFC 3339 timestamp member.
    package func timestamp(_ member: Member) throws(WireFailure) -> Date {
        try parsed(member, as: "an RFC 3339 UTC timestamp", Timestamp.parse)
    }

    /// An optional RFC 3339 timestamp member (absent or null gives nil).
    package func optionalTimestamp(_ member: Member) throws(WireFailure) -> Date? {
        try optional(member, timestamp)
    }

    /// A required string member from a closed set of values.
    package func enumeration<T: RawRepresentable>(_ member: Member, as type: T.Type) throws(WireFailure) -> T
    where T.RawValue == String {
        guard let value = T(rawValue: try string(member)) else {
            throw WireError(
                .invalidRequest, "member \"\(Self.join(path, member.rawValue))\" has an unknown value")
        }
        return value
    }

    /// A required string member from a set a newer peer may extend: any string is accepted.
    package func vocabulary<T: OpenVocabulary>(_ member: Member, as type: T.Type) throws(WireFailure) -> T {
        T(rawValue: try string(member))
    }

    /// An optional string member from a set a newer peer may extend (absent or null gives nil).
    package func optionalVocabulary<T: OpenVocabulary>(_ member: Member, as type: T.Type) throws(WireFailure)
        -> T?
    {
        try optionalString(member).map(T.init(rawValue:))
    }
}

/// Builds one JSON object member by member, in the order they are added, with the names of
/// `Member` (the same enumeration the message's reader uses).
package struct JSONObjectBuilder<Member: MemberName>: Sendable {
    private var members: [JSONMember] = []

    /// An empty object.
    package init() {}

    /// Appends a member.
    package mutating func add(_ member: Member, _ value: JSONValue) {
        members.append(JSONMember(member.rawValue, value))
    }

    /// Appends a string member.
    package mutating func add(_ member: Member, _ value: String) { add(member, .string(value)) }

    /// Appends an integer member.
    package mutating func add(_ member: Member, _ value: Int) { add(member, .integer(value)) }

    /// Appends binary data as base64url without padding.
    package mutating func add(_ member: Member, _ value: Data) {
        add(member, .string(Base64URL.encode(value)))
    }

    /// Appends an RFC 3339 timestamp.
    package mutating func add(_ member: Member, _ value: Date) {
        add(member, .string(Timestamp.format(value)))
    }

    /// Appends binary data as base64url without padding, or null when `value` is nil (the member
    /// is always present).
    package mutating func add(_ member: Member, _ value: Data?) {
        add(member, value.map { .string(Base64URL.encode($0)) } ?? .null)
    }

    /// Appends a string member, or null when `value` is nil (the member is always present).
    package mutating func add(_ member: Member, _ value: String?) {
        add(member, value.map { .string($0) } ?? .null)
    }

    /// Appends an RFC 3339 timestamp, or null when `value` is nil (the member is always present).
    package mutating func add(_ member: Member, _ value: Date?) {
        add(member, value.map { .string(Timestamp.format($0)) } ?? .null)
    }

    /// Appends a value's wire text.
    package mutating func add<T: RawRepresentable>(_ member: Member, _ value: T) where T.RawValue == String {
        add(member, .string(value.rawValue))
    }

    /// Appends a value's wire text, or null when `value` is nil (the member is always present).
    package mutating func add<T: RawRepresentable>(_ member: Member, _ value: T?) where T.RawValue == String {
        add(member, value.map { .string($0.rawValue) } ?? .null)
    }

    /// The object.
    package var value: JSONValue { .object(members) }
}
