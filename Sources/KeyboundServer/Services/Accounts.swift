import Foundation
import KeyboundWire

extension Application {
    func createAccount(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(CreateAccountRequest.self)
        let username = try Validate.username(request.username)
        try Validate.newPassword(request.password)
        let hash = try hasher.hash(request.password)
        let userID = SecureRandomBytes.identifier("usr")
        try database.write { connection in
            guard try connection.queryOne("SELECT id FROM users WHERE username = ?", [.text(username)]) == nil
            else {
                throw APIError(409, .usernameTaken, "This username is taken.")
            }
            try connection.execute(
                "INSERT INTO users (id, username, password_hash, created_at) VALUES (?, ?, ?, ?)",
                [.text(userID), .text(username), .text(hash), .integer(context.now)])
            try audit(connection, context, "account_created", userID: userID)
        }
        return .json(201, CreateAccountResponse(userID: userID), headers: ["Location": "/v1/me"])
    }

    func passwordLogin(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(PasswordLoginRequest.self)
        let username = try Validate.username(request.username)
        try Validate.loginPassword(request.password)
        try Validate.clientID(request.clientID)
        let accountScope = "account:" + username
        let addressScope = "address:" + context.clientAddress

        // Step 1: blocked account or address? Answer 429 from a read, without looking at the
        // password and without writing anything: refused requests cost no commit and add no audit
        // rows (the lockout itself was audited when the block started; metrics count the rest).
        let (user, blockedUntil) = try database.read { connection in
            let user = try connection.queryOne(
                "SELECT id, password_hash FROM users WHERE username = ?", [.text(username)]
            ).map { (id: try $0.text(0), hash: try $0.text(1)) }
            return (user, try block(connection, scopes: [accountScope, addressScope], now: context.now))
        }
        if let blockedUntil { throw refuseThrottled(context, blockedUntil: blockedUntil) }

        // Step 2: claim the attempt before the hash runs. One write transaction checks the block
        // again and counts the attempt as a failure on both scopes, so of any number of requests in
        // flight at once no more than the limit get to the hash; the rest see the block.
        let claim: Claim
        do {
            claim = try database.write { connection in
                try claimAttempt(
                    connection, accountScope: accountScope, addressScope: addressScope, now: context.now)
            }
        } catch let blocked as Blocked {
            throw refuseThrottled(context, blockedUntil: blocked.until)
        }

        // Step 3: Argon2id, outside any transaction. Unknown users cost the same hash.
        let valid = hasher.verify(request.password, against: user?.hash)

        // Step 4: answer. A failure is already counted; the 401 body is the same for both failures.
        guard valid, let user else {
            try database.write { connection in
                try audit(connection, context, "login_failed", method: "password", userID: user?.id)
                // Audited once per block, by the attempt whose failure started it.
                if claim.account.startedBlock {
                    try audit(connection, context, "lockout", method: "password", userID: user?.id)
                }
                if claim.address.startedBlock {
                    try audit(connection, context, "address_lockout", method: "password")
                }
            }
            metrics.recordLogin(method: "password", outcome: "failure")
            throw APIError.invalidCredentials
        }
        let tokens = try database.write { connection in
            // The right password: the account's count starts over, and the attempt claimed on the
            // client address was no failure after all.
            try connection.execute("DELETE FROM throttles WHERE scope = ?", [.text(accountScope)])
            try withdraw(connection, claim.address)
            // A password login lifts suspensions from repeated bad device signatures.
            try connection.execute(
                """
                UPDATE devices SET suspended_at = NULL, failed_signatures = 0
                WHERE user_id = ? AND revoked_at IS NULL
                """, [.text(user.id)])
            return try openSession(
                connection, context, userID: user.id, clientID: request.clientID, method: .password,
                deviceID: nil)
        }
        return .json(200, tokens)
    }

    /// Failures from one client address older than this (15 minutes) are forgotten.
    static let addressFailureWindow: Int64 = 15 * 60 * 1000

    /// A block that refused an attempt.
    private struct Blocked: Error {
        let until: Int64
    }

    /// An attempt counted, before its password is checked, as a failure on both scopes.
    private struct Claim {
        let account: ThrottleCount
        let address: ThrottleCount
    }

    /// One scope's throttle row as ``countFailure`` found and left it.
    private struct ThrottleCount {
        typealias Row = (failures: Int64, blockedUntil: Int64, updatedAt: Int64)
        let scope: String
        let before: Row?
        let after: Row
        /// Whether this count blocked the scope (it was not blocked before: the claim checked).
        var startedBlock: Bool { after.blockedUntil > after.updatedAt }
    }

