import Foundation
import KeyboundWire

extension Application {
    /// `POST /v1/accounts`. A taken username answers 409 as the API contract says: a sign-up
    /// that pretended to succeed would hand back a user id that does not exist. What keeps the
    /// 409 from listing usernames is the price of asking: every attempt, free name or taken,
    /// counts against the address's sign-up limit and costs the same Argon2id hash first.
    func createAccount(_ context: RequestContext) throws -> HTTPResponse {
        guard configuration.registration == .open else { throw APIError.registrationClosed }
        let request = try context.decode(CreateAccountRequest.self)
        try Validate.newPassword(request.password)
        try claimSignUp(context)
        let hash = try hasher.hash(request.password)
        let userID = try database.write { connection in
            let userID = try insertAccount(
                connection, username: request.username, passwordHash: hash, now: context.now)
            try audit(connection, context, .accountCreated, userID: userID)
            return userID
        }
        return .json(201, CreateAccountResponse(userID: userID), headers: ["Location": "/v1/me"])
    }

    /// Inserts a new user in the current write transaction. An empty `passwordHash` is an account
    /// without a password (signed up with a passkey): no password matches it.
    /// - Parameter userID: the new user's id (a passkey sign-up chose it as its user handle).
    /// - Returns: the new user's id.
    /// - Throws: ``APIError`` 409 `username_taken`.
    @discardableResult
    func insertAccount(
        _ connection: any SQLConnection, id userID: String = SecureRandomBytes.identifier("usr"),
        username: Username, passwordHash: String, now: Int64
    ) throws -> String {
        guard
            try connection.queryOne("SELECT id FROM users WHERE username = ?", [.text(username.rawValue)])
                == nil
        else {
            throw APIError.usernameTaken
        }
        try Rows.insertUser(
            connection, id: userID, username: username.rawValue, passwordHash: passwordHash, createdAt: now)
        return userID
    }

    /// Creates an account for an operator (`keybound user add`), with the same rules as the API.
    func addAccount(username rawUsername: String, password: String) throws -> String {
        let username: Username
        do { username = try Username(rawUsername) } catch { throw APIError.invalid(error.detail) }
        try Validate.newPassword(password)
        let hash = try hasher.hash(password)
        let now = clock.nowMilliseconds
        return try database.write { connection in
            let userID = try insertAccount(connection, username: username, passwordHash: hash, now: now)
            try insertAuditEvent(
                connection, now: now, clientAddress: nil, .accountCreated, method: .operator, userID: userID,
                deviceID: nil, sessionID: nil)
            return userID
        }
    }

