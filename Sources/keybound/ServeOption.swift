import Foundation
import KeyboundServer

/// The property of ``Configuration`` an option sets. Its value in `Configuration()` is the
/// option's default: no default is written anywhere else.
typealias Setting<Value> = WritableKeyPath<Configuration, Value> & Sendable

/// One option of `keybound serve`, declared once: its flag, what it takes (a ``ValueKind``) and
/// the ``Setting`` it sets. Parsing, the check of its value, its environment variable and its
/// help (with the values it takes and its default) all come from the declaration.
struct ServeOption: Sendable {
    /// The name without its dashes: `max-devices` for `--max-devices`.
    let name: String
    /// The value's placeholder in help (`SEC`, `HOST:PORT`); nil for a flag, which takes no value.
    let placeholder: String?
    /// One line for `--help`.
    let summary: String
    /// What it takes, for help (`60-86400`, `full or normal`, `repeatable`); nil when the
    /// placeholder says it.
    let accepted: String?
    /// The default as help states it, from a configuration's value (`Configuration()`'s).
    let defaultText: @Sendable (Configuration) -> String
    /// Sets the value that the command line or the environment gives, if either does; otherwise
    /// leaves the configuration's. Throws a ``UsageError`` that says what to type instead.
    let read: @Sendable (OptionInput, inout Configuration) throws -> Void

    /// The environment variable: `KEYBOUND_` and the name in capitals (`KEYBOUND_MAX_DEVICES`).
    var variable: String { Self.variable(name) }

    /// The environment variable of the option named `name`.
    static func variable(_ name: String) -> String {
        "KEYBOUND_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The option as ``Arguments`` parses it and help shows it, `defaults` giving its default.
    func option(defaults: Configuration) -> Option {
        Option(
            name: name, value: placeholder, summary: summary, variable: variable,
            detail: [accepted, "default " + defaultText(defaults)].compactMap { $0 }.joined(separator: ", "))
    }

    /// An option that takes one value (the last given wins): `--name VALUE`.
    /// - Parameter note: how the default is computed, when it depends on the machine
    ///   (help then shows `note: value`).
    static func value<Value>(
        _ name: String, _ placeholder: String, _ summary: String, _ setting: Setting<Value>,
        _ kind: ValueKind<Value>, note: String? = nil
    ) -> ServeOption {
        ServeOption(
            name: name, placeholder: placeholder, summary: summary, accepted: kind.accepted,
            defaultText: { configuration in
                let value = kind.describe(configuration[keyPath: setting])
                return note.map { "\($0): \(value)" } ?? value
            },
            read: { input, configuration in
                if let text = input.value(name) {
                    configuration[keyPath: setting] = try kind.parse(text, "--\(name)")
                }
            })
    }

    /// An option that takes one value, for a setting that nil leaves to the server.
    /// - Parameter unset: what nil means, for help: `off`, `twice --per-ip-connection-limit`.
    static func value<Value>(
        _ name: String, _ placeholder: String, _ summary: String, _ setting: Setting<Value?>,
        _ kind: ValueKind<Value>, unset: String
    ) -> ServeOption {
        value(
            name, placeholder, summary, setting,
            ValueKind(
                accepted: kind.accepted, describe: { $0.map(kind.describe) ?? unset }, parse: kind.parse))
    }

    /// A repeatable option: `--name VALUE` as often as needed, or its variable's comma-separated
    /// list; blank items of the variable are dropped.
    /// - Parameters:
    ///   - unset: what the empty list means, for help: `none`.
    ///   - blankIsNone: whether a blank `--name ''` is dropped too (otherwise its kind judges it).
    static func list<Element>(
        _ name: String, _ placeholder: String, _ summary: String, _ setting: Setting<[Element]>,
        _ kind: ValueKind<Element>, unset: String, blankIsNone: Bool = false
    ) -> ServeOption {
        ServeOption(
            name: name, placeholder: placeholder, summary: summary,
            accepted: ([kind.accepted, "repeatable"] as [String?]).compactMap { $0 }.joined(separator: ", "),
            defaultText: { configuration in
                let values = configuration[keyPath: setting]
                return values.isEmpty ? unset : values.map(kind.describe).joined(separator: ",")
            },
            read: { input, configuration in
                let given = input.values(name).filter { !(blankIsNone && $0.isEmpty) }
                if !given.isEmpty {
                    configuration[keyPath: setting] = try given.map { try kind.parse($0, "--\(name)") }
                }
            })
    }

    /// A flag, `--name`, that turns a setting on; its variable does with 1, true or yes.
    static func flag(_ name: String, _ summary: String, _ setting: Setting<Bool>) -> ServeOption {
        ServeOption(
            name: name, placeholder: nil, summary: summary, accepted: nil,
            defaultText: { $0[keyPath: setting] ? "on" : "off" },
            read: { input, configuration in
                if input.isSet(name) { configuration[keyPath: setting] = true }
            })
    }
}

/// What an option's value is: how its text is parsed and checked, and how help shows it.
struct ValueKind<Value>: Sendable {
    /// What it takes, for help (`60-86400`); nil when the placeholder says it.
    let accepted: String?
    /// How help shows a value.
    let describe: @Sendable (Value) -> String
    /// The value of a text, or a ``UsageError`` naming the flag (given as `--name`) that says
    /// what to type instead.
    let parse: @Sendable (_ text: String, _ flag: String) throws -> Value