    /// The latest end of a block on any of `scopes`, or nil when none is blocked at `now`.
    private func block(_ connection: any SQLConnection, scopes: [String], now: Int64) throws -> Int64? {
        let ends = try scopes.map { scope in
            try connection.queryOne("SELECT blocked_until FROM throttles WHERE scope = ?", [.text(scope)])?
                .integer(0) ?? 0
        }
        guard let latest = ends.max(), latest > now else { return nil }
        return latest
    }

    /// Claims an attempt in the current write transaction: checks that neither scope is blocked
    /// and counts the attempt as a failure on both.
    /// - Throws: ``Blocked`` when a scope is blocked (nothing is written then).
    private func claimAttempt(
        _ connection: any SQLConnection, accountScope: String, addressScope: String, now: Int64
    ) throws -> Claim {
        if let blockedUntil = try block(connection, scopes: [accountScope, addressScope], now: now) {
            throw Blocked(until: blockedUntil)
        }
        return Claim(
            account: try countFailure(
                connection, scope: accountScope, limit: configuration.accountFailureLimit, window: nil,
                now: now),
            address: try countFailure(
                connection, scope: addressScope, limit: configuration.addressFailureLimit,
                window: Self.addressFailureWindow, now: now))
    }

    /// Counts a throttled attempt in the metrics (it writes nothing) and returns the 429.
    private func refuseThrottled(_ context: RequestContext, blockedUntil: Int64) -> APIError {
        metrics.recordLogin(method: "password", outcome: "throttled")
        return APIError.throttled(retryAfter: (blockedUntil - context.now + 999) / 1000)
    }

    /// Counts one more consecutive failure for `scope`; from `limit` on, blocks it with a delay
    /// that doubles with every further failure. With a `window`, failures older than it are
    /// forgotten.
    private func countFailure(
        _ connection: any SQLConnection, scope: String, limit: Int, window: Int64?, now: Int64
    ) throws -> ThrottleCount {
        let before = try connection.queryOne(
            "SELECT failures, blocked_until, updated_at FROM throttles WHERE scope = ?", [.text(scope)]
        ).map { (failures: try $0.integer(0), blockedUntil: try $0.integer(1), updatedAt: try $0.integer(2)) }
        var failures = before?.failures ?? 0
        // The quiet period that forgets failures starts when the last block ends, not at the last
        // failure: otherwise a block longer than the window would reset the count, and the delay
        // would never grow past it.
        if let window, let before, now - max(before.updatedAt, before.blockedUntil) > window {
            failures = 0
        }
        failures += 1
        var blockedUntil: Int64 = 0
        if failures >= Int64(limit) {
            let doublings = min(failures - Int64(limit), 20)
            let delay = min(
                Int64(configuration.lockoutBaseDelay) << doublings, Int64(configuration.lockoutMaximumDelay))
            blockedUntil = now + delay * 1000
        }
        if before == nil {
            try connection.execute(
                "INSERT INTO throttles (scope, failures, blocked_until, updated_at) VALUES (?, ?, ?, ?)",
                [.text(scope), .integer(failures), .integer(blockedUntil), .integer(now)])
        } else {
            try connection.execute(
                "UPDATE throttles SET failures = ?, blocked_until = ?, updated_at = ? WHERE scope = ?",
                [.integer(failures), .integer(blockedUntil), .integer(now), .text(scope)])
        }
        return ThrottleCount(
            scope: scope, before: before,
            after: (failures: failures, blockedUntil: blockedUntil, updatedAt: now))
    }

    /// Takes back a failure counted by ``countFailure`` for an attempt that succeeded. When no
    /// other attempt has counted on the scope since, the row is put back exactly as it was (so a
    /// success neither adds to the count, nor starts a block, nor keeps old failures fresh);
    /// otherwise only this attempt's failure is taken off.
    private func withdraw(_ connection: any SQLConnection, _ count: ThrottleCount) throws {
        let untouched = "scope = ? AND failures = ? AND blocked_until = ? AND updated_at = ?"
        let key: [SQLValue] = [
            .text(count.scope), .integer(count.after.failures), .integer(count.after.blockedUntil),
            .integer(count.after.updatedAt),
        ]
        let restored: Int
        if let before = count.before {
            restored = try connection.execute(
                "UPDATE throttles SET failures = ?, blocked_until = ?, updated_at = ? WHERE " + untouched,
                [.integer(before.failures), .integer(before.blockedUntil), .integer(before.updatedAt)] + key)
        } else {
            restored = try connection.execute("DELETE FROM throttles WHERE " + untouched, key)
        }
        if restored == 0 {
            try connection.execute(
                "UPDATE throttles SET failures = failures - 1 WHERE scope = ? AND failures > 0",
                [.text(count.scope)])
        }
    }
}
