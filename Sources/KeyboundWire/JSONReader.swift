import Foundation

/// Reads the members of one JSON object strictly: members outside the allowed set are rejected,
/// every accessor checks the type. Used by every ``WireMessage`` decoder.
public struct JSONReader: Sendable {
    private let members: [String: JSONValue]
    private let path: String

    /// A reader over `value`, checked at once against the members the message allows.
    ///
    /// - Parameters:
    ///   - value: the value that must be an object.
    ///   - allowed: the member names the message defines; any other member is an error.
    ///   - path: where this object sits, for error messages (`""` for the top level).
    /// - Throws: ``WireError`` (`invalid_request` if not an object, `unknown_member`).
    public init(_ value: JSONValue, allowed: Set<String>, path: String = "") throws(WireFailure) {
        guard case .object(let list) = value else {
            throw WireError(.invalidRequest, "\(path.isEmpty ? "the body" : path) must be a JSON object")
        }
        var members: [String: JSONValue] = [:]
        for member in list {
            guard allowed.contains(member.name) else {
                throw WireError(.unknownMember, "unknown member \"\(Self.join(path, member.name))\"")
            }
            members[member.name] = member.value
        }
        self.members = members
        self.path = path
    }

    private static func join(_ path: String, _ name: String) -> String {
        path.isEmpty ? name : path + "." + name
    }

    private func missing(_ name: String) -> WireError {
        WireError(.invalidRequest, "missing member \"\(Self.join(path, name))\"")
    }

    private func wrongType(_ name: String, _ type: String) -> WireError {
        WireError(.invalidRequest, "member \"\(Self.join(path, name))\" must be \(type)")
    }

    /// Whether the member is present (and not null).
    public func has(_ name: String) -> Bool {
        if let value = members[name], value != .null { return true }
        return false
    }

    /// The raw value of a required member.
    public func value(_ name: String) throws(WireFailure) -> JSONValue {
        guard let value = members[name] else { throw missing(name) }
        return value
    }

    /// A required string member.
    public func string(_ name: String) throws(WireFailure) -> String {
        guard let value = members[name] else { throw missing(name) }
        guard case .string(let text) = value else { throw wrongType(name, "a string") }
        return text
    }

    /// An optional string member (absent or null gives nil).
    public func optionalString(_ name: String) throws(WireFailure) -> String? {
        guard let value = members[name], value != .null else { return nil }
        guard case .string(let text) = value else { throw wrongType(name, "a string") }
        return text
    }

    /// A required integer member (no fraction, no exponent, fits in `Int`).
    public func integer(_ name: String) throws(WireFailure) -> Int {
        guard let value = members[name] else { throw missing(name) }
        guard case .number(let text) = value, let number = Int(text) else {
            throw wrongType(name, "an integer")
        }
        return number
    }

    /// A required boolean member.
    public func bool(_ name: String) throws(WireFailure) -> Bool {
        guard let value = members[name] else { throw missing(name) }
        guard case .bool(let flag) = value else { throw wrongType(name, "a boolean") }
        return flag
    }

    /// A required member holding base64url (no padding) binary data.
    public func bytes(_ name: String) throws(WireFailure) -> Data {
        let text = try string(name)
        guard let data = Base64URL.decode(text) else { throw wrongType(name, "base64url without padding") }
        return data
    }

    /// A required array member.
    public func array(_ name: String) throws(WireFailure) -> [JSONValue] {
        guard let value = members[name] else { throw missing(name) }
        guard case .array(let items) = value else { throw wrongType(name, "an array") }
        return items
    }

    /// A required nested object member, read with its own allowed set.
    public func object(_ name: String, allowed: Set<String>) throws(WireFailure) -> JSONReader {
        guard let value = members[name] else { throw missing(name) }
        guard case .object = value else { throw wrongType(name, "an object") }
        return try JSONReader(value, allowed: allowed, path: Self.join(path, name))
    }

    /// A required string member from a closed set of values.
    public func enumeration<T: RawRepresentable>(_ name: String, as type: T.Type) throws(WireFailure) -> T
    where T.RawValue == String {
        let text = try string(name)
        guard let value = T(rawValue: text) else {
            throw WireError(.invalidRequest, "member \"\(Self.join(path, name))\" has an unknown value")
        }
        return value
    }
}

/// Builds JSON objects member by member in a fixed order.
public struct JSONObjectBuilder: Sendable {
    private var members: [JSONMember] = []

    /// An empty object.
    public init() {}

    /// Appends a member.
    public mutating func add(_ name: String, _ value: JSONValue) { members.append(JSONMember(name, value)) }

    /// Appends a string member.
    public mutating func add(_ name: String, _ value: String) { add(name, .string(value)) }

    /// Appends an integer member.
    public mutating func add(_ name: String, _ value: Int) { add(name, .integer(value)) }

    /// Appends a string member when `value` is not nil.
    public mutating func addIfPresent(_ name: String, _ value: String?) {
        if let value { add(name, .string(value)) }
    }

    /// The object.
    public var value: JSONValue { .object(members) }
}
