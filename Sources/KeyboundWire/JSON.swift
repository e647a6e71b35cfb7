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
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return Data(out)
    }

    /// The JSON string literal for `string`, quotes included, escaped as RFC 8259 requires.
    package static func quote(_ string: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count + 2)
        writeString(string, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    // The writer works on UTF-8 bytes: a `String` grown scalar by scalar costs several times more.
    private static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let text): writeString(text, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.name, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Escapes `"`, `\` and the control characters; every other byte of the UTF-8 is copied as
    /// it is (bytes of multi-byte characters are never below 0x80, so they never need escaping).
    /// It reads the string's contiguous UTF-8: going through `String.UTF8View` byte by byte cost
    /// as much as the rest of a small response.
    private static func writeString(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { writeString(utf8: $0, to: &out) }
    }

    private static func writeString(utf8: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Ids, tokens and names almost never need an escape: then the bytes go in at once.
        guard utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") })
        else {
            out.append(contentsOf: utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x00..<0x20:
                out.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                ])
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        func failure(_ detail: String) -> WireError {
            WireError(.invalidRequest, "malformed JSON at byte \(index): \(detail)")
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
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
            if closes(UInt8(ascii: "}")) { return .object(members) }
            repeat {
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
            } while try continues(before: UInt8(ascii: "}"))
            return .object(members)
        }

        mutating func array(depth: Int) throws(WireFailure) -> JSONValue {
            index += 1
            var items: [JSONValue] = []
            if closes(UInt8(ascii: "]")) { return .array(items) }
            repeat {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
            } while try continues(before: UInt8(ascii: "]"))
            return .array(items)
        }

        /// Right after an object's or an array's opening bracket: skips `close` and returns true
        /// when the container is empty.
        mutating func closes(_ close: UInt8) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == close else { return false }
            index += 1
            return true
        }

        /// After a member or an item: skips `,` and returns true when another follows, or skips
        /// `close` and returns false.
        mutating func continues(before close: UInt8) throws(WireFailure) -> Bool {
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end") }
            let byte = bytes[index]
            guard byte == UInt8(ascii: ",") || byte == close else {
                throw failure("expected ',' or '\(Character(Unicode.Scalar(close)))'")
            }
            index += 1
            return byte != close
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
            // The string's UTF-8: runs of bytes copied as they are, escapes encoded. Checked once
            // at the end: String(decoding:) repairs invalid UTF-8, and a repaired string no
            // longer equals its bytes. (An escape never yields a continuation byte, so a run's
            // broken sequence cannot be completed by one.)
            var utf8: [UInt8] = []
            var runStart = index
            func finish(_ utf8: [UInt8]) -> String? {
                var text = String(decoding: utf8, as: UTF8.self)
                // Compared as two contiguous buffers: through `String.UTF8View` the comparison
                // cost more than the rest of the parse.
                let intact = text.withUTF8 { decoded in
                    utf8.withUnsafeBufferPointer { decoded.elementsEqual($0) }
                }
                return intact ? text : nil
            }
            while true {
                guard index < bytes.count else { throw failure("unterminated string") }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    utf8.append(contentsOf: bytes[runStart..<index])
                    index += 1
                    guard let text = finish(utf8) else { throw failure("invalid UTF-8") }
                    return text
                }
                if byte < 0x20 { throw failure("control character in string") }
                if byte != UInt8(ascii: "\\") {
                    index += 1
                    continue
                }
                utf8.append(contentsOf: bytes[runStart..<index])
                index += 1
                guard index < bytes.count else { throw failure("unterminated string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): utf8.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): utf8.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): utf8.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
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
                    UTF8.encode(scalar) { utf8.append($0) }
                default: throw failure("bad escape")
                }
                runStart = index
            }
        }
    }
}