    /// `POST /v1/sessions/password`, throttled on three scopes (docs/server.md, "Throttling"):
    /// the pair (account, client address) blocks after ``Configuration/accountFailureLimit``
    /// consecutive failures; the client address after ``Configuration/addressFailureLimit``
    /// failures of any kind; and from ``Configuration/accountFailureCeiling`` consecutive
    /// failures on the account from everywhere, every address that has itself failed on the
    /// account waits too. An address that has not failed on the account is never held back by
    /// the others: wrong passwords from one address cannot lock the owner out at another.
    func passwordLogin(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(PasswordLoginRequest.self)
        let username = request.username.rawValue
        try Validate.loginPassword(request.password)
        let scopes = PasswordScopes(
            pair: ThrottleScope.accountAddress(username, context.clientAddress),
            account: ThrottleScope.account(username),
            address: configuration.addressFailureLimit > 0
                ? ThrottleScope.address(context.clientAddress) : nil)

        // Step 1: blocked? Answer 429 from a read, without looking at the password and without
        // writing anything: refused requests cost no commit and add no audit rows (the block itself
        // was audited when it started; metrics count the rest).
        let (user, blockedUntil) = try database.read { connection in
            let user = try connection.queryOne(
                "SELECT id, password_hash FROM users WHERE username = ?", [.text(username)]
            ).map { (id: try $0.text(0), hash: try $0.text(1)) }
            return (user, try passwordBlockEnd(connection, scopes, now: context.now))
        }
        if let blockedUntil { throw refuseThrottled(method: .password, context, blockedUntil: blockedUntil) }

        // Step 2: claim the attempt before the hash runs. One write transaction checks the blocks
        // again and counts the attempt as a failure on every scope, so of any number of requests
        // in flight at once no more than the limits get to the hash; the rest see the block.
        let claim: Claim
        do {
            claim = try database.write { try claimAttempt($0, scopes, now: context.now) }
        } catch let blocked as Blocked {
            throw refuseThrottled(method: .password, context, blockedUntil: blocked.until)
        }

        // Step 3: Argon2id, outside any transaction. Unknown users cost the same hash.
        let valid = hasher.verify(request.password, against: user?.hash)

        // Step 4: answer. A failure is already counted; the 401 body is the same for both failures.
        guard valid, let user else {
            try database.write { connection in
                try auditRefusal(connection, context, .loginFailed, method: .password, userID: user?.id)
                // Audited when a block starts, by the attempt whose failure started it.
                if claim.pair.startedBlock {
                    try auditRefusal(connection, context, .lockout, method: .password, userID: user?.id)
                }
                if claim.account.startedBlock {
                    try auditRefusal(
                        connection, context, .accountCeiling, method: .password, userID: user?.id)
                }
                if claim.address?.startedBlock == true {
                    try auditRefusal(connection, context, .addressLockout, method: .password)
                }
            }
            metrics.recordLogin(method: AuthMethod.password.rawValue, outcome: "failure")
            throw APIError.invalidCredentials
        }
        let tokens = try database.write { connection in
            // The right password: the account's counts start over, and the attempt claimed on the
            // client address was no failure after all.
            try clearThrottle(connection, scopes.pair)
            try clearThrottle(connection, scopes.account)
            if let address = claim.address { try withdraw(connection, address) }
            return try openSession(
                connection, context, userID: user.id, clientID: request.clientID.rawValue, method: .password,
                deviceID: nil)
        }
        return .json(200, tokens)
    }

    /// The throttle rows one password login counts on.
    private struct PasswordScopes {
        let pair: String
        let account: String
        /// nil when the address limit is off.
        let address: String?
    }

    /// An attempt counted, before its password is checked, as a failure on every scope.
    private struct Claim {
        let pair: ThrottleCount
        let account: ThrottleCount
        let address: ThrottleCount?
    }

    /// When the attempt's pair or address is blocked, or the account is past its ceiling and
    /// this address has failed on it: the latest end of those blocks. Otherwise nil.
    private func passwordBlockEnd(_ connection: any SQLConnection, _ scopes: PasswordScopes, now: Int64)
        throws -> Int64?
    {
        let pair = try throttleRow(connection, scopes.pair)
        var ends = [pair?.blockedUntil ?? 0]
        if let address = scopes.address {
            ends.append(try throttleRow(connection, address)?.blockedUntil ?? 0)
        }
        if let pair, pair.failures > 0 {
            ends.append(try throttleRow(connection, scopes.account)?.blockedUntil ?? 0)
        }
        guard let latest = ends.max(), latest > now else { return nil }
        return latest
    }

    /// Claims an attempt in the current write transaction: checks the blocks and counts the
    /// attempt as a failure on every scope.
    /// - Throws: ``Blocked`` when the attempt is blocked (nothing is written then).
    private func claimAttempt(_ connection: any SQLConnection, _ scopes: PasswordScopes, now: Int64) throws
        -> Claim
    {
        if let blockedUntil = try passwordBlockEnd(connection, scopes, now: now) {
            throw Blocked(until: blockedUntil)
        }
        return Claim(
            pair: try countFailure(
                connection, scope: scopes.pair, limit: configuration.accountFailureLimit, window: nil,
                now: now),
            account: try countFailure(
                connection, scope: scopes.account, limit: configuration.accountFailureCeiling, window: nil,
                now: now),
            address: try scopes.address.map {
                try countFailure(
                    connection, scope: $0, limit: configuration.addressFailureLimit,
                    window: Self.addressFailureWindow, now: now)
            })
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
        do {
            application = try Application(configuration: configuration)
        } catch {
            throw ServerError.opening(error)
        }
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
