import Foundation

/// What one housekeeping run did: how many rows it deleted, in how many write transactions, and
/// the longest of them: the most the run held the one writer at a time.
package struct PurgeReport: Sendable {
    /// Rows deleted, in every table.
    package var rowsDeleted = 0
    /// Write transactions the run took.
    package var batches = 0
    /// The longest of those transactions, in seconds, from its first statement to its commit.
    package var longestBatchSeconds = 0.0
}

extension Application {
    /// At most this many rows go in one housekeeping transaction, so that it holds the one writer
    /// for a few milliseconds only, however much has piled up (docs/benchmarks.md measures it);
    /// the requests queued behind it go in between two batches.
    static let purgeBatchSize = 500
    /// Ended sessions are deleted this many at a time, each batch with its tokens.
    static let purgeSessionBatchSize = 100

    /// Deletes rows that can no longer matter: used device-login and passkey challenges, App
    /// Attest challenges and OAuth authorization codes that expired over an hour ago (an expired
    /// challenge is refused before its row is looked at; the hour covers requests still in flight
    /// and clocks that differ between instances, and a code presented again within it still ends
    /// what its first use opened), tokens past their expiry (a used refresh token is kept until then, for
    /// reuse detection), the answers kept for `Idempotency-Key`s past their day
    /// (``IdempotentRequest``), throttle entries that block nothing and whose failures are stale, and,
    /// after ``Configuration/retention``, ended sessions with all their tokens and expired
    /// approvals, and webhook deliveries finished (delivered or failed; their attempts, and the
    /// events no delivery still needs). Audit events are kept. Every statement deletes at most
    /// ``purgeBatchSize`` rows, found through an index, in a write of its own.
    ///
    /// A session has ended when it was revoked (logout, replaced, reuse, device revoked) or reached
    /// ``Configuration/sessionMaxAge``. Until the retention has passed, its row (client, method,
    /// revoke reason) stays beside the audit events that name it, and an expired approval still
    /// answers its status.
    ///
    /// A throttle entry is stale when it blocks nothing, has been quiet for the 15-minute window,
    /// and holds no failure, or, for a client address, none within that window (they are
    /// forgotten then anyway), or, for an account, none for a day. Account entries get the same
    /// day whether the username exists or not, so their lifetime does not tell which usernames
    /// exist; made-up usernames cannot accumulate for longer than that.
    @discardableResult
    func purgeExpired() -> PurgeReport {
        let now = clock.nowToTheMillisecond
        let retained = now.adding(seconds: -configuration.retention)
        // Sessions created before this have reached their maximum age before `retained`.
        let createdBefore = retained.adding(seconds: -configuration.sessionMaxAge)
        let quietSince = now.adding(seconds: -Self.addressFailureWindow)
        var report = PurgeReport()
        do {
            // An hour past their expiry: a code used again within it still ends what its first use opened.
            for (table, key) in [
                ("used_challenges", "id"), ("app_attest_challenges", "session_id"), ("oauth_codes", "hash"),
            ] {
                try deleteInBatches(
                    table, key: key, where: "expires_at < ?", [.date(now.adding(seconds: -3600))], &report)
            }
            try deleteInBatches("tokens", key: "hash", where: "expires_at < ?", [.date(now)], &report)
            try deleteInBatches("idempotency_keys", key: "id", where: "expires_at < ?", [.date(now)], &report)
            try deleteEndedSessions(
                where: "revoked_at < ? OR created_at < ?", [.date(retained), .date(createdBefore)], &report)
            // CIBA requests and their pings an hour after they could last be redeemed.
            try deleteInBatches(
                "ciba_requests", key: "hash", where: "redeem_until < ?", [.date(now.adding(seconds: -3600))],
                &report)
            try deleteInBatches(
                "ciba_pings", key: "approval_id", where: "give_up_at < ?",
                [.date(now.adding(seconds: -3600))],
                &report)
            try deleteInBatches("approvals", key: "id", where: "expires_at < ?", [.date(retained)], &report)
            // The console's traffic counts, kept as long as the ended sessions they count.
            try deleteInBatches(
                "traffic_counts", key: "bucket", where: "bucket < ?",
                [.integer(Int64(retained.timeIntervalSince1970))], &report)
            // Webhook deliveries finished (delivered or failed) before the retention, their
            // attempts first, then the events no delivery needs any more.
            let finished = "status IN ('delivered', 'failed') AND next_attempt_at < ?"
            try deleteInBatches(
                "webhook_attempts", key: "delivery_id",
                where: "delivery_id IN (SELECT id FROM webhook_deliveries WHERE \(finished))",
                [.date(retained)],
                &report)
            try deleteInBatches("webhook_deliveries", key: "id", where: finished, [.date(retained)], &report)
            try deleteInBatches(
                "webhook_messages", key: "id",
                where: """
                    created_at < ? AND NOT EXISTS (
                        SELECT 1 FROM webhook_deliveries d WHERE d.message_id = webhook_messages.id)
                    """, [.date(retained)], &report)
            try deleteInBatches(
                "throttles", key: "scope",
                where: """
                    updated_at < ? AND blocked_until <= ?
                        AND (failures <= 0 OR updated_at < ? OR (scope LIKE 'address:%' AND blocked_until < ?))
                    """,
                [.date(quietSince), .date(now), .date(now.adding(seconds: -86_400)), .date(quietSince)],
                &report)
        } catch {
            logger.log(.warning, "housekeeping failed", [("error", String(describing: error))])
        }
        if report.rowsDeleted > 0 {
            logger.log(
                .info, "housekeeping",
                [
                    ("rows_deleted", report.rowsDeleted), ("batches", report.batches),
                    ("longest_batch_ms", report.longestBatchSeconds * 1000),
                ])
        }
        return report
    }

