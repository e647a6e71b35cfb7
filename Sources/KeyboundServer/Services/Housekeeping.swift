import Foundation

extension Application {
    /// Deletes rows that can no longer matter: challenges expired over an hour ago, tokens past
    /// their expiry (a used refresh token is kept until then, for reuse detection), and throttle
    /// entries idle for a day. Approvals and audit events are kept.
    func purgeExpired() {
        let now = clock.nowMilliseconds
        do {
            try database.write { connection in
                try connection.execute(
                    "DELETE FROM challenges WHERE expires_at < ?", [.integer(now - 3_600_000)])
                try connection.execute("DELETE FROM tokens WHERE expires_at < ?", [.integer(now)])
                try connection.execute(
                    "DELETE FROM throttles WHERE blocked_until < ? AND updated_at < ?",
                    [.integer(now), .integer(now - 86_400_000)])
            }
        } catch {
            logger.log(.warning, "housekeeping failed", [("error", String(describing: error))])
        }
    }
}
