import Foundation
import KeyboundWire

/// A registered webhook endpoint, as ``WebhookAdministration`` lists it.
public struct WebhookEndpointInfo: Sendable, Hashable {
    /// The endpoint's id (`whk_…`).
    public let id: String
    /// Where deliveries are posted.
    public let url: String
    /// The event types it takes, in the order of ``WebhookEventType/known``.
    public let events: [String]
    /// When it was registered.
    public let createdAt: Date
    /// Its signing secret (`whsec_…`): only in what ``WebhookAdministration/add(url:events:)``
    /// returns, shown once.
    public let secret: String?
}

/// One delivery of an event to an endpoint, with its attempts.
public struct WebhookDeliveryInfo: Sendable, Hashable {
    /// The delivery's id (`whd_…`), which `keybound webhook retry` takes.
    public let id: String
    /// The event's id: the `webhook-id` of every attempt.
    public let messageID: String
    /// The event's type.
    public let type: String
    /// `pending`, `delivered` or `failed`.
    public let status: String
    /// When the event was written.
    public let createdAt: Date
    /// When it is sent next (pending only).
    public let nextAttemptAt: Date?
    /// Every attempt, oldest first.
    public let attempts: [Attempt]

    /// One attempt: when, and what came back (`200`, `503`, `timeout`, `refused: …`).
    public struct Attempt: Sendable, Hashable {
        /// Its number, from 1.
        public let number: Int
        /// When it was made.
        public let at: Date
        /// What came back.
        public let result: String
    }
}

extension WebhookEndpointInfo {
    /// The endpoint's members as `keybound webhook --json` and the console show it, without its
    /// secret.
    package var jsonMembers: [JSONMember] {
        [
            JSONMember("id", .string(id)), JSONMember("url", .string(url)),
            JSONMember("events", .array(events.map { .string($0) })),
            JSONMember("created_at", .string(Timestamp.format(createdAt))),
        ]
    }
}

extension WebhookDeliveryInfo {
    /// The delivery's members as `keybound webhook deliveries --json` and the console show it:
    /// `webhook_id` is the event's id, which every attempt sends as `webhook-id`.
    package var jsonMembers: [JSONMember] {
        [
            JSONMember("id", .string(id)), JSONMember("webhook_id", .string(messageID)),
            JSONMember("type", .string(type)), JSONMember("status", .string(status)),
            JSONMember("created_at", .string(Timestamp.format(createdAt))),
            JSONMember("next_attempt_at", nextAttemptAt.map { .string(Timestamp.format($0)) } ?? .null),
            JSONMember(
                "attempts",
                .array(
                    attempts.map { attempt in
                        .object([
                            JSONMember("number", .integer(attempt.number)),
                            JSONMember("at", .string(Timestamp.format(attempt.at))),
                            JSONMember("result", .string(attempt.result)),
                        ])
                    })),
        ]
    }
}

extension Application {
    /// Registers an endpoint (`keybound webhook add`).
    /// - Throws: ``APIError`` when the URL or an event type is refused, or the URL is registered.
    /// - Parameter alsoWriting: writes more in the same transaction (the console's audit row).
    func addWebhook(
        url: String, events: [String], alsoWriting: (any SQLConnection) throws -> Void = { _ in }
    ) throws -> WebhookEndpointInfo {
        if let problem = WebhookTarget.formProblem(url) { throw APIError.invalid(problem) }
        if !configuration.allowPrivateWebhooks, let address = WebhookTarget.nonPublicAddress(of: url) {
            throw APIError.invalid(
                "\(address) is not a public address: webhooks to loopback or private networks need --allow-private-webhooks"
            )
        }
        guard !events.isEmpty else { throw APIError.invalid("give at least one --event") }
        var types: [WebhookEventType] = []
        for name in events {
            guard let type = WebhookEventType(rawValue: name) else {
                throw APIError.invalid(
                    "unknown event '\(name)': the events are \(WebhookEventType.known.map(\.rawValue).joined(separator: ", "))"
                )
            }
            if !types.contains(type) { types.append(type) }
        }
        let ordered = WebhookEventType.known.filter(types.contains)
        let id = SecureRandomBytes.identifier("whk")
        let key = SecureRandomBytes.bytes(32).base64EncodedString()
        let now = clock.nowToTheMillisecond
        try database.write { connection in
            guard
                try connection.queryOne("SELECT 1 FROM webhook_endpoints WHERE url = ?", [.text(url)]) == nil
            else { throw APIError.invalid("\(url) is registered already: remove it first") }
            try connection.execute(
                "INSERT INTO webhook_endpoints (id, url, secret, created_at) VALUES (?, ?, ?, ?)",
                [.text(id), .text(url), .text(key), .date(now)])
            for type in ordered {
                try connection.execute(
                    "INSERT INTO webhook_subscriptions (event_type, endpoint_id) VALUES (?, ?)",
                    [.text(type.rawValue), .text(id)])
            }
            try alsoWriting(connection)
        }
        return WebhookEndpointInfo(
            id: id, url: url, events: ordered.map(\.rawValue), createdAt: now,
            secret: WebhookSignature.secretPrefix + key)
    }

