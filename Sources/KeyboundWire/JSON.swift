import Foundation

/// A JSON value as it appears on the wire. Objects keep their member order, numbers keep their
/// exact text, so nothing is lost or reordered between parsing and writing.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's exact text as it appeared (validated against the JSON grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([JSONMember])

    /// A number value from an integer.
    package static func integer(_ value: Int) -> JSONValue { .number(String(value)) }
}

/// One member of a JSON object.
package struct JSONMember: Sendable, Equatable {
    /// The member name.
    package var name: String
    /// The member value.
    package var value: JSONValue

    /// - Parameters:
    ///   - name: the member name.
    ///   - value: the member value.
    package init(_ name: String, _ value: JSONValue) {
        self.name = name
        self.value = value
    }
}

/// Strict JSON (RFC 8259) parsing and compact writing.
///
/// Parsing rejects duplicate member names, trailing data, invalid escapes, unpaired surrogates,
/// control characters in strings, and nesting deeper than ``maximumDepth``.
package enum JSON {
    /// The deepest nesting accepted by ``parse(_:)``.
    package static let maximumDepth = 32

    /// Parses one JSON value that fills `data` (whitespace around it allowed).
    /// - Throws: ``WireError`` with code `invalid_request` when `data` is not valid JSON.
    package static func parse(_ data: Data) throws(WireFailure) -> JSONValue {
        var parser = Parser(bytes: [UInt8](data))
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else {
            throw parser.failure("unexpected data after the value")
        }
        return value
    }

    /// Writes `value` as compact JSON (no whitespace), members in their order.
    package static func serialize(_ value: JSONValue) -> Data {
        var out = ""
        write(value, to: &out)
        return Data(out.utf8)
    }

    private static func write(_ value: JSONValue, to out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): writeString(text, to: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                write(item, to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { out += "," }
                writeString(member.name, to: &out)
                out += ":"
                write(member.value, to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        func failure(_ detail: String) -> WireError {
            WireError(.invalidRequest, "malformed JSON at byte \(index): \(detail)")
        }

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) throws(WireFailure) -> JSONValue {
            guard depth < JSON.maximumDepth else { throw failure("nested too deeply") }
            guard index < bytes.count else { throw failure("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            default: return .number(try number())
            }
        }

        mutating func literal(_ word: String) throws(WireFailure) {
            let expected = Array(word.utf8)
            guard index + expected.count <= bytes.count,
                Array(bytes[index..<index + expected.count]) == expected
            else { throw failure("unexpected character") }
            index += expected.count
        }

        mutating func object(depth: Int) throws(WireFailure) -> JSONValue {
            index += 1
            var members: [JSONMember] = []
            var names: Set<String> = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw failure("expected a member name")
                }
                let name = try string()
                guard names.insert(name).inserted else {
                    throw WireError(.invalidRequest, "duplicate member \"\(name)\"")
                }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                    throw failure("expected ':'")
                }
                index += 1
                skipWhitespace()
                members.append(JSONMember(name, try value(depth: depth + 1)))
                skipWhitespace()
                guard index < bytes.count else { throw failure("unexpected end") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { throw failure("expected ',' or '}'") }
                index += 1
                return .object(members)
            }
        }

        mutating func array(depth: Int) throws(WireFailure) -> JSONValue {
            index += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                guard index < bytes.count else { throw failure("unexpected end") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { throw failure("expected ',' or ']'") }
                index += 1
                return .array(items)
            }
        }

        mutating func number() throws(WireFailure) -> String {
            let start = index
            func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("unexpected character") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw failure("bad number") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")
                {
                    index += 1
                }
                guard index < bytes.count, isDigit(bytes[index]) else { throw failure("bad number") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            guard index - start <= 64 else { throw failure("number too long") }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func hex4() throws(WireFailure) -> UInt32 {
            guard index + 4 <= bytes.count else { throw failure("bad \\u escape") }
            var result: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: throw failure("bad \\u escape")
                }
                result = result * 16 + digit
                index += 1
            }
            return result
        }

        mutating func string() throws(WireFailure) -> String {
            index += 1
            var scalars = String.UnicodeScalarView()
            var runStart = index
            func flushRun(_ parser: Parser, upTo end: Int, into scalars: inout String.UnicodeScalarView)
                -> Bool
            {
                guard runStart < end else { return true }
                let slice = parser.bytes[runStart..<end]
                let text = String(decoding: slice, as: UTF8.self)
                // String(decoding:) repairs invalid UTF-8; a repaired string no longer round-trips.
                guard text.utf8.elementsEqual(slice) else { return false }
                scalars.append(contentsOf: text.unicodeScalars)
                return true
            }
            while true {
                guard index < bytes.count else { throw failure("unterminated string") }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    guard flushRun(self, upTo: index, into: &scalars) else { throw failure("invalid UTF-8") }
                    index += 1
                    return String(scalars)
                }
                if byte < 0x20 { throw failure("control character in string") }
                if byte != UInt8(ascii: "\\") {
                    index += 1
                    continue
                }
                guard flushRun(self, upTo: index, into: &scalars) else { throw failure("invalid UTF-8") }
                index += 1
                guard index < bytes.count else { throw failure("unterminated string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    let first = try hex4()
                    var code = first
                    if (0xD800...0xDBFF).contains(first) {
                        guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw failure("unpaired surrogate") }
                        index += 2
                        let second = try hex4()
                        guard (0xDC00...0xDFFF).contains(second) else { throw failure("unpaired surrogate") }
                        code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(first) {
                        throw failure("unpaired surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw failure("bad \\u escape") }
                    scalars.append(scalar)
                default: throw failure("bad escape")
                }
                runStart = index
            }
        }
    }
}