    /// Deletes the rows of `table` that `condition` selects, ``purgeBatchSize`` at a time, until
    /// a batch finds fewer.
    private func deleteInBatches(
        _ table: String, key: String, where condition: String, _ parameters: [SQLValue],
        _ report: inout PurgeReport
    ) throws {
        let statement = """
            DELETE FROM \(table) WHERE \(key) IN (
                SELECT \(key) FROM \(table) WHERE \(condition) LIMIT \(Self.purgeBatchSize))
            """
        while try purgeBatch({ try $0.execute(statement, parameters) }, &report) == Self.purgeBatchSize {}
    }

    /// Deletes ended sessions (`condition`) with their tokens: ``purgeSessionBatchSize`` sessions at
    /// a time, their tokens ``purgeBatchSize`` at a time, the sessions with their last tokens (a
    /// token never outlives its session's row).
    private func deleteEndedSessions(
        where condition: String, _ parameters: [SQLValue], _ report: inout PurgeReport
    ) throws {
        while true {
            let ids = try database.read { connection in
                try connection.query(
                    "SELECT id FROM sessions WHERE \(condition) LIMIT \(Self.purgeSessionBatchSize)",
                    parameters
                ).map { try $0.text(0) }
            }
            guard !ids.isEmpty else { return }
            let list = ids.map { _ in "?" }.joined(separator: ", ")
            let sessions = ids.map(SQLValue.text)
            var finished = false
            repeat {
                try purgeBatch(
                    { connection in
                        let tokens = try connection.execute(
                            """
                            DELETE FROM tokens WHERE hash IN (
                                SELECT hash FROM tokens WHERE session_id IN (\(list)) LIMIT \(Self.purgeBatchSize))
                            """, sessions)
                        guard tokens < Self.purgeBatchSize else { return tokens }
                        finished = true
                        return tokens
                            + (try connection.execute("DELETE FROM sessions WHERE id IN (\(list))", sessions))
                    }, &report)
            } while !finished
        }
    }

    /// Runs one housekeeping write and adds it to `report`. Its time is counted from when its
    /// statements start to when its commit returns: how long it holds the one writer (not the
    /// wait for its turn behind other groups, nor the writer's WAL checkpoint after it).
    /// - Returns: the rows `body` deleted.
    @discardableResult
    private func purgeBatch(_ body: (any SQLConnection) throws -> Int, _ report: inout PurgeReport) throws
        -> Int
    {
        var started: UInt64 = 0
        let deleted = try database.write { connection in
            started = DispatchTime.now().uptimeNanoseconds
            return try body(connection)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        report.rowsDeleted += deleted
        report.batches += 1
        report.longestBatchSeconds = max(report.longestBatchSeconds, seconds)
        return deleted
    }
}