    /// The registered endpoints, oldest first, without their secrets.
    func webhooks() throws -> [WebhookEndpointInfo] {
        try database.read { connection in
            let subscriptions = try connection.query(
                "SELECT endpoint_id, event_type FROM webhook_subscriptions", []
            ).map { (try $0.text(0), try $0.text(1)) }
            return try connection.query(
                "SELECT id, url, created_at FROM webhook_endpoints ORDER BY created_at, id", []
            ).map { row in
                let id = try row.text(0)
                let events = Set(subscriptions.filter { $0.0 == id }.map(\.1))
                return WebhookEndpointInfo(
                    id: id, url: try row.text(1),
                    events: WebhookEventType.known.map(\.rawValue).filter(events.contains),
                    createdAt: Date(milliseconds: try row.integer(2)), secret: nil)
            }
        }
    }

    /// The id of the endpoint at `url`, if one is registered.
    private func endpointID(_ connection: any SQLConnection, url: String) throws -> SQLValue? {
        try connection.queryOne("SELECT id FROM webhook_endpoints WHERE url = ?", [.text(url)]).map {
            .text(try $0.text(0))
        }
    }

    /// Removes the endpoint at `url` with its deliveries, sent or not.
    /// - Returns: false when no endpoint has that URL.
    /// - Parameter alsoWriting: writes more in the same transaction (the console's audit row).
    func removeWebhook(url: String, alsoWriting: (any SQLConnection) throws -> Void = { _ in }) throws -> Bool
    {
        try database.write { connection in
            guard let id = try endpointID(connection, url: url) else { return false }
            try connection.execute(
                """
                DELETE FROM webhook_attempts WHERE delivery_id IN (
                    SELECT id FROM webhook_deliveries WHERE endpoint_id = ?)
                """, [id])
            try connection.execute("DELETE FROM webhook_deliveries WHERE endpoint_id = ?", [id])
            // A message no other endpoint is to receive has nothing left to do.
            try connection.execute(
                """
                DELETE FROM webhook_messages WHERE NOT EXISTS (
                    SELECT 1 FROM webhook_deliveries d WHERE d.message_id = webhook_messages.id)
                """, [])
            try connection.execute("DELETE FROM webhook_subscriptions WHERE endpoint_id = ?", [id])
            try connection.execute("DELETE FROM webhook_endpoints WHERE id = ?", [id])
            try alsoWriting(connection)
            return true
        }
    }

    /// The deliveries to the endpoint at `url`, newest first (at most `limit`), with their attempts.
    /// - Returns: nil when no endpoint has that URL.
    func webhookDeliveries(url: String, limit: Int) throws -> [WebhookDeliveryInfo]? {
        try database.read { connection in
            guard let endpoint = try endpointID(connection, url: url) else { return nil }
            let deliveries = try connection.query(
                """
                SELECT d.id, m.id, m.type, d.status, m.created_at, d.next_attempt_at
                FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
                WHERE d.endpoint_id = ? ORDER BY m.created_at DESC, d.id LIMIT ?
                """, [endpoint, .integer(Int64(limit))])
            // Every attempt to the endpoint in one query, then each delivery's picked out.
            var attempts: [String: [WebhookDeliveryInfo.Attempt]] = [:]
            for attempt in try connection.query(
                """
                SELECT a.delivery_id, a.number, a.attempted_at, a.result FROM webhook_attempts a
                JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ? ORDER BY a.number
                """, [endpoint])
            {
                attempts[try attempt.text(0), default: []].append(
                    WebhookDeliveryInfo.Attempt(
                        number: Int(try attempt.integer(1)), at: Date(milliseconds: try attempt.integer(2)),
                        result: try attempt.text(3)))
            }
            return try deliveries.map { delivery in
                let id = try delivery.text(0)
                let status = try delivery.text(3)
                return WebhookDeliveryInfo(
                    id: id, messageID: try delivery.text(1), type: try delivery.text(2), status: status,
                    createdAt: Date(milliseconds: try delivery.integer(4)),
                    nextAttemptAt: status == WebhookDeliveryStatus.pending.rawValue
                        ? Date(milliseconds: try delivery.integer(5)) : nil,
                    attempts: attempts[id] ?? [])
            }
        }
    }

