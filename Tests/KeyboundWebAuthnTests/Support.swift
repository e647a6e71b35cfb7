import Foundation
import KeyboundWebAuthn
import KeyboundWire
import Testing

/// Loads the files in `Vectors/` (copied from the shared vectors with their licences and
/// SOURCE.md) from the test bundle, never from outside the package.
enum Vectors {
    struct Missing: Error, CustomStringConvertible {
        let path: String
        var description: String { "test vector file \(path) is not in the test bundle" }
    }

    /// The bytes of `Vectors/<path>`.
    static func data(_ path: String) throws -> Data {
        let parts = path.split(separator: "/")
        let directory = (["Vectors"] + parts.dropLast().map(String.init)).joined(separator: "/")
        guard let name = parts.last,
            let url = Bundle.module.url(
                forResource: String(name), withExtension: nil, subdirectory: directory)
        else { throw Missing(path: path) }
        return try Data(contentsOf: url)
    }

    /// `Vectors/<path>` parsed as JSON.
    static func json(_ path: String) throws -> JSONValue {
        try JSON.parse(data(path))
    }

    /// The PEM certificate `Vectors/<path>`.
    static func certificate(_ path: String) throws -> Certificate {
        try Certificate(pemRepresentation: String(decoding: data(path), as: UTF8.self))
    }
}

/// A vector member that is missing or of the wrong type.
struct VectorShapeError: Error, CustomStringConvertible {
    let description: String
}

extension JSONValue {
    /// The member `name` of an object.
    func member(_ name: String) throws -> JSONValue {
        guard case .object(let members) = self, let found = members.first(where: { $0.name == name }) else {
            throw VectorShapeError(description: "vector member \"\(name)\" is missing")
        }
        return found.value
    }

    /// Whether the object has a non-null member `name`.
    func has(_ name: String) -> Bool {
        guard case .object(let members) = self, let found = members.first(where: { $0.name == name }) else {
            return false
        }
        return found.value != .null
    }

    /// The string member `name`.
    func string(_ name: String) throws -> String {
        guard case .string(let text) = try member(name) else {
            throw VectorShapeError(description: "vector member \"\(name)\" is not a string")
        }
        return text
    }

    /// The integer member `name`.
    func integer(_ name: String) throws -> Int {
        guard case .number(let text) = try member(name), let value = Int(text) else {
            throw VectorShapeError(description: "vector member \"\(name)\" is not an integer")
        }
        return value
    }

    /// The array member `name`.
    func array(_ name: String) throws -> [JSONValue] {
        guard case .array(let items) = try member(name) else {
            throw VectorShapeError(description: "vector member \"\(name)\" is not an array")
        }
        return items
    }

    /// The member `name` holding base64url.
    func base64URL(_ name: String) throws -> Data {
        try decode(Base64URL.decode(string(name)), name)
    }

    /// The member `name` holding standard base64.
    func base64(_ name: String) throws -> Data {
        try decode(Data(base64Encoded: string(name)), name)
    }

    /// The member `name` holding hex.
    func hex(_ name: String) throws -> Data {
        try decode(Data(hex: string(name)), name)
    }

    /// The member `name` holding an ISO 8601 time.
    func date(_ name: String) throws -> Date {
        try Date(iso8601: string(name))
    }

    /// This value as compact JSON bytes: a response object as the browser would post it.
    var serialized: Data { JSON.serialize(self) }

    private func decode(_ data: Data?, _ name: String) throws -> Data {
        guard let data else {
            throw VectorShapeError(description: "vector member \"\(name)\" is not decodable")
        }
        return data
    }
}

extension Date {
    /// Parses `2021-09-01T00:00:00Z`, `2020-11-21T22:13:00.187Z` or `2022-04-06T10:28:50+00:00`.
    init(iso8601 text: String) throws {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) {
            self = date
            return
        }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let date = formatter.date(from: text) else {
            throw VectorShapeError(description: "not an ISO 8601 time: \(text)")
        }
        self = date
    }
}

extension Data {
    /// Decodes an even number of hex digits; `nil` for anything else.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        self.init(bytes)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A response JSON with one member of `response` replaced: for tampering tests.
func replacing(_ member: String, in credential: JSONValue, with value: JSONValue) throws -> Data {
    guard case .object(var members) = credential,
        let index = members.firstIndex(where: { $0.name == "response" }),
        case .object(var inner) = members[index].value
    else { throw VectorShapeError(description: "not a credential JSON") }
    if let slot = inner.firstIndex(where: { $0.name == member }) {
        inner[slot].value = value
    } else {
        inner.append(JSONMember(member, value))
    }
    members[index].value = .object(inner)
    return JSON.serialize(.object(members))
}

/// Asserts that `body` throws exactly the WebAuthn error `expected` (compared by kind).
func expectRefusal<T>(
    _ expected: WebAuthnError, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) {
    do {
        _ = try body()
        Issue.record("expected \(expected), got success. \(comment)", sourceLocation: sourceLocation)
    } catch let error as WebAuthnError {
        #expect(error == expected, "got \(error). \(comment)", sourceLocation: sourceLocation)
    } catch {
        Issue.record(
            "expected \(expected), got a foreign error \(error). \(comment)", sourceLocation: sourceLocation)
    }
}

/// A deterministic generator (SplitMix64), so a failing mutation can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
