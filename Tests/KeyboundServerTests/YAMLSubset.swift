import Foundation
import KeyboundWire

/// Reads the block-style YAML subset docs/openapi.yaml is written in: nested mappings and
/// sequences by indentation (sequences may sit at their key's indentation), plain, 'single' and
/// "double" quoted scalars, `[]` and `{}`, comments on their own lines. Enough to check the
/// document in tests without a YAML dependency; anything outside the subset is an error.
enum YAMLSubset {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private struct Line {
        let number: Int
        var indent: Int
        var text: Substring
    }

    static func parse(_ text: String) throws -> JSONValue {
        var lines: [Line] = []
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = raw.drop { $0 == " " }
            if content.isEmpty || content.hasPrefix("#") { continue }
            if content.hasPrefix("\t") { throw Failure(description: "line \(offset + 1): tab indentation") }
            lines.append(Line(number: offset + 1, indent: raw.count - content.count, text: content))
        }
        var index = 0
        guard !lines.isEmpty else { return .null }
        let value = try block(&lines, &index, indent: lines[0].indent)
        guard index == lines.count else {
            throw Failure(description: "line \(lines[index].number): unexpected")
        }
        return value
    }

    private static func isSequenceItem(_ text: Substring) -> Bool { text == "-" || text.hasPrefix("- ") }

    private static func block(_ lines: inout [Line], _ index: inout Int, indent: Int) throws -> JSONValue {
        isSequenceItem(lines[index].text)
            ? try sequence(&lines, &index, indent: indent) : try mapping(&lines, &index, indent: indent)
    }

    private static func sequence(_ lines: inout [Line], _ index: inout Int, indent: Int) throws -> JSONValue {
        var items: [JSONValue] = []
        while index < lines.count, lines[index].indent == indent, isSequenceItem(lines[index].text) {
            let rest = lines[index].text.dropFirst(1).drop { $0 == " " }
            if rest.isEmpty {
                index += 1
                guard index < lines.count, lines[index].indent > indent else {
                    items.append(.null)
                    continue
                }
                items.append(try block(&lines, &index, indent: lines[index].indent))
            } else if try splitKey(rest) != nil {
                // "- key: value" opens a mapping whose members sit two columns further in.
                let inner = indent + (lines[index].text.count - rest.count)
                lines[index] = Line(number: lines[index].number, indent: inner, text: rest)
                items.append(try mapping(&lines, &index, indent: inner))
            } else {
                items.append(try scalar(rest, line: lines[index].number))
                index += 1
            }
        }
        return .array(items)
    }

    private static func mapping(_ lines: inout [Line], _ index: inout Int, indent: Int) throws -> JSONValue {
        var members: [JSONMember] = []
        while index < lines.count, lines[index].indent == indent, !isSequenceItem(lines[index].text) {
            let line = lines[index]
            guard let (key, rest) = try splitKey(line.text) else {
                throw Failure(description: "line \(line.number): expected key: value")
            }
            guard !members.contains(where: { $0.name == key }) else {
                throw Failure(description: "line \(line.number): duplicate key \(key)")
            }
            index += 1
            if !rest.isEmpty {
                members.append(JSONMember(key, try scalar(rest, line: line.number)))
            } else if index < lines.count, lines[index].indent > indent {
                members.append(JSONMember(key, try block(&lines, &index, indent: lines[index].indent)))
            } else if index < lines.count, lines[index].indent == indent, isSequenceItem(lines[index].text) {
                members.append(JSONMember(key, try sequence(&lines, &index, indent: indent)))
            } else {
                members.append(JSONMember(key, .null))
            }
        }
        if index < lines.count, lines[index].indent > indent {
            throw Failure(description: "line \(lines[index].number): bad indentation")
        }
        return .object(members)
    }

    /// Splits `key: value` (or `key:`); nil when the text is not a mapping entry.
    private static func splitKey(_ text: Substring) throws -> (String, Substring)? {
        if let quote = text.first, quote == "'" || quote == "\"" {
            guard let (key, length) = try quoted(text) else { return nil }
            let after = text.dropFirst(length)
            guard after.first == ":" else { return nil }
            return (key, after.dropFirst().drop { $0 == " " })
        }
        if text.hasSuffix(":") { return (String(text.dropLast()), "") }
        guard let range = text.range(of: ": ") else { return nil }
        return (String(text[..<range.lowerBound]), text[range.upperBound...].drop { $0 == " " })
    }

    /// A quoted scalar at the start of `text`: its value and how many characters it spans.
    private static func quoted(_ text: Substring) throws -> (String, Int)? {
        guard let quote = text.first else { return nil }
        var value = ""
        var index = text.index(after: text.startIndex)
        while index < text.endIndex {
            let character = text[index]
            if quote == "'" && character == "'" {
                let next = text.index(after: index)
                if next < text.endIndex, text[next] == "'" {
                    value.append("'")
                    index = text.index(after: next)
                    continue
                }
                return (value, text.distance(from: text.startIndex, to: next))
            }
            if quote == "\"" && character == "\\" {
                let next = text.index(after: index)
                guard next < text.endIndex else { return nil }
                let escape = String(text[index...next])
                guard case .string(let decoded) = try JSON.parse(Data(("\"" + escape + "\"").utf8)) else {
                    return nil
                }
                value += decoded
                index = text.index(after: next)
                continue
            }
            if quote == "\"" && character == "\"" {
                return (value, text.distance(from: text.startIndex, to: text.index(after: index)))
            }
            value.append(character)
            index = text.index(after: index)
        }
        return nil
    }

    private static func scalar(_ text: Substring, line: Int) throws -> JSONValue {
        switch text {
        case "[]": return .array([])
        case "{}": return .object([])
        case "null", "~": return .null
        case "true": return .bool(true)
        case "false": return .bool(false)
        default: break
        }
        if let first = text.first, first == "'" || first == "\"" {
            guard let (value, length) = try quoted(text), length == text.count else {
                throw Failure(description: "line \(line): bad quoted scalar")
            }
            return .string(value)
        }
        if let first = text.first, "[{&*!|>%@`".contains(first) {
            throw Failure(description: "line \(line): outside the YAML subset")
        }
        if Int(text) != nil { return .number(String(text)) }
        return .string(String(text))
    }
}
