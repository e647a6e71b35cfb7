import Foundation
import KeyboundServer
import KeyboundWire

/// What the operator commands (`keybound user`, `client`, `keys`, `receipt`) share: a subcommand named by
/// the first word (`client add`), each with its own option table (the one source of its parsing
/// and of the help); `--db` and the other settings they share with `serve`, read as `serve`
/// reads them (the flag, else its `KEYBOUND_*` variable; the database password and the
/// key-encryption key from the environment only); `--json`, which prints one object,
/// `{"ok":true,…}` or `{"ok":false,"error":{"code","message"}}`. Exit status 0 done, 1 refused,
/// 2 usage (a message on standard error, nothing on standard output).
struct OperatorCommand: Sendable {
    /// The command's name: `client`.
    let name: String
    /// One line for the help's first line: what the command works on.
    let title: String
    let actions: [Action]
    /// What the help says between the synopsis and the options: what each subcommand does,
    /// with examples.
    let notes: String
    /// What exit status 1 covers, for the help's last line: `taken, invalid, no such user`.
    let refusals: String

    /// The positionals a subcommand takes after its name.
    enum Operands: Sendable {
        case none
        /// Exactly one: `NAME`.
        case one(String)
        /// At most one: `[NAME]`.
        case optional(String)
        /// Exactly two: `NAME ROLE`; the second is ``Invocation/secondOperand``.
        case two(String, String)
    }

    /// One subcommand: `add NAME`, its options, and what it does.
    struct Action: Sendable {
        let name: String
        let operands: Operands
        /// Its own options (not `--db`, `--json`, `--help`).
        var options: [Option] = []
        /// The settings of `keybound serve` it takes too (`--key-publish-delay`).
        var settings: [ServeOption] = []
        /// Does it: may throw a ``UsageError`` before it touches the database (exit 2), and
        /// throws anything else for a refusal (exit 1).
        let perform: @Sendable (Invocation) throws -> Outcome

        /// Every option it parses, as help shows them: its own, its settings, then the shared.
        var table: [Option] { ownTable + OperatorCommand.sharedOptions }

        /// Its options and settings as parsing and help take them.
        var ownTable: [Option] {
            let defaults = Configuration()
            return options + settings.map { $0.option(defaults: defaults) }
        }
    }

    /// What a subcommand is given: its options and operand, and the configuration they make.
    struct Invocation {
        let arguments: Arguments
        /// The operand, if the subcommand takes one and it was given.
        let operand: String?
        /// The second operand of a subcommand that takes ``Operands/two(_:_:)``.
        var secondOperand: String?
        /// `Configuration()` with `--db`, the subcommand's settings, the database password and the
        /// key-encryption key; no log.
        let configuration: Configuration
    }

    /// What a subcommand that succeeded prints.
    struct Outcome {
        /// `--json`'s members after `"ok": true`.
        var members: [JSONMember]
        /// The plain output, on standard output (nothing when nil).
        var text: String?
        /// A remark on standard error without `--json`: `no clients`.
        var notice: String?
    }

    /// A refusal of the command's own, not the server's (exit 1, `--json`'s code `code`).
    struct Refusal: Error, CustomStringConvertible {
        let description: String
        let code: String
        init(_ message: String, code: String = "failed") {
            description = message
            self.code = code
        }
    }

    /// `--db`, `--json` and `--help`, which every subcommand takes.
    static let sharedOptions: [Option] = [
        ServeCommand.database.option(defaults: Configuration()),
        .flag("json", "print one JSON object: {\"ok\":true,…} or {\"ok\":false,\"error\":{…}}"),
        .help,
    ]

    /// `keybound client`: for messages.
    private var command: String { "keybound \(name)" }

    /// `'add', 'list' and 'remove'`.
    private var actionNames: String {
        let names = actions.map { "'\($0.name)'" }
        return names.count < 2
            ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + (names.last ?? "")
    }

    var usage: String {
        """
        \(command) — \(title)

        \(synopses)

        \(notes)

        \(Option.help(sections: optionSections))

        The PostgreSQL password comes from KEYBOUND_DB_PASSWORD or PGPASSWORD; the key that seals
        the OAuth signing keys from KEYBOUND_KEY_ENCRYPTION_KEY, as for keybound serve.

        exit status: 0 done, 1 refused (\(refusals), database error), 2 usage
        """
    }

