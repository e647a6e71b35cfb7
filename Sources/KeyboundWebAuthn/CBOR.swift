import Foundation

/// One CBOR data item (RFC 8949) of the subset WebAuthn and App Attest use.
///
/// Integers, byte and text strings, arrays, maps, `true`, `false` and `null`. No tags, no floats,
/// no `undefined`, no indefinite lengths: ``init(decoding:)`` refuses them, so a value of this type
/// is always something WebAuthn can mean.
///
/// ```swift
/// let object = CBOR.map([
///     (.text("fmt"), .text("none")),
///     (.text("attStmt"), .map([])),
///     (.text("authData"), .bytes(authenticatorData)),
/// ])
/// let attestationObject = object.encoded()  // keys sorted as CTAP2 requires
/// ```
public indirect enum CBOR: Sendable, Hashable {
    /// An unsigned integer, major type 0.
    case unsigned(UInt64)
    /// A negative integer, major type 1: the value is `-1 - n`.
    case negative(UInt64)
    /// A byte string, major type 2.
    case bytes(Data)
    /// A UTF-8 text string, major type 3.
    case text(String)
    /// An array, major type 4.
    case array([CBOR])
    /// A map, major type 5: entries in order, keys unique.
    case map(CBORMap)
    /// `true` or `false`, simple values 21 and 20.
    case bool(Bool)
    /// `null`, simple value 22.
    case null

    /// The deepest nesting of arrays and maps ``init(decoding:)`` accepts. WebAuthn needs 4
    /// (attestation object → statement → certificate array → certificate).
    public static let maximumDepth = 16

    /// A map from key–value pairs, kept in this order (``encoded()`` sorts them).
    ///
    /// - Parameter entries: The pairs; keys should be unique (duplicates are encoded as given,
    ///   which no strict decoder accepts).
    public static func map(_ entries: [(CBOR, CBOR)]) -> CBOR {
        .map(CBORMap(entries))
    }

    /// The integer `value`, as major type 0 or 1.
    public static func integer(_ value: Int64) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// The integer, if this is one that fits in `Int64`.
    public var integerValue: Int64? {
        switch self {
        case .unsigned(let value): return value <= UInt64(Int64.max) ? Int64(value) : nil
        case .negative(let value): return value <= UInt64(Int64.max) ? -1 - Int64(value) : nil
        default: return nil
        }
    }

    /// The bytes, if this is a byte string.
    public var bytesValue: Data? {
        if case .bytes(let value) = self { return value }
        return nil
    }

    /// The text, if this is a text string.
    public var textValue: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    /// The items, if this is an array.
    public var arrayValue: [CBOR]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The map, if this is one.
    public var mapValue: CBORMap? {
        if case .map(let value) = self { return value }
        return nil
    }
}

/// The entries of a CBOR map, in order.
///
/// Lookups are linear: WebAuthn's maps hold a handful of entries, and a decoded map can never
/// hold more entries than its encoding has bytes.
public struct CBORMap: Sendable, Hashable {
    /// One key–value pair.
    public struct Entry: Sendable, Hashable {
        /// The key.
        public var key: CBOR
        /// The value.
        public var value: CBOR
    }

    /// The pairs, in the order they were decoded or given.
    public let entries: [Entry]

    /// A map holding `pairs` in this order.
    public init(_ pairs: [(CBOR, CBOR)]) {
        self.entries = pairs.map { Entry(key: $0.0, value: $0.1) }
    }

    /// The value under `key`, or `nil`.
    public subscript(key: CBOR) -> CBOR? {
        entries.first { $0.key == key }?.value
    }

    /// The value under the text key `key`, or `nil`.
    public subscript(text key: String) -> CBOR? {
        self[.text(key)]
    }

    /// The value under the integer key `key` (COSE labels), or `nil`.
    public subscript(integer key: Int64) -> CBOR? {
        self[.integer(key)]
    }

    /// The number of entries.
    public var count: Int { entries.count }
}

// MARK: - Encoding

extension CBOR {
    /// The CTAP2 canonical encoding: shortest integer and length forms, definite lengths, map
    /// keys sorted by major type, then encoded length, then bytes.
    public func encoded() -> Data {
        var out: [UInt8] = []
        encode(into: &out)
        return Data(out)
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let value): Self.appendHead(major: 0, value, to: &out)
        case .negative(let value): Self.appendHead(major: 1, value, to: &out)
        case .bytes(let value):
            Self.appendHead(major: 2, UInt64(value.count), to: &out)
            out.append(contentsOf: value)
        case .text(let value):
            let utf8 = Array(value.utf8)
            Self.appendHead(major: 3, UInt64(utf8.count), to: &out)
            out.append(contentsOf: utf8)
        case .array(let items):
            Self.appendHead(major: 4, UInt64(items.count), to: &out)
            for item in items { item.encode(into: &out) }
        case .map(let map):
            Self.appendHead(major: 5, UInt64(map.count), to: &out)
            let sorted = map.entries.map { (key: $0.key.encoded(), value: $0.value) }
                .sorted { Self.canonicalOrder($0.key, $1.key) < 0 }
            for entry in sorted {
                out.append(contentsOf: entry.key)
                entry.value.encode(into: &out)
            }
        case .bool(let value): out.append(value ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        }
    }

    /// The initial byte and argument of an item, in the shortest form.
    private static func appendHead(major: UInt8, _ value: UInt64, to out: inout [UInt8]) {
        let type = major << 5
        switch value {
        case 0..<24: out.append(type | UInt8(value))
        case 24...0xFF: out += [type | 24, UInt8(value)]
        case 0x100...0xFFFF: out += [type | 25] + bigEndian(value, count: 2)
        case 0x1_0000...0xFFFF_FFFF: out += [type | 26] + bigEndian(value, count: 4)
        default: out += [type | 27] + bigEndian(value, count: 8)
        }
    }

    private static func bigEndian(_ value: UInt64, count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    /// CTAP2's key order on encoded keys: major type, then length, then bytes. Negative, zero or
    /// positive as `lhs` sorts before, with or after `rhs`.
    static func canonicalOrder<A: Collection, B: Collection>(_ lhs: A, _ rhs: B) -> Int
    where A.Element == UInt8, B.Element == UInt8 {
        let lhsMajor = (lhs.first ?? 0) >> 5
        let rhsMajor = (rhs.first ?? 0) >> 5
        if lhsMajor != rhsMajor { return lhsMajor < rhsMajor ? -1 : 1 }
        if lhs.count != rhs.count { return lhs.count < rhs.count ? -1 : 1 }
        for (left, right) in zip(lhs, rhs) where left != right {
            return left < right ? -1 : 1
        }
        return 0
    }
}
