/// The name of a stored item or key: 1–128 characters from `A–Z a–z 0–9 . _ -`.
///
/// Validated once, when made, so nothing downstream re-checks strings.
public struct ItemName: Sendable, Hashable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The validated name.
    public let rawValue: String

    /// Validates a name that comes from outside the code (configuration, user input).
    /// - Throws: ``KeyboundError/invalidInput`` for an empty, too long or oddly spelled name.
    public init(_ rawValue: String) throws {
        guard Self.isValid(rawValue) else {
            throw KeyboundError.invalidInput(
                "an item name is 1–128 characters of A–Z a–z 0–9 . _ -, not \"\(rawValue.prefix(40))\"")
        }
        self.rawValue = rawValue
    }

    /// A literal name in code. A malformed literal is a programming error and traps.
    public init(stringLiteral value: String) {
        precondition(Self.isValid(value), "invalid Keybound item name literal \"\(value)\"")
        rawValue = value
    }

    /// Names Keybound keeps for itself (invalidation markers) use a character apps cannot.
    init(reserved value: String) { rawValue = value }

    /// Decodes a name from a string, held to the same grammar as ``init(_:)``.
    /// - Throws: `DecodingError.dataCorrupted` for a string that is not a valid name.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let value = try container.decode(String.self)
        guard Self.isValid(value) || value.hasPrefix(Self.reservedPrefix) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid item name")
        }
        rawValue = value
    }

    /// Encodes the name as a plain string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The name itself.
    public var description: String { rawValue }

    static let reservedPrefix = "~keybound."

    /// Whether the name is one Keybound keeps for itself (an invalidation marker), which no app
    /// can make: a backend may keep such items apart (KeyboundLinux's Secret Service store keeps
    /// them unsealed, so that they outlive the TPM keys whose loss they report).
    package var isReserved: Bool { rawValue.hasPrefix(Self.reservedPrefix) }

    private static func isValid(_ value: String) -> Bool {
        (1...128).contains(value.utf8.count)
            && value.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                    UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}
