import Foundation
import KeyboundWire

/// A usage error: the command line was wrong. Exit status 2, with a hint of what to type instead.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// One option of a command. A command's table of these is the single source of both its
/// parsing (``Arguments/init(_:options:command:)`` accepts exactly these) and its `--help`
/// (``Option/help(_:)``).
struct Option {
    /// The name without its dashes: `policy` for `--policy`.
    let name: String
    /// The value's placeholder in help (`P`, `FILE`); nil for a flag, which takes no value.
    let value: String?
    /// One line for `--help`.
    let summary: String
    /// Whether the command needs it (parsing refuses the command line without it).
    var isRequired = false
    /// Whether it may be given more than once (``Arguments/values(_:)`` has every value).
    var isRepeatable = false
    /// The environment variable that sets it when the flag is absent (`KEYBOUND_DB`), if any.
    var variable: String?
    /// What help shows under the summary: the values it takes and its default
    /// (`60-86400, default 900`), if it says more than the summary.
    var detail: String?

    /// An option that takes a value: `--name VALUE`.
    static func value(
        _ name: String, _ placeholder: String, _ summary: String, required: Bool = false,
        repeatable: Bool = false
    ) -> Option {
        Option(
            name: name, value: placeholder, summary: summary, isRequired: required, isRepeatable: repeatable)
    }

    /// A boolean option: `--name`.
    static func flag(_ name: String, _ summary: String) -> Option {
        Option(name: name, value: nil, summary: summary)
    }

    /// `--help`, which every command has.
    static let help = Option.flag("help", "print this help")

    /// How the option is written in a synopsis: `--policy P`, `--json`.
    var synopsis: String { value.map { "--\(name) \($0)" } ?? "--\(name)" }

    /// How a command's synopsis shows it: optional ones in brackets, repeatable ones with `…`.
    var usage: String {
        let written = synopsis + (isRepeatable ? "…" : "")
        return isRequired ? written : "[\(written)]"
    }

    /// The options' help, aligned in columns: synopsis, summary and (when any option has one)
    /// environment variable, with the detail on a line of its own under the summary.
    static func help(_ options: [Option], indent: Int = 2) -> String {
        helpEntries(options, indent: indent).joined(separator: "\n")
    }

    /// Help in sections: each section's title, then its options, aligned across all sections.
    static func help(sections: [(title: String, options: [Option])]) -> String {
        var entries = helpEntries(sections.flatMap(\.options))[...]
        return sections.map { section in
            defer { entries = entries.dropFirst(section.options.count) }
            return ([section.title + ":"] + entries.prefix(section.options.count)).joined(separator: "\n")
        }.joined(separator: "\n\n")
    }

    /// ``help(_:indent:)`` of each option apart (one or two lines each), for help in sections.
    static func helpEntries(_ options: [Option], indent: Int = 2) -> [String] {
        let lines = columns(options.map { [$0.synopsis, $0.summary, $0.variable ?? ""] }, indent: indent)
            .split(separator: "\n", omittingEmptySubsequences: false)
        let summaryColumn = indent + (options.map(\.synopsis.count).max() ?? 0) + columnGap
        return zip(options, lines).map { option, line in
            guard let detail = option.detail else { return String(line) }
            return line + "\n" + String(repeating: " ", count: summaryColumn) + detail
        }
    }
}

/// The spaces between two columns of help.
let columnGap = 3

/// Rows of columns, every column but the last aligned (help text is generated, never
/// hand-aligned). Empty trailing cells add no spacing.
func columns(_ rows: [[String]], indent: Int) -> String {
    let count = rows.map(\.count).max() ?? 0
    let widths = (0..<count).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
    }
    let margin = String(repeating: " ", count: indent)
    return rows.map { row in
        let cells = Array(row.reversed().drop { $0.isEmpty }.reversed())
        return margin
            + cells.enumerated().map { column, cell in
                column == cells.count - 1
                    ? cell : cell + String(repeating: " ", count: widths[column] - cell.count + columnGap)
            }.joined()
    }.joined(separator: "\n")
}

