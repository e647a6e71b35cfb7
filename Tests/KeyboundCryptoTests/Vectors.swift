import Foundation
import Testing

/// Loads the files in `Vectors/` from the test bundle (never from outside the package).
enum Vectors {
    struct Missing: Error, CustomStringConvertible {
        let name: String
        var description: String { "test vector file \(name) is not in the test bundle" }
    }

    static func data(_ name: String) throws -> Data {
        guard let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Vectors")
        else {
            throw Missing(name: name)
        }
        return try Data(contentsOf: url)
    }

    /// A Wycheproof JSON file, decoded with its test group type.
    static func wycheproof<Group: Decodable>(_ name: String, groups: Group.Type) throws -> WycheproofFile<
        Group
    > {
        try JSONDecoder().decode(WycheproofFile<Group>.self, from: data(name))
    }

    /// The `key = value` records of a NIST CAVP `.rsp` file or of pyca's RFC vector text. A record
    /// starts at each `firstKey` line (blank lines do not separate records reliably in these files);
    /// `#` comments and `[section]` lines are skipped.
    static func records(_ name: String, firstKey: String) throws -> [[String: String]] {
        let text = String(decoding: try data(name), as: UTF8.self)
        var records: [[String: String]] = []
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            guard !line.hasPrefix("#"), !line.hasPrefix("["), let equals = line.firstIndex(of: "=") else {
                continue
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if key == firstKey || records.isEmpty {
                records.append([:])
            }
            records[records.count - 1][key] = value
        }
        return records
    }
}

/// The common shape of a Wycheproof test vector file (schema v1).
struct WycheproofFile<Group: Decodable>: Decodable {
    let algorithm: String
    let numberOfTests: Int
    let testGroups: [Group]
}

/// A Wycheproof verdict. `acceptable` marks inputs a library may accept or refuse.
enum WycheproofResult: String, Decodable {
    case valid
    case invalid
    case acceptable
}

/// What Wycheproof's fields hold: hex strings.
struct Hex: Decodable, CustomStringConvertible {
    let data: Data

    init(from decoder: any Decoder) throws {
        let string = try decoder.singleValueContainer().decode(String.self)
        guard let data = Data(hex: string) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not hex: \(string)"))
        }
        self.data = data
    }

    var description: String { data.hex }
}

extension Data {
    /// Decodes an even number of hex digits; `nil` for anything else.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
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

    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

/// Decodes hex from a literal in a test, recording an issue (not crashing) if it is malformed.
func hex(_ string: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Data {
    try #require(Data(hex: string), "malformed hex literal", sourceLocation: sourceLocation)
}
