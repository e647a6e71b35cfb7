import Foundation

/// A usage error: the command line was wrong. Exit status 2, with a hint of what to type instead.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// Parsed command-line arguments in the swift-argument-parser spirit: `--name value`,
/// `--name=value`, boolean `--flag`, and positionals. Every option must be consumed;
/// `finish()` rejects leftovers so typos never pass silently.
struct Arguments {
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []
    private(set) var positionals: [String] = []
    private var consumed: Set<String> = []

    /// - Parameters:
    ///   - raw: the arguments after the subcommand name.
    ///   - flagNames: the boolean options this command knows (they take no value).
    init(_ raw: [String], flagNames: Set<String> = []) throws {
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
            if flagNames.contains(name) {
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

    /// The last value given for `--name`, or nil.
    mutating func option(_ name: String) -> String? {
        consumed.insert(name)
        return options[name]?.last
    }

    /// Every value given for a repeatable `--name`, in order.
    mutating func options(_ name: String) -> [String] {
        consumed.insert(name)
        return options[name] ?? []
    }

    /// Whether the boolean `--name` was given.
    mutating func flag(_ name: String) -> Bool {
        consumed.insert(name)
        return flags.contains(name)
    }

    /// Throws a usage error for any option nobody asked about.
    func finish() throws {
        let unknown = Set(options.keys).union(flags).subtracting(consumed)
        if let name = unknown.sorted().first {
            throw UsageError("unknown option --\(name) (see --help)")
        }
    }
}

/// Writes to standard error.
func printError(_ message: String) {
    // The throwing variant: `write(_:)` traps when standard error is closed or full.
    try? FileHandle.standardError.write(contentsOf: Data((message + "\n").utf8))
}
