import Foundation
import KeyboundWire

// What operators do on the server's database (`keybound user`).

extension Application {
    /// The application an operator command works through: the database of `configuration`,
    /// opened and migrated like the server's.
    /// - Throws: ``ServerError`` when it cannot be opened (``ServerError/opening(_:)``).
    static func forOperator(_ configuration: Configuration) throws -> Application {
        do { return try Application(configuration: configuration) } catch { throw ServerError.opening(error) }
    }

    /// Creates an account for an operator (`keybound user add`), with the same rules as the API.
    func addAccount(username rawUsername: String, password: String) throws -> String {
        let username: Username
        do { username = try Username(rawUsername) } catch { throw APIError.invalid(error.detail) }
        try Validate.newPassword(password)
        let hash = try hasher.hash(password)
        let now = clock.nowToTheMillisecond
        return try database.write { connection in
            guard let userID = try insertAccount(connection, username: username, passwordHash: hash, now: now)
            else { throw APIError.usernameTaken }
            try insertAuditEvent(
                connection, now: now, clientAddress: nil, .accountCreated, method: .operator, userID: userID,
                deviceID: nil, sessionID: nil, details: [JSONMember("username", .string(username.rawValue))])
            return userID
        }
    }

    /// The active (not revoked) devices, of the user named `username` or of everyone, for
    /// operators (``AccountAdministration/devices(username:unattestedOnly:)``); with
    /// `unattestedOnly`, only those bound without App Attest.
    /// - Throws: ``APIError/notFound`` when no user has that name.
    func activeDevices(username: Username?, unattestedOnly: Bool) throws -> [BoundDevice] {
        try database.read { connection in
            var conditions = ["d.revoked_at IS NULL"]
            var parameters: [SQLValue] = []
            if let username {
                guard
                    let user = try connection.queryOne(
                        "SELECT id FROM users WHERE username = ?", [.text(username.rawValue)])
                else { throw APIError.notFound }
                conditions.append("d.user_id = ?")
                parameters.append(.text(try user.text(0)))
            }
            if unattestedOnly { conditions.append("k.device_id IS NULL") }
            return try connection.query(
                BoundDevice.self,
                """
                SELECT \(BoundDevice.columns)
                FROM devices d JOIN users u ON u.id = d.user_id LEFT JOIN app_attest_keys k ON k.device_id = d.id
                WHERE \(conditions.joined(separator: " AND ")) ORDER BY u.username, d.created_at, d.id
                """, parameters)
        }
    }
}

/// Account administration directly on the server's database, for operators (`keybound user`).
///
/// ``addUser(username:password:)`` (`keybound user add`) is the way to add users when sign-up is
/// closed (``Registration/closed``): the same rules as the API apply (username grammar, password
/// length, Argon2id at the configured cost), and the audit records an `account_created` event
/// with method `operator`. ``devices(username:unattestedOnly:)`` (`keybound user devices`) lists
/// bound devices, for instance those `--require-app-attest` refuses.
public struct AccountAdministration: Sendable {
    private let application: Application

    /// Opens (and if needed migrates) the database of `configuration`.
    /// - Throws: ``ServerError`` when the database cannot be opened.
    public init(configuration: Configuration) throws {
        application = try Application.forOperator(configuration)
    }

    /// Creates an account.
    /// - Returns: the new user's id.
    /// - Throws: ``ServerError`` when the username or password breaks the rules, the username is
    ///   taken, or the database fails.
    public func addUser(username: String, password: String) throws -> String {
        do {
            return try application.addAccount(username: username, password: password)
        } catch let error as APIError {
            throw ServerError(.accountRefused, error.detail)
        } catch {
            throw ServerError(.databaseUnreachable, "cannot create the account: \(error)")
        }
    }

    /// Gives the user named `username` `role` (`keybound user grant`, `add --admin`), audited
    /// as `role_granted` with method `operator`.
    /// - Returns: false when they held it already.
    /// - Throws: ``ServerError`` `userNotFound`, `databaseUnreachable`.
    @discardableResult
    public func grant(_ role: Role, to username: String) throws -> Bool {
        try changeRole(role, granted: true, username: username)
    }

    /// Takes `role` from the user named `username` (`keybound user revoke`), audited as
    /// `role_revoked`. Their sessions stay; the console refuses them from their next request.
    /// - Returns: false when they did not hold it.
    /// - Throws: ``ServerError`` `userNotFound`, `databaseUnreachable`.
    @discardableResult
    public func revoke(_ role: Role, from username: String) throws -> Bool {
        try changeRole(role, granted: false, username: username)
    }

    private func changeRole(_ role: Role, granted: Bool, username: String) throws -> Bool {
        do {
            return try application.setRole(role, granted: granted, username: try Username(username))
        } catch is APIError, is WireFailure {
            throw ServerError(.userNotFound, "no user is named '\(username)'")
        } catch {
            throw ServerError(.databaseUnreachable, "cannot change the roles: \(error)")
        }
    }

    /// The active (not revoked) devices, ordered by username, then by when they were bound.
    /// - Parameters:
    ///   - username: only this user's devices; nil: every user's.
    ///   - unattestedOnly: only devices bound without an App Attest attestation: with
    ///     ``Configuration/requireAppAttest`` these are refused (403 `app_attest_required`) until
    ///     bound again.
    /// - Throws: ``ServerError`` `userNotFound` for an unknown username, `databaseUnreachable`
    ///   when the database fails.
    public func devices(username: String?, unattestedOnly: Bool = false) throws -> [BoundDevice] {
        do {
            return try application.activeDevices(
                username: try username.map { try Username($0) }, unattestedOnly: unattestedOnly)
        } catch is APIError, is WireFailure {
            throw ServerError(.userNotFound, "no user is named '\(username ?? "")'")
        } catch {
            throw ServerError(.databaseUnreachable, "cannot list the devices: \(error)")
        }
    }
}

/// A bound device, as ``AccountAdministration/devices(username:unattestedOnly:)`` lists it.
public struct BoundDevice: Sendable, Hashable {
    /// The device's id (`dev_…`).
    public let deviceID: String
    /// Its user's id.
    public let userID: String
    /// Its user's username.
    public let username: String
    /// The name the app gave it.
    public let name: String
    /// Where its key lives, as the app declared it.
    public let keyProtection: KeyProtection
    /// When it was bound.
    public let createdAt: Date
    /// Its last device login or approval, if any.
    public let lastUsedAt: Date?
    /// Whether an App Attest attestation vouched for its binding.
    public let attested: Bool
}

extension BoundDevice: SQLRecord {
    static let columns = """
        d.id, d.user_id, u.username, d.name, d.key_protection, d.created_at, d.last_used_at, k.device_id
        """

    init(row: inout SQLRowReader) throws {
        deviceID = try row.text()
        userID = try row.text()
        username = try row.text()
        name = try row.text()
        keyProtection = KeyProtection(rawValue: try row.text()) ?? .software
        createdAt = try row.date()
        lastUsedAt = try row.optionalDate()
        attested = try row.optionalText() != nil
    }
}
