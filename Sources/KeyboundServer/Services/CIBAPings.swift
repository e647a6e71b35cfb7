import Foundation
import KeyboundWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a ping-mode CIBA request's notification stands (table `ciba_pings`).
enum CIBAPingStatus: String {
    /// The request is undecided: nothing to send yet.
    case waiting
    /// Decided: sent at `next_attempt_at`.
    case pending
    /// The client's endpoint answered with a 2xx.
    case delivered
    /// No 2xx before the request stopped being redeemable: the client can still poll until then.
    case failed
}

/// A claimed ping: where it goes, with which bearer token, saying which request.
struct ClaimedPing: Sendable {
    let approvalID: String
    let attempts: Int64
    let giveUpAt: Date
    let url: String
    let token: String
    let authReqID: String
}

extension WebhookDeliverer {
    /// Leases up to ``batch`` due pings (CIBA Core §10.2) to this deliverer, in one write, as
    /// ``claim()`` leases webhook deliveries.
    func claimPings() throws -> [ClaimedPing] {
        let now = application.clock.nowToTheMillisecond
        return try application.database.queueWrite { connection in
            let (ids, list) = try lease(
                "ciba_pings", key: "approval_id", pending: CIBAPingStatus.pending.rawValue, now: now,
                connection)
            guard !ids.isEmpty else { return [] }
            return try connection.query(
                """
                SELECT approval_id, attempts, give_up_at, url, token, auth_req_id FROM ciba_pings
                WHERE approval_id IN (\(list))
                """, ids
            ).map { row in
                ClaimedPing(
                    approvalID: try row.text(0), attempts: try row.integer(1),
                    giveUpAt: Date(milliseconds: try row.integer(2)), url: try row.text(3),
                    token: try row.text(4),
                    authReqID: try row.text(5))
            }
        }
    }

    /// Posts one ping: `Authorization: Bearer <client_notification_token>` and
    /// `{"auth_req_id": …}` (CIBA Core §10.2), behind the same SSRF guard as webhooks.
    func send(_ ping: ClaimedPing, done: @escaping @Sendable (String, Bool) -> Void) {
        if let refusal = refusal(of: ping.url) { return done(refusal, false) }
        guard let url = URL(string: ping.url) else { return done("refused: not a URL", false) }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = JSON.serialize(.object([JSONMember("auth_req_id", .string(ping.authReqID))]))
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(ping.token)", forHTTPHeaderField: "Authorization")
        post(request, done: done)
    }

    /// Records a batch of ping attempts, in one write: delivered; due again after the webhook
    /// schedule's delay; failed once that would be past the request's redemption. Nothing for a
    /// ping whose lease was lost meanwhile.
    func record(_ outcomes: [(ClaimedPing, String, Bool)]) throws {
        guard !outcomes.isEmpty else { return }
        let now = application.clock.nowToTheMillisecond
        try application.database.queueWrite { connection in
            for (ping, result, acknowledged) in outcomes {
                let attempt = ping.attempts + 1
                let next = now.adding(seconds: WebhookSchedule.delay(afterAttempt: Int(attempt)))
                let status: CIBAPingStatus =
                    acknowledged ? .delivered : next > ping.giveUpAt ? .failed : .pending
                try connection.execute(
                    """
                    UPDATE ciba_pings SET status = ?, attempts = ?, next_attempt_at = ?, delivered_at = ?,
                        last_result = ?, lease_owner = NULL, lease_until = NULL
                    WHERE approval_id = ? AND lease_owner = ? AND attempts = ?
                    """,
                    [
                        .text(status.rawValue), .integer(attempt), .date(acknowledged ? now : next),
                        acknowledged ? .date(now) : .null, .text(String(result.prefix(200))),
                        .text(ping.approvalID), .text(owner), .integer(ping.attempts),
                    ])
            }
        }
        for (ping, result, acknowledged) in outcomes where !acknowledged {
            application.logger.log(
                .warning, "CIBA ping failed",
                [("approval", ping.approvalID), ("attempt", Int(ping.attempts + 1)), ("result", result)])
        }
    }
}