    /// - Parameter describe: how help shows a value (default: as Swift prints it).
    init(
        accepted: String? = nil, describe: @escaping @Sendable (Value) -> String = { "\($0)" },
        parse: @escaping @Sendable (_ text: String, _ flag: String) throws -> Value
    ) {
        self.accepted = accepted
        self.describe = describe
        self.parse = parse
    }
}

extension ValueKind where Value == Int {
    /// An integer within `range`.
    static func integer(_ range: ClosedRange<Int>) -> ValueKind {
        ValueKind(accepted: "\(range.lowerBound)-\(range.upperBound)") { text, flag in
            guard let number = Int(text), range.contains(number) else {
                throw UsageError("\(flag) must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
    }
}

extension ValueKind where Value: Sendable & Equatable {
    /// One of the named values, e.g. `[("required", true), ("preferred", false)]`.
    /// - Parameters:
    ///   - hint: what the error adds after the choices.
    ///   - ignoringCase: whether `Forwarded` is `forwarded`.
    static func choice(
        named choices: [(name: String, value: Value)], hint: String = "", ignoringCase: Bool = false
    )
        -> ValueKind
    {
        let names = choices.map(\.name)
        let alternatives = names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
        return ValueKind(
            accepted: alternatives,
            describe: { value in choices.first { $0.value == value }?.name ?? "" },
            parse: { text, flag in
                let text = ignoringCase ? text.lowercased() : text
                guard let choice = choices.first(where: { $0.name == text }) else {
                    throw UsageError("\(flag) must be \(alternatives)\(hint)")
                }
                return choice.value
            })
    }
}

extension ValueKind where Value: Sendable & Equatable & RawRepresentable, Value.RawValue == String {
    /// One of `cases`, by raw value: `SQLiteSynchronous.allCases`.
    static func choice(_ cases: [Value], hint: String = "", ignoringCase: Bool = false) -> ValueKind {
        choice(named: cases.map { ($0.rawValue, $0) }, hint: hint, ignoringCase: ignoringCase)
    }
}

extension ValueKind where Value == String {
    /// Any text.
    static var text: ValueKind { ValueKind { text, _ in text } }

    /// A ``Configuration/databaseURL``: its form is checked, not whether the database answers.
    static var databaseURL: ValueKind {
        ValueKind { url, flag in
            if let problem = Configuration.databaseURLProblem(url) {
                throw UsageError(
                    "\(flag): \(problem) (e.g. sqlite:/var/lib/keybound/keybound.sqlite or "
                        + "postgres://keybound@db.internal:5432/keybound)")
            }
            return url
        }
    }

    /// An App ID: `TEAMID.bundle.id`, a ten-character team id, then the bundle id.
    static var appID: ValueKind {
        ValueKind { appID, flag in
            let parts = appID.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 10,
                parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }), !parts[1].isEmpty
            else {
                throw UsageError(
                    "\(flag) must be TEAMID.bundle.id, e.g. ABCDE12345.com.example.app, not '\(appID)'")
            }
            return appID
        }
    }
}

extension ValueKind where Value == CIDR {
    /// An address or a range of them.
    static var cidr: ValueKind {
        ValueKind { text, flag in
            guard let range = CIDR(text) else {
                throw UsageError(
                    "\(flag) must be an address or a range like 10.0.0.0/8 or 2001:db8::/32 "
                        + "(no bits set after the prefix), not '\(text)'")
            }
            return range
        }
    }
}

extension ValueKind where Value == ListenAddress {
    /// `HOST:PORT` (`[IPv6]:PORT`; an empty host is 127.0.0.1).
    static var address: ValueKind {
        ValueKind(
            describe: { $0.host.contains(":") ? "[\($0.host)]:\($0.port)" : "\($0.host):\($0.port)" },
            parse: { text, flag in
                guard let colon = text.lastIndex(of: ":"),
                    let port = UInt16(text[text.index(after: colon)...])
                else {
                    throw UsageError("\(flag) must be HOST:PORT, e.g. 127.0.0.1:8420 or [::1]:8420")
                }
                var host = String(text[..<colon])
                if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
                return ListenAddress(host: host.isEmpty ? "127.0.0.1" : host, port: port)
            })
    }
}

/// What the command line and the environment give the options: a flag wins over its variable,
/// and an empty variable counts as unset.
struct OptionInput {
    let arguments: Arguments
    let environment: [String: String]

    /// The last value of `--name`, else its variable's.
    func value(_ name: String) -> String? {
        arguments.value(name) ?? variable(name)
    }

    /// Every value of the repeatable `--name`, else the items of its comma-separated variable.
    func values(_ name: String) -> [String] {
        let given = arguments.values(name)
        guard given.isEmpty else { return given }
        return (variable(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    /// Whether the flag `--name` is given, or its variable is 1, true or yes.
    func isSet(_ name: String) -> Bool {
        arguments.isSet(name) || ["1", "true", "yes"].contains(variable(name)?.lowercased() ?? "")
    }

    private func variable(_ name: String) -> String? {
        environment[ServeOption.variable(name)].flatMap { $0.isEmpty ? nil : $0 }
    }
}
