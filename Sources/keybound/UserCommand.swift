import Foundation
import KeyboundServer
import KeyboundWire

/// `keybound user`: account administration on the server's database, for operators.
enum UserCommand {
    /// The options: the one table that parsing and help both use.
    static let options: [Option] = [
        ServeCommand.database.option(defaults: Configuration()),
        .flag("unattested", "devices: only those bound without App Attest"),
        .flag("json", "print one JSON object: {\"ok\":true,…} or {\"ok\":false,\"error\":{…}}"),
        .help,
    ]

    static let usage = """
        keybound user — accounts and their devices, on the server's database

        usage: keybound user add NAME [--db URL] [--json]
               keybound user devices [NAME] [--unattested] [--db URL] [--json]

        add reads the password from standard input (one trailing newline is dropped), so it
        never appears in the process list or the shell history:

          printf '%s' "$PASSWORD" | keybound user add alice --db sqlite:/var/lib/keybound/keybound.sqlite

        The same rules as sign-up apply (username 1-64 of a-z 0-9 . _ @ + -, password 8-1024
        characters); the password is hashed with Argon2id at the OWASP default. This is how
        accounts are made when the server runs with --registration closed. Prints the new user id.

        devices lists the active devices of NAME, or of every user: id, user, name, key
        protection, whether App Attest vouched for the binding, when it was bound and last used.
        With --unattested only those bound without App Attest, which --require-app-attest
        refuses (403 app_attest_required) until their users bind them again:

          keybound user devices --unattested --db sqlite:/var/lib/keybound/keybound.sqlite

        The server may be running meanwhile.

        options:
        \(Option.help(options))

        The PostgreSQL password comes from KEYBOUND_DB_PASSWORD or PGPASSWORD.

        exit status: 0 done, 1 refused (taken, invalid, no such user, database error), 2 usage
        """

    /// A password longer than this cannot be valid (1024 characters of up to 4 bytes).
    private static let inputLimit = 4096 + 2

    /// What to do, from the positionals.
    private enum Command {
        case add(username: String)
        case devices(username: String?)
    }

    static func run(_ raw: [String]) -> Int32 {
        let arguments: Arguments
        do {
            arguments = try Arguments(raw, options: options, command: "keybound user")
        } catch {
            printError("keybound user: \(error)")
            return 2
        }
        if arguments.isSet("help") {
            print(usage)
            return 0
        }
        var configuration = Configuration()
        configuration.log = .discard
        configuration.workerThreads = 1
        let command: Command
        do {
            let environment = ProcessInfo.processInfo.environment
            if let url = arguments.value("db") ?? environment["KEYBOUND_DB"] {
                if let problem = Configuration.databaseURLProblem(url) {
                    throw UsageError("--db: \(problem)")
                }
                configuration.databaseURL = url
            }
            configuration.databasePassword = ServeCommand.databasePassword(environment)
            command = try parse(arguments)
        } catch {
            printError("keybound user: \(error) (see keybound user --help)")
            return 2
        }
        let json = arguments.isSet("json")
        do {
            let administration = try AccountAdministration(configuration: configuration)
            switch command {
            case .add(let username):
                let userID = try administration.addUser(username: username, password: try readPassword())
                if json {
                    printJSON(
                        .object([JSONMember("ok", .bool(true)), JSONMember("user_id", .string(userID))]))
                } else {
                    print(userID)
                }
            case .devices(let username):
                let devices = try administration.devices(
                    username: username, unattestedOnly: arguments.isSet("unattested"))
                if json {
                    printJSON(
                        .object([
                            JSONMember("ok", .bool(true)),
                            JSONMember("devices", .array(devices.map(Self.json))),
                        ]))
                } else {
                    printDevices(devices)
                }
            }
            return 0
        } catch {
            let name = if case .add = command { "add" } else { "devices" }
            if json {
                let kind = (error as? ServerError)?.kind.description ?? "failed"
                printJSON(
                    .object([
                        JSONMember("ok", .bool(false)),
                        JSONMember(
                            "error",
                            .object([
                                JSONMember("code", .string(kind)), JSONMember("message", .string("\(error)")),
                            ])),
                    ]))
            } else {
                printError("keybound user \(name): \(error)")
            }
            return 1
        }
    }

    /// The command the positionals name.
    private static func parse(_ arguments: Arguments) throws -> Command {
        let words = arguments.positionals
        switch words.first {
        case "add":
            guard words.count == 2 else {
                throw UsageError("give exactly one username: keybound user add NAME")
            }
            guard !arguments.isSet("unattested") else { throw UsageError("--unattested is for 'devices'") }
            return .add(username: words[1])
        case "devices":
            guard words.count <= 2 else {
                throw UsageError("give at most one username: keybound user devices [NAME]")
            }
            return .devices(username: words.count == 2 ? words[1] : nil)
        default:
            throw UsageError("the commands are 'add' and 'devices' (keybound user add NAME)")
        }
    }

    /// A device as `--json` shows it.
    private static func json(_ device: BoundDevice) -> JSONValue {
        .object([
            JSONMember("device_id", .string(device.deviceID)), JSONMember("user_id", .string(device.userID)),
            JSONMember("username", .string(device.username)), JSONMember("name", .string(device.name)),
            JSONMember("key_protection", .string(device.keyProtection.rawValue)),
            JSONMember("attested", .bool(device.attested)),
            JSONMember("created_at", .string(Timestamp.format(device.createdAt))),
            JSONMember("last_used_at", device.lastUsedAt.map { .string(Timestamp.format($0)) } ?? .null),
        ])
    }

    /// One line per device under a header, in aligned columns.
    private static func printDevices(_ devices: [BoundDevice]) {
        guard !devices.isEmpty else {
            printError("keybound user devices: no devices")
            return
        }
        let header = ["DEVICE", "USER", "NAME", "KEY", "APP ATTEST", "BOUND", "LAST USED"]
        let rows = devices.map { device in
            [
                device.deviceID, device.username, device.name, device.keyProtection.rawValue,
                device.attested ? "attested" : "unattested", Timestamp.format(device.createdAt),
                device.lastUsedAt.map(Timestamp.format) ?? "never",
            ]
        }
        print(columns([header] + rows, indent: 0))
    }

    /// Standard input up to end-of-file, without one trailing newline (`\n` or `\r\n`).
    private static func readPassword() throws -> String {
        var data = Data()
        while let chunk = try FileHandle.standardInput.read(upToCount: 4096), !chunk.isEmpty {
            data.append(chunk)
            guard data.count <= inputLimit else { throw UsageError("the password is too long") }
        }
        guard var password = String(data: data, encoding: .utf8) else {
            throw UsageError("the password on standard input is not UTF-8")
        }
        // "\r\n" is one Character in Swift: removeLast drops either ending whole.
        if password.last == "\n" || password.last == "\r\n" { password.removeLast() }
        return password
    }
}