    /// Sends a delivery again now, whatever its status, with a new three-day window: the same
    /// `webhook-id`, so a receiver that had it dedupes it.
    /// - Returns: false when no delivery has that id.
    /// - Parameter alsoWriting: writes more in the same transaction (the console's audit row).
    func retryWebhookDelivery(id: String, alsoWriting: (any SQLConnection) throws -> Void = { _ in }) throws
        -> Bool
    {
        let now = clock.nowToTheMillisecond
        let changed = try database.write { connection in
            let changed = try connection.execute(
                """
                UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, window_start = ?, lease_owner = NULL,
                    lease_until = NULL
                WHERE id = ?
                """, [.text(WebhookDeliveryStatus.pending.rawValue), .date(now), .date(now), .text(id)])
            if changed == 1 { try alsoWriting(connection) }
            return changed
        }
        return changed == 1
    }
}

/// Webhook endpoints on the server's database, for operators (`keybound webhook`,
/// docs/webhooks.md). The server may be running meanwhile: it reads the endpoints from the
/// database, and its deliverer picks up a retried delivery within a second.
public struct WebhookAdministration: Sendable {
    private let application: Application

    /// Opens (and if needed migrates) the database of `configuration`; its
    /// ``Configuration/allowPrivateWebhooks`` decides whether private targets may be added.
    /// - Throws: ``ServerError`` when the database cannot be opened.
    public init(configuration: Configuration) throws {
        application = try Application.forOperator(configuration)
    }

    /// Registers an endpoint for `events`. Its secret (``WebhookEndpointInfo/secret``) is
    /// returned only here.
    /// - Throws: ``ServerError`` `webhookRefused` for a URL that is malformed, not public (unless
    ///   allowed), or registered already, or an unknown event; `databaseUnreachable`.
    public func add(url: String, events: [String]) throws -> WebhookEndpointInfo {
        try refusing { try application.addWebhook(url: url, events: events) }
    }

    /// The registered endpoints, oldest first.
    /// - Throws: ``ServerError`` `databaseUnreachable`.
    public func endpoints() throws -> [WebhookEndpointInfo] { try refusing { try application.webhooks() } }

    /// Removes the endpoint at `url`; what it had not received is dropped.
    /// - Throws: ``ServerError`` `webhookNotFound`, `databaseUnreachable`.
    public func remove(url: String) throws {
        guard try refusing({ try application.removeWebhook(url: url) }) else {
            throw ServerError(.webhookNotFound, "no webhook endpoint has the URL '\(url)'")
        }
    }

    /// The latest `limit` deliveries to the endpoint at `url`, newest first.
    /// - Throws: ``ServerError`` `webhookNotFound`, `databaseUnreachable`.
    public func deliveries(url: String, limit: Int = 100) throws -> [WebhookDeliveryInfo] {
        guard let deliveries = try refusing({ try application.webhookDeliveries(url: url, limit: limit) })
        else {
            throw ServerError(.webhookNotFound, "no webhook endpoint has the URL '\(url)'")
        }
        return deliveries
    }

    /// Sends the delivery `id` again (within a second of a running server).
    /// - Throws: ``ServerError`` `webhookNotFound`, `databaseUnreachable`.
    public func retry(deliveryID id: String) throws {
        guard try refusing({ try application.retryWebhookDelivery(id: id) }) else {
            throw ServerError(.webhookNotFound, "no webhook delivery has the id '\(id)'")
        }
    }

    /// `body`, its refusals as `webhookRefused`, anything else as `databaseUnreachable`.
    private func refusing<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as APIError {
            throw ServerError(.webhookRefused, error.detail)
        } catch {
            throw ServerError(.databaseUnreachable, "webhook administration failed: \(error)")
        }
    }
}
