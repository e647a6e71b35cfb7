import Foundation
import KeyboundServer

/// `keybound user`: account administration on the server's database, for operators.
enum UserCommand {
    /// The options: the one table that parsing and help both use.
    static let options: [Option] = [
        .value(
            "db", "URL", "sqlite:PATH or postgres://USER@HOST:PORT/DB", variable: "KEYBOUND_DB",
            default: "sqlite:keybound.sqlite"),
        .help,
    ]

    static let usage = """
        keybound user — create accounts on the server's database

        usage: keybound user add NAME [--db URL]

        Reads the password from standard input (one trailing newline is dropped), so it never
        appears in the process list or the shell history:

          printf '%s' "$PASSWORD" | keybound user add alice --db sqlite:/var/lib/keybound/keybound.sqlite

        The same rules as sign-up apply (username 1-64 of a-z 0-9 . _ @ + -, password 8-1024
        characters); the password is hashed with Argon2id at the OWASP default. This is how
        accounts are made when the server runs with --registration closed. The server may be
        running meanwhile. Prints the new user id.

        options:
        \(Option.help(options))

        The PostgreSQL password comes from KEYBOUND_DB_PASSWORD or PGPASSWORD.

        exit status: 0 created, 1 refused (taken, invalid, database error), 2 usage
        """

    /// A password longer than this cannot be valid (1024 characters of up to 4 bytes).
    private static let inputLimit = 4096 + 2

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
        let username: String
        do {
            let environment = ProcessInfo.processInfo.environment
            if let url = arguments.value("db") ?? environment["KEYBOUND_DB"] {
                if let problem = Configuration.databaseURLProblem(url) {
                    throw UsageError("--db: \(problem)")
                }
                configuration.databaseURL = url
            }
            configuration.databasePassword = ServeCommand.databasePassword(environment)
            guard arguments.positionals.first == "add" else {
                throw UsageError("the only command is 'add' (keybound user add NAME)")
            }
            guard arguments.positionals.count == 2 else {
                throw UsageError("give exactly one username: keybound user add NAME")
            }
            username = arguments.positionals[1]
        } catch {
            printError("keybound user: \(error) (see keybound user --help)")
            return 2
        }
        do {
            let password = try readPassword()
            let userID = try AccountAdministration(configuration: configuration)
                .addUser(username: username, password: password)
            print(userID)
            return 0
        } catch {
            printError("keybound user add: \(error)")
            return 1
        }
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
