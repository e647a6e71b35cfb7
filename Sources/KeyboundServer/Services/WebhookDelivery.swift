import Foundation
import KeyboundCrypto
import KeyboundWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a delivery stands.
public enum WebhookDeliveryStatus: String, Sendable {
    /// Not acknowledged yet: it is sent at `next_attempt_at`.
    case pending
    /// A 2xx answered it.
    case delivered
    /// No 2xx within three days of attempts (``WebhookSchedule``); `keybound webhook retry`
    /// sends it again.
    case failed
}

/// When deliveries are sent again (docs/webhooks.md, "Retries"): Standard Webhooks' schedule.
enum WebhookSchedule {
    /// A receiver must answer within this many seconds.
    static let timeout = 10
    /// The delays after the 1st, 2nd, … failed attempt, in seconds: 5 s, 5 min, 30 min, 2 h, 5 h,
    /// then 10 h between all later attempts.
    static let delays = [5, 300, 1800, 7200, 18_000, 36_000]
    /// A delivery is given up (`failed`) once its next attempt would start more than this long
    /// after it was first written, or retried by an operator: three days.
    static let window = 3 * 86_400
    /// How long a claimed delivery stays an instance's: longer than one attempt can take, short
    /// enough that what an instance that died held is sent soon by another.
    static let lease = 60

    /// The delay after failed attempt number `attempt` (1 for the first).
    static func delay(afterAttempt attempt: Int) -> Int { delays[min(max(attempt, 1), delays.count) - 1] }
}

/// Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256(secret, id.timestamp.body)>`.
enum WebhookSignature {
    /// The prefix of a secret as operators see it: `whsec_` + base64 of the key.
    static let secretPrefix = "whsec_"

    /// The `v1,…` signature of one attempt.
    /// - Parameter secret: the key's base64 (without ``secretPrefix``), as stored.
    static func sign(id: String, timestamp: Int64, body: Data, secret: String) throws -> String {
        guard let key = Data(base64Encoded: secret) else { throw DatabaseError.unexpectedType(column: 0) }
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(body)
        return "v1," + (try HMACSHA256.authenticationCode(for: signed, key: key)).base64EncodedString()
    }
}