/// `columns` for rows of two.
func columns(_ rows: [(String, String)], indent: Int) -> String {
    columns(rows.map { [$0.0, $0.1] }, indent: indent)
}

/// Parsed command-line arguments in the swift-argument-parser spirit: `--name value`,
/// `--name=value`, boolean `--flag`, and positionals.
struct Arguments {
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []
    private(set) var positionals: [String] = []

    /// Parses `raw` against a command's option table: an option that is not in it, or a
    /// required one that is missing (unless `--help` asks for the help), is a usage error at
    /// once, so typos never pass silently.
    /// - Parameters:
    ///   - raw: the arguments after the command's name.
    ///   - table: the command's options.
    ///   - command: how to name the command in the error ("keybound device store").
    init(_ raw: [String], options table: [Option], command: String) throws {
        try self.init(raw) { name in
            guard let option = table.first(where: { $0.name == name }) else {
                throw UsageError("unknown option --\(name) (see \(command) --help)")
            }
            return option.value != nil
        }
        if !isSet("help"), let missing = table.first(where: { $0.isRequired && value($0.name) == nil }) {
            throw UsageError("\(missing.synopsis) is required (see \(command) --help)")
        }
    }

    /// - Parameter takesValue: whether `--name` takes a value; throws for an unknown option.
    private init(_ raw: [String], takesValue: (String) throws -> Bool) throws {
        var index = 0
        while index < raw.count {
            let word = raw[index]
            index += 1
            if word == "--" {
                positionals.append(contentsOf: raw[index...])
                break
            }
            guard word.hasPrefix("--"), word.count > 2 else {
                positionals.append(word)
                continue
            }
            var name = String(word.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if try !takesValue(name) {
                guard value == nil else { throw UsageError("--\(name) takes no value") }
                flags.insert(name)
                continue
            }
            if value == nil {
                guard index < raw.count else { throw UsageError("--\(name) needs a value") }
                value = raw[index]
                index += 1
            }
            options[name, default: []].append(value ?? "")
        }
    }

    /// The index in `raw` of the first word that is neither an option nor the value of one of
    /// `options` (a command's global options): the name of its subcommand.
    static func firstOperand(_ raw: [String], options: [Option]) -> Int? {
        var index = 0
        while index < raw.count {
            let word = raw[index]
            if word == "--" { return index + 1 < raw.count ? index + 1 : nil }
            guard word.hasPrefix("--"), word.count > 2 else { return index }
            let name = word.dropFirst(2).prefix { $0 != "=" }
            let takesValue = options.first { $0.name == name }?.value != nil
            index += takesValue && !word.contains("=") ? 2 : 1
        }
        return nil
    }

    /// The last value given for `--name`, or nil.
    func value(_ name: String) -> String? { options[name]?.last }

    /// Every value given for a repeatable `--name`, in order.
    func values(_ name: String) -> [String] { options[name] ?? [] }

    /// Whether the boolean `--name` was given.
    func isSet(_ name: String) -> Bool { flags.contains(name) }
}

/// The bytes of a file the command line names, at most `limit` of them.
/// - Parameters:
///   - label: how messages name it before its path (`--jwks`).
///   - what: what the file should hold, for the message when it is larger.
/// - Throws: ``UsageError`` when it cannot be read or is larger than `limit`.
func readFile(_ path: String, label: String, limit: Int, what: String) throws -> Data {
    let data: Data
    do {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        data = try handle.read(upToCount: limit + 1) ?? Data()
    } catch {
        throw UsageError("\(label) \(path): cannot read it (\(error.localizedDescription))")
    }
    guard data.count <= limit else {
        throw UsageError("\(label) \(path): larger than \(limit) bytes, not \(what)")
    }
    return data
}

/// Writes to standard error.
func printError(_ message: String) {
    // The throwing variant: `write(_:)` traps when standard error is closed or full.
    try? FileHandle.standardError.write(contentsOf: Data((message + "\n").utf8))
}

/// Prints `value` as compact JSON on one line: the CLI's one JSON writer (KeyboundWire's, the
/// same the server answers with).
func printJSON(_ value: JSONValue) {
    print(String(decoding: JSON.serialize(value), as: UTF8.self))
}
