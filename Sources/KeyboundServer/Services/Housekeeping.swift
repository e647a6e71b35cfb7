import Foundation

extension Application {
    /// Deletes rows that can no longer matter: used device-login challenges and passkey and App
    /// Attest challenges that expired over an hour ago (an expired device-login challenge is
    /// refused before its row is looked at; the hour covers requests still in flight and clocks
    /// that differ between instances), tokens past their expiry (a used refresh token is kept
    /// until then, for reuse detection), throttle entries that block nothing and whose failures
    /// are stale, and, after ``Configuration/retention``, ended sessions with all their tokens and
    /// expired approvals. Audit events are kept.
    ///
    /// A session has ended when it was revoked (logout, replaced, reuse, device revoked) or reached
    /// ``Configuration/sessionMaxAge``. Until the retention has passed, its row (client, method,
    /// revoke reason) stays beside the audit events that name it, and an expired approval still
    /// answers its status.
    ///
    /// A throttle entry is stale when its block has ended and it holds no failure, or, for a client
    /// address, none within the 15-minute window (they are forgotten then anyway), or, for an
    /// account, none for a day. Account entries get the same day whether the username exists or
    /// not, so their lifetime does not tell which usernames exist; made-up usernames cannot
    /// accumulate for longer than that.
    func purgeExpired() {
        let now = clock.nowMilliseconds
        let retained = now - Int64(configuration.retention) * 1000
        // Sessions created before this have reached their maximum age before `retained`.
        let createdBefore = retained - Int64(configuration.sessionMaxAge) * 1000
        let ended = "revoked_at < ? OR created_at < ?"
        do {
            try database.write { connection in
                for table in ["used_challenges", "webauthn_challenges", "app_attest_challenges"] {
                    try connection.execute(
                        "DELETE FROM \(table) WHERE expires_at < ?", [.integer(now - 3_600_000)])
                }
                try connection.execute("DELETE FROM tokens WHERE expires_at < ?", [.integer(now)])
                try connection.execute(
                    "DELETE FROM tokens WHERE session_id IN (SELECT id FROM sessions WHERE \(ended))",
                    [.integer(retained), .integer(createdBefore)])
                try connection.execute(
                    "DELETE FROM sessions WHERE \(ended)", [.integer(retained), .integer(createdBefore)])
                try connection.execute("DELETE FROM approvals WHERE expires_at < ?", [.integer(retained)])
                try connection.execute(
                    """
                    DELETE FROM throttles WHERE blocked_until <= ? AND (failures <= 0 OR updated_at < ?
                        OR (scope LIKE 'address:%' AND updated_at < ? AND blocked_until < ?))
                    """,
                    [
                        .integer(now), .integer(now - 86_400_000), .integer(now - Self.addressFailureWindow),
                        .integer(now - Self.addressFailureWindow),
                    ])
            }
        } catch {
            logger.log(.warning, "housekeeping failed", [("error", String(describing: error))])
        }
    }
}