    /// `usage: keybound client add NAME …`, one subcommand a line, wrapped under its name.
    private var synopses: String {
        actions.enumerated().flatMap { index, action -> [String] in
            let start = (index == 0 ? "usage: " : "       ") + "\(command) \(action.name)"
            let words =
                [Self.operandText(action.operands)].filter { !$0.isEmpty }
                + action.table.filter {
                    $0.name != "help"
                }.map(\.usage)
            var lines = [start]
            for word in words {
                if lines[lines.count - 1].count + 1 + word.count > 100 {
                    lines.append(String(repeating: " ", count: start.count))
                }
                lines[lines.count - 1] += " " + word
            }
            return lines
        }.joined(separator: "\n")
    }

    /// The options in help: each subcommand's own, then those every subcommand takes.
    private var optionSections: [(title: String, options: [Option])] {
        actions.filter { !$0.ownTable.isEmpty }.map { ("options of \($0.name)", $0.ownTable) }
            + [("options", Self.sharedOptions)]
    }

    private static func operandText(_ operands: Operands) -> String {
        switch operands {
        case .none: ""
        case .one(let placeholder): placeholder
        case .optional(let placeholder): "[\(placeholder)]"
        case .two(let first, let second): "\(first) \(second)"
        }
    }

    /// Runs the subcommand that `raw` names.
    func run(_ raw: [String]) -> Int32 {
        guard let index = Arguments.firstOperand(raw, options: Self.sharedOptions) else {
            if (try? Arguments(raw, options: Self.sharedOptions, command: command))?.isSet("help") == true {
                print(usage)
                return 0
            }
            printError("\(command): give a command, \(actionNames) (see \(command) --help)")
            return 2
        }
        guard let action = actions.first(where: { $0.name == raw[index] }) else {
            printError(
                "\(command): unknown command '\(raw[index])': the commands are \(actionNames) (see \(command) --help)"
            )
            return 2
        }
        var rest = raw
        rest.remove(at: index)
        let invocation: Invocation
        do {
            let arguments = try Arguments(rest, options: action.table, command: "\(command) \(action.name)")
            if arguments.isSet("help") {
                print(usage)
                return 0
            }
            invocation = Invocation(
                arguments: arguments, operand: try operand(of: action, arguments.positionals),
                secondOperand: arguments.positionals.dropFirst().first,
                configuration: try Self.configuration(arguments, settings: action.settings))
        } catch {
            printError("\(command) \(action.name): \(error)")
            return 2
        }
        let json = invocation.arguments.isSet("json")
        do {
            let outcome = try action.perform(invocation)
            if json {
                printJSON(.object([JSONMember("ok", .bool(true))] + outcome.members))
            } else {
                if let text = outcome.text { print(text) }
                if let notice = outcome.notice { printError("\(command) \(action.name): \(notice)") }
            }
            return 0
        } catch let error as UsageError {
            printError("\(command) \(action.name): \(error)")
            return 2
        } catch {
            if json {
                let code = (error as? ServerError)?.kind.description ?? (error as? Refusal)?.code ?? "failed"
                printJSON(
                    .object([
                        JSONMember("ok", .bool(false)),
                        JSONMember(
                            "error",
                            .object([
                                JSONMember("code", .string(code)), JSONMember("message", .string("\(error)")),
                            ])),
                    ]))
            } else {
                printError("\(command) \(action.name): \(error)")
            }
            return 1
        }
    }

    /// The operand among `positionals`, checked against what `action` takes.
    private func operand(of action: Action, _ positionals: [String]) throws -> String? {
        let synopsis = "\(command) \(action.name) \(Self.operandText(action.operands))"
        switch action.operands {
        case .none:
            guard positionals.isEmpty else {
                throw UsageError("unexpected argument '\(positionals[0])' (see \(command) --help)")
            }
            return nil
        case .one(let placeholder):
            guard positionals.count == 1 else {
                throw UsageError("give exactly one \(placeholder): \(synopsis)")
            }
            return positionals[0]
        case .optional(let placeholder):
            guard positionals.count <= 1 else {
                throw UsageError("give at most one \(placeholder): \(synopsis)")
            }
            return positionals.first
        case .two(let first, let second):
            guard positionals.count == 2 else { throw UsageError("give \(first) and \(second): \(synopsis)") }
            return positionals[0]
        }
    }

    /// The configuration of a subcommand: `--db` and `settings` from the command line or the
    /// environment, as `serve` reads them; the other settings keep their defaults. No log (the
    /// commands say what happened themselves), and one connection's worth of threads.
    private static func configuration(_ arguments: Arguments, settings: [ServeOption]) throws -> Configuration
    {
        var configuration = try ServeCommand.makeConfiguration(
            arguments, environment: ProcessInfo.processInfo.environment,
            options: [ServeCommand.database] + settings)
        configuration.log = .discard
        configuration.workerThreads = 1
        return configuration
    }
}
