import Foundation
import KeyboundWire

// Who may use the operator console (docs/console.md): accounts with the `admin` role, through a
// bearer token of one of their sessions; a change needs a password or passkey login within the
// last five minutes. Locked accounts open no session anywhere.

/// A role an account holds (`user_roles`).
public struct Role: Hashable, Sendable, CustomStringConvertible {
    /// The role's name, as stored and as `keybound user grant NAME ROLE` takes it.
    public let name: String
    /// The role's name.
    public var description: String { name }

    /// May use the operator console.
    public static let admin = Role(name: "admin")
    /// Every role this version knows.
    public static let known: [Role] = [.admin]

    /// The role named `name`, or nil for one this version does not know.
    public init?(_ name: String) {
        guard let role = Self.known.first(where: { $0.name == name }) else { return nil }
        self = role
    }

    private init(name: String) { self.name = name }
}

extension APIError {
    /// 403: an administrator locked the account.
    static let accountLocked = APIError(
        403, .accountLocked, "This account is locked by an administrator; ask them to unlock it.")
    /// 403: the console takes only administrators.
    static let adminRequired = APIError(
        403, .adminRequired, "The console needs an account with the admin role.")
    /// 403: a change on the console needs a recent sign-in.
    static let consoleReauthentication = APIError(
        403, .stepUpRequired,
        "A change needs a password or passkey sign-in within the last \(Application.consoleChangeWindow / 60) minutes: sign in again."
    )
}

/// What decides whether a user may open a session: whether the account is locked, and whether
/// the user is an administrator (the console's listener opens sessions for administrators only).
struct AccountStanding {
    let isLocked: Bool
    let isAdmin: Bool

    /// The statement that reads a user's standing: one that can go in the round trip of others
    /// (``SQLConnection/queries(_:)``).
    static func statement(userID: String) -> SQLStatement {
        SQLStatement(
            """
            SELECT u.locked_at, r.role FROM users u
            LEFT JOIN user_roles r ON r.user_id = u.id AND r.role = ?
            WHERE u.id = ?
            """, [.text(Role.admin.name), .text(userID)])
    }

    /// The standing that ``statement(userID:)`` read.
    /// - Throws: 404 when the user does not exist.
    init(rows: [SQLRow]) throws {
        guard let row = rows.first else { throw APIError.notFound }
        isLocked = try row.optionalInteger(0) != nil
        isAdmin = try row.optionalText(1) != nil
    }

    /// Reads a user's standing.
    /// - Throws: 404 when the user does not exist.
    static func read(_ connection: any SQLConnection, userID: String) throws -> AccountStanding {
        try AccountStanding(rows: connection.queries([statement(userID: userID)])[0])
    }

    /// Refuses to open a session for a locked account, and on the console's listener for anyone
    /// but an administrator. Checked in the login's own transaction, so nothing of it is kept.
    /// - Throws: 403 `account_locked` or `admin_required`.
    func check(_ context: RequestContext) throws {
        if isLocked { throw APIError.accountLocked }
        if context.listener == .admin, !isAdmin { throw APIError.adminRequired }
    }
}

extension Application {
    /// A change on the console needs a password or passkey login at most this many seconds ago.
    static let consoleChangeWindow = 300

    /// Whether the user holds `role`.
    func holds(_ role: Role, userID: String, _ connection: any SQLConnection) throws -> Bool {
        try connection.queryOne(
            "SELECT 1 FROM user_roles WHERE user_id = ? AND role = ?", [.text(userID), .text(role.name)])
            != nil
    }

    /// The administrator a console request comes from: a valid bearer token whose user holds the
    /// `admin` role (a session opened on the API's listener too).
    /// - Throws: 401 `token_invalid`; 403 `admin_required` for anyone else.
    func consoleAdmin(_ context: RequestContext) throws -> Caller {
        let caller = try authenticate(context)
        guard try database.read({ try holds(.admin, userID: caller.userID, $0) }) else {
            throw APIError.adminRequired
        }
        return caller
    }

    /// Runs an administrator's change in one write transaction, checked inside it: a valid token,
    /// the `admin` role, and a password or passkey login within ``consoleChangeWindow``. Every
    /// audit event `body` records names the administrator (``RequestContext/actorID``).
    /// - Throws: 401 `token_invalid`; 403 `admin_required`, or `step_up_required` for a login too
    ///   long ago (the console asks to sign in again); what `body` throws. Nothing is kept then.
    func consoleChange<T>(
        _ context: RequestContext, _ body: (any SQLConnection, RequestContext, Caller) throws -> T
    ) throws -> T {
        try authenticatedWrite(context) { connection, caller in
            guard try holds(.admin, userID: caller.userID, connection) else { throw APIError.adminRequired }
            try checkRecentLogin(caller, context)
            var acting = context
            acting.actorID = caller.userID
            return try body(connection, acting, caller)
        }
    }

    /// Refuses a caller whose session was not opened by a password or passkey login within
    /// ``consoleChangeWindow`` (a device login, a refreshed session count from their login).
    func checkRecentLogin(_ caller: Caller, _ context: RequestContext) throws {
        guard caller.authMethod == .password || caller.authMethod == .passkey,
            context.now < caller.authTime.adding(seconds: Self.consoleChangeWindow)
        else { throw APIError.consoleReauthentication }
    }

    /// Locks or unlocks an account. Locking ends every session of the user (API and OAuth), and
    /// from then on no login opens one (``AccountStanding/check(_:)``); approvals still
    /// pending can no longer be seen or decided by a session, and expire.
    /// - Returns: whether anything changed.
    @discardableResult
    func setLocked(_ locked: Bool, userID: String, _ connection: any SQLConnection, _ context: RequestContext)
        throws -> Bool
    {
        let changed = try connection.execute(
            locked
                ? "UPDATE users SET locked_at = ? WHERE id = ? AND locked_at IS NULL"
                : "UPDATE users SET locked_at = NULL WHERE id = ? AND locked_at IS NOT NULL",
            locked ? [.date(context.now), .text(userID)] : [.text(userID)])
        guard changed == 1 else { return false }
        if locked {
            try revokeSessions(
                connection, where: "user_id = ?", [.text(userID)], reason: "locked", now: context.now)
        }
        try audit(connection, context, locked ? .accountLocked : .accountUnlocked, userID: userID)
        return true
    }

    /// Grants `role` to the user named `username`, or takes it (`keybound user grant`, `revoke`).
    /// Taking `admin` ends nothing: the user's sessions stay, and the console refuses them.
    /// - Returns: whether anything changed.
    /// - Throws: ``APIError/notFound`` when no user has that name.
    func setRole(_ role: Role, granted: Bool, username: Username) throws -> Bool {
        let now = clock.nowToTheMillisecond
        return try database.write { connection in
            guard
                let user = try connection.queryOne(
                    "SELECT id FROM users WHERE username = ?", [.text(username.rawValue)])
            else { throw APIError.notFound }
            let userID = try user.text(0)
            let changed =
                granted
                ? try connection.execute(
                    "INSERT INTO user_roles (user_id, role, granted_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    [.text(userID), .text(role.name), .date(now)])
                : try connection.execute(
                    "DELETE FROM user_roles WHERE user_id = ? AND role = ?",
                    [.text(userID), .text(role.name)])
            guard changed == 1 else { return false }
            try insertAuditEvent(
                connection, now: now, clientAddress: nil, granted ? .roleGranted : .roleRevoked,
                method: .operator, userID: userID, deviceID: nil, sessionID: nil, detail: role.name)
            return true
        }
    }
}