/// Sends the outbox (docs/webhooks.md): a thread of its own per server claims due deliveries
/// with a lease, posts them, and records each outcome. Requests never wait for it: they write
/// their events and wake it once committed (``Application/webhookWakeUp``).
///
/// With N instances on one database, each claims rows no other holds (`FOR UPDATE SKIP LOCKED`
/// on PostgreSQL; SQLite's one writer claims one batch at a time): an event is sent by one
/// instance at a time. A claim is a lease of ``WebhookSchedule/lease`` seconds; an instance that
/// dies mid-delivery leaves its lease to expire, and another (or itself, restarted) sends the
/// delivery again with the same `webhook-id`.
final class WebhookDeliverer: Sendable {
    let application: Application
    /// This deliverer's name on the leases it takes.
    let owner = SecureRandomBytes.identifier("dlv")
    private let running = Locked(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let session: URLSession
    /// At most this many deliveries per claim, sent at once.
    static let batch = 32
    /// Connections to one receiver at once.
    static let connectionsPerHost = 8
    /// How often an idle deliverer looks for due deliveries (retries, other instances' events).
    static let pollInterval = 1.0

    init(application: Application) {
        self.application = application
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = TimeInterval(WebhookSchedule.timeout)
        configuration.timeoutIntervalForResource = TimeInterval(WebhookSchedule.timeout)
        // A few connections per receiver at once, not one per delivery of a batch.
        configuration.httpMaximumConnectionsPerHost = Self.connectionsPerHost
        session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
    }

    /// Starts the thread.
    func start() {
        running.withLock { $0 = true }
        Thread.detachNewThread { [self] in
            while running.withLock({ $0 }) { step() }
            stopped.signal()
        }
    }

    /// Stops the thread after the attempts it is making (at most ``WebhookSchedule/timeout``
    /// seconds); what it had claimed and not sent waits for its lease to expire.
    func stop() {
        let wasRunning = running.withLock { running in
            defer { running = false }
            return running
        }
        guard wasRunning else { return }
        application.webhookWakeUp.signal()
        stopped.wait()
        session.invalidateAndCancel()
    }

    /// Claims a batch of webhook deliveries and of CIBA pings and sends them, or waits to be
    /// woken (or for the poll interval).
    private func step() {
        let claimed: [Claimed]
        let pings: [ClaimedPing]
        do {
            claimed = try claim()
            pings = try claimPings()
        } catch {
            application.logger.log(.warning, "webhook claim failed", [("error", String(describing: error))])
            _ = application.webhookWakeUp.wait(timeout: .now() + Self.pollInterval)
            return
        }
        guard !claimed.isEmpty || !pings.isEmpty else {
            _ = application.webhookWakeUp.wait(timeout: .now() + Self.pollInterval)
            return
        }
        let outcomes = Locked<[(Claimed, String, Bool)]>([])
        let pingOutcomes = Locked<[(ClaimedPing, String, Bool)]>([])
        let group = DispatchGroup()
        for delivery in claimed {
            group.enter()
            send(delivery) { result, acknowledged in
                outcomes.withLock { $0.append((delivery, result, acknowledged)) }
                group.leave()
            }
        }
        for ping in pings {
            group.enter()
            send(ping) { result, acknowledged in
                pingOutcomes.withLock { $0.append((ping, result, acknowledged)) }
                group.leave()
            }
        }
        // URLSession on Linux has been seen to miss a socket's events under load until a timer
        // of its own fired: a task that has not called back by then is left to its lease.
        _ = group.wait(timeout: .now() + .seconds(2 * WebhookSchedule.timeout))
        do {
            try record(outcomes.withLock { $0 })
            try record(pingOutcomes.withLock { $0 })
        } catch {
            // The leases expire: the deliveries are sent again.
            application.logger.log(
                .warning, "webhook outcome not recorded", [("error", String(describing: error))])
        }
    }

    /// A claimed delivery and what sending it needs.
    private struct Claimed: Sendable {
        let id: String
        let attempts: Int64
        let windowStart: Date
        let messageID: String
        let body: String
        let url: String
        let secret: String
    }

    /// Leases to this deliverer up to ``batch`` rows of `table` (keyed by `key`) whose `status`
    /// is `pending`, whose `next_attempt_at` has come and that no live lease holds, in
    /// `connection`'s write: the webhook deliveries and the CIBA pings.
    /// - Returns: the leased keys, as parameters, and `?, ?, …` for them.
    func lease(_ table: String, key: String, pending: String, now: Date, _ connection: any SQLConnection)
        throws
        -> (ids: [SQLValue], placeholders: String)
    {
        let ids = try connection.query(
            """
            SELECT \(key) FROM \(table)
            WHERE status = ? AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
            ORDER BY next_attempt_at LIMIT \(Self.batch) \(application.database.skipLockedRows)
            """, [.text(pending), .date(now), .date(now)]
        ).map { SQLValue.text(try $0.text(0)) }
        let list = ids.map { _ in "?" }.joined(separator: ", ")
        if !ids.isEmpty {
            try connection.execute(
                "UPDATE \(table) SET lease_owner = ?, lease_until = ? WHERE \(key) IN (\(list))",
                [.text(owner), .date(now.adding(seconds: WebhookSchedule.lease))] + ids)
        }
        return (ids, list)
    }

    /// Leases up to ``batch`` due deliveries to this deliverer, in one write.
    private func claim() throws -> [Claimed] {
        let now = application.clock.nowToTheMillisecond
        return try application.database.queueWrite { connection in
            let (ids, list) = try lease(
                "webhook_deliveries", key: "id", pending: WebhookDeliveryStatus.pending.rawValue, now: now,
                connection)
            guard !ids.isEmpty else { return [] }
            return try connection.query(
                """
                SELECT d.id, d.attempts, d.window_start, m.id, m.body, e.url, e.secret
                FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
                JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id IN (\(list))
                """, ids
            ).map { row in
                Claimed(
                    id: try row.text(0), attempts: try row.integer(1),
                    windowStart: Date(milliseconds: try row.integer(2)), messageID: try row.text(3),
                    body: try row.text(4), url: try row.text(5), secret: try row.text(6))
            }
        }
    }

    /// Posts one delivery; `done` gets what happened (`200`, `HTTP 503`, `timeout`, …) and
    /// whether it was acknowledged (a 2xx).
    private func send(_ delivery: Claimed, done: @escaping @Sendable (String, Bool) -> Void) {
        if let refusal = refusal(of: delivery.url) { return done(refusal, false) }
        guard let url = URL(string: delivery.url) else { return done("refused: not a URL", false) }
        let body = Data(delivery.body.utf8)
        let timestamp = Int64(application.clock.now.timeIntervalSince1970.rounded(.down))
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(delivery.messageID, forHTTPHeaderField: "webhook-id")
        request.setValue(String(timestamp), forHTTPHeaderField: "webhook-timestamp")
        do {
            request.setValue(
                try WebhookSignature.sign(
                    id: delivery.messageID, timestamp: timestamp, body: body, secret: delivery.secret),
                forHTTPHeaderField: "webhook-signature")
        } catch {
            return done("refused: the endpoint's secret is unusable", false)
        }
        post(request, done: done)
    }

    /// Why a delivery to `url` is not attempted (the SSRF guard), or nil.
    func refusal(of url: String) -> String? {
        guard !application.configuration.allowPrivateWebhooks,
            let address = WebhookTarget.nonPublicAddress(of: url)
        else { return nil }
        return "refused: \(address) is not a public address (--allow-private-webhooks)"
    }

    /// Sends `request`; `done` gets what happened (`200`, `HTTP 503`, `timeout`, …) and whether
    /// it was acknowledged (a 2xx).
    func post(_ request: URLRequest, done: @escaping @Sendable (String, Bool) -> Void) {
        session.dataTask(with: request) { _, response, error in
            if let status = (response as? HTTPURLResponse)?.statusCode {
                done(String(status), (200..<300).contains(status))
            } else if let error = error as? URLError, error.code == .timedOut {
                done("timeout", false)
            } else {
                done(error.map { "\($0.localizedDescription)" } ?? "no response", false)
            }
        }.resume()
    }

    /// Records a batch's attempts, in one write, and what follows each: delivered; pending again
    /// after the schedule's delay; failed past the window. Nothing for a delivery whose lease was
    /// lost meanwhile (another instance holds it now, and records its own attempt).
    private func record(_ outcomes: [(Claimed, String, Bool)]) throws {
        let now = application.clock.nowToTheMillisecond
        try application.database.queueWrite { connection in
            for (delivery, result, acknowledged) in outcomes {
                try record(delivery, result: result, acknowledged: acknowledged, now: now, connection)
            }
        }
        for (delivery, result, acknowledged) in outcomes where !acknowledged {
            application.logger.log(
                .warning, "webhook delivery failed",
                [("delivery", delivery.id), ("attempt", Int(delivery.attempts + 1)), ("result", result)])
        }
    }

    /// Records one attempt of a batch (``record(_:)``).
    private func record(
        _ delivery: Claimed, result: String, acknowledged: Bool, now: Date, _ connection: any SQLConnection
    ) throws {
        let attempt = delivery.attempts + 1
        let status: WebhookDeliveryStatus
        var next = now
        if acknowledged {
            status = .delivered
        } else {
            next = now.adding(seconds: WebhookSchedule.delay(afterAttempt: Int(attempt)))
            status = next > delivery.windowStart.adding(seconds: WebhookSchedule.window) ? .failed : .pending
        }
        let updated = try connection.execute(
            """
            UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?, delivered_at = ?,
                lease_owner = NULL, lease_until = NULL
            WHERE id = ? AND lease_owner = ? AND attempts = ?
            """,
            [
                .text(status.rawValue), .integer(attempt), .date(next), acknowledged ? .date(now) : .null,
                .text(delivery.id), .text(owner), .integer(delivery.attempts),
            ])
        guard updated == 1 else { return }
        if !acknowledged { application.traffic.count(.webhookFailed, at: now) }
        try connection.execute(
            "INSERT INTO webhook_attempts (delivery_id, number, attempted_at, result) VALUES (?, ?, ?, ?)",
            [.text(delivery.id), .integer(attempt), .date(now), .text(String(result.prefix(200)))])
    }
}

/// Redirects are not followed: a 3xx is an answer that is not a 2xx (and a redirect to a
/// private address would pass the SSRF guard).
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
