import Foundation
import KeyboundServer
import KeyboundWire

/// `keybound user`: account administration on the server's database, for operators.
enum UserCommand {
    static let command = OperatorCommand(
        name: "user", title: "accounts and their devices, on the server's database",
        actions: [
            OperatorCommand.Action(
                name: "add", operands: .one("NAME"),
                options: [.flag("admin", "give the account the admin role (the operator console)")]
            ) { invocation in
                let administration = try AccountAdministration(configuration: invocation.configuration)
                let username = invocation.operand ?? ""
                let userID = try administration.addUser(username: username, password: try readPassword())
                if invocation.arguments.isSet("admin") { try administration.grant(.admin, to: username) }
                return OperatorCommand.Outcome(
                    members: [JSONMember("user_id", .string(userID))], text: userID)
            },
            OperatorCommand.Action(name: "grant", operands: .two("NAME", "ROLE")) { invocation in
                try changeRole(invocation, granted: true)
            },
            OperatorCommand.Action(name: "revoke", operands: .two("NAME", "ROLE")) { invocation in
                try changeRole(invocation, granted: false)
            },
            OperatorCommand.Action(
                name: "devices", operands: .optional("NAME"),
                options: [.flag("unattested", "only the devices bound without App Attest")]
            ) { invocation in
                let devices = try AccountAdministration(configuration: invocation.configuration).devices(
                    username: invocation.operand, unattestedOnly: invocation.arguments.isSet("unattested"))
                return OperatorCommand.Outcome(
                    members: [JSONMember("devices", .array(devices.map(json)))],
                    text: devices.isEmpty ? nil : table(devices), notice: devices.isEmpty ? "no devices" : nil
                )
            },
        ],
        notes: """
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

            grant and revoke give the account NAME a role, or take it: the one role is admin, which
            may use the operator console (docs/console.md; keybound serve --admin-listen). add
            --admin creates an account that has it. Taking the role ends no session: the console
            refuses the account's tokens from its next request.

              keybound user grant alice admin --db sqlite:/var/lib/keybound/keybound.sqlite

            The server may be running meanwhile.
            """,
        refusals: "taken, invalid, no such user, no such role")

    /// `grant` or `revoke NAME ROLE`.
    private static func changeRole(_ invocation: OperatorCommand.Invocation, granted: Bool) throws
        -> OperatorCommand.Outcome
    {
        let name = invocation.secondOperand ?? ""
        guard let role = Role(name) else {
            throw OperatorCommand.Refusal(
                "no role is named '\(name)': the roles are \(Role.known.map(\.name).joined(separator: ", "))")
        }
        let administration = try AccountAdministration(configuration: invocation.configuration)
        let username = invocation.operand ?? ""
        let changed =
            granted
            ? try administration.grant(role, to: username) : try administration.revoke(role, from: username)
        let state = granted ? (changed ? "granted" : "already held") : (changed ? "revoked" : "not held")
        return OperatorCommand.Outcome(
            members: [JSONMember("changed", .bool(changed))], text: "\(username): \(role) \(state)")
    }

    static func run(_ raw: [String]) -> Int32 { command.run(raw) }

    /// A password longer than this cannot be valid (1024 characters of up to 4 bytes).
    private static let inputLimit = 4096 + 2

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
    private static func table(_ devices: [BoundDevice]) -> String {
        let header = ["DEVICE", "USER", "NAME", "KEY", "APP ATTEST", "BOUND", "LAST USED"]
        let rows = devices.map { device in
            [
                device.deviceID, device.username, device.name, device.keyProtection.rawValue,
                device.attested ? "attested" : "unattested", Timestamp.format(device.createdAt),
                device.lastUsedAt.map(Timestamp.format) ?? "never",
            ]
        }
        return columns([header] + rows, indent: 0)
    }

    /// Standard input up to end-of-file, without one trailing newline (`\n` or `\r\n`).
    private static func readPassword() throws -> String {
        var data = Data()
        while let chunk = try FileHandle.standardInput.read(upToCount: 4096), !chunk.isEmpty {
            data.append(chunk)
            guard data.count <= inputLimit else { throw OperatorCommand.Refusal("the password is too long") }
        }
        guard var password = String(data: data, encoding: .utf8) else {
            throw OperatorCommand.Refusal("the password on standard input is not UTF-8")
        }
        // "\r\n" is one Character in Swift: removeLast drops either ending whole.
        if password.last == "\n" || password.last == "\r\n" { password.removeLast() }
        return password
    }
}
