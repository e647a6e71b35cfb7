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

        // Step 1: blocked account or address? Answer 429 without looking at the password.
        let (user, blockedUntil) = try database.read { connection in
            let user = try connection.queryOne(
                "SELECT id, password_hash FROM users WHERE username = ?", [.text(username)]
            ).map { (id: try $0.text(0), hash: try $0.text(1)) }
            let blockedUntil =
                try [accountScope, addressScope].map { scope in
                    try connection.queryOne(
                        "SELECT blocked_until FROM throttles WHERE scope = ?", [.text(scope)])?
                        .integer(0) ?? 0
                }.max() ?? 0
            return (user, blockedUntil)
        }
        if blockedUntil > context.now {
            try database.write { connection in
                try audit(connection, context, "throttled", method: "password", userID: user?.id)
            }
            metrics.recordLogin(method: "password", outcome: "throttled")
            throw APIError.throttled(retryAfter: (blockedUntil - context.now + 999) / 1000)
        }

        // Step 2: Argon2id, outside any transaction. Unknown users cost the same hash.
        let valid = hasher.verify(request.password, against: user?.hash)

        // Step 3: record the outcome and answer. The 401 body is the same for both failures.
        guard valid, let user else {
            try database.write { connection in
                let accountFailures = try recordFailure(
                    connection, scope: accountScope, limit: configuration.accountFailureLimit, window: nil,
                    now: context.now)
                _ = try recordFailure(
                    connection, scope: addressScope, limit: configuration.addressFailureLimit,
                    window: 15 * 60 * 1000, now: context.now)
                try audit(connection, context, "login_failed", method: "password", userID: user?.id)
                if accountFailures == configuration.accountFailureLimit {
                    try audit(connection, context, "lockout", method: "password", userID: user?.id)
                }
            }
            metrics.recordLogin(method: "password", outcome: "failure")
            throw APIError.invalidCredentials
        }
        let tokens = try database.write { connection in
            try connection.execute("DELETE FROM throttles WHERE scope = ?", [.text(accountScope)])
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

    /// Counts one more consecutive failure for `scope`; from `limit` on, blocks it with a delay
    /// that doubles with every further failure. With a `window`, failures older than it are
    /// forgotten. Returns the new failure count.
    private func recordFailure(
        _ connection: any SQLConnection, scope: String, limit: Int, window: Int64?, now: Int64
    ) throws -> Int {
        let row = try connection.queryOne(
            "SELECT failures, blocked_until, updated_at FROM throttles WHERE scope = ?", [.text(scope)])
        var failures = try row?.integer(0) ?? 0
        if let window, let updated = try row?.integer(2), now - updated > window,
            try row?.integer(1) ?? 0 <= now
        {
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
        if row == nil {
            try connection.execute(
                "INSERT INTO throttles (scope, failures, blocked_until, updated_at) VALUES (?, ?, ?, ?)",
                [.text(scope), .integer(failures), .integer(blockedUntil), .integer(now)])
        } else {
            try connection.execute(
                "UPDATE throttles SET failures = ?, blocked_until = ?, updated_at = ? WHERE scope = ?",
                [.integer(failures), .integer(blockedUntil), .integer(now), .text(scope)])
        }
        return Int(failures)
    }
}
