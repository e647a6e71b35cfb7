import Foundation
import KeyboundWire

// The console's overview, audit log, OAuth clients and webhooks (docs/console.md).

extension Application {
    /// The series the overview charts, in the order it shows them.
    static let overviewSeries = [
        "login.password", "login.device", "login.passkey", "login.oauth", "failure.password",
        "failure.device",
        "failure.passkey", "throttled.password", "throttled.device", "throttled.passkey", "approval.approved",
        "approval.denied", "approval.expired", "webhook.failed",
    ]

    /// `GET /admin/v1/me`: the administrator, and until when they may change things.
    func consoleMe(_ context: RequestContext) throws -> HTTPResponse {
        let caller = try consoleAdmin(context)
        let recent = caller.authMethod == .password || caller.authMethod == .passkey
        return .console([
            JSONMember("user_id", .string(caller.userID)), JSONMember("username", .string(caller.username)),
            JSONMember("session_id", .string(caller.sessionID)),
            JSONMember("auth_method", .string(caller.authMethod.rawValue)),
            JSONMember("auth_time", .time(caller.authTime)),
            JSONMember(
                "changes_until",
                .time(recent ? caller.authTime.adding(seconds: Self.consoleChangeWindow) : nil)),
        ])
    }

    /// `DELETE /admin/v1/sessions/current`: the administrator signs out of the console.
    func consoleLogout(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        _ = try logout(context)
        return HTTPResponse.noContent
    }

    /// `GET /admin/v1/overview`: the last 24 hours in five-minute buckets, oldest first, of every
    /// series (``overviewSeries``), from the counts of every instance in the database (this
    /// instance's are written first; another's lag by up to its
    /// ``Configuration/trafficFlushInterval``).
    func consoleOverview(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        flushTraffic()
        let buckets = Int64(24 * 3600) / TrafficCounters.bucketSeconds
        let last = TrafficCounters.bucket(of: context.now)
        let first = last - (buckets - 1) * TrafficCounters.bucketSeconds
        let counts = try database.read { try trafficCounts(since: first, $0) }
        let series = Self.overviewSeries.map { name in
            let byBucket = counts[name] ?? [:]
            let values = (0..<buckets).map { index in
                JSONValue.integer(Int(byBucket[first + index * TrafficCounters.bucketSeconds] ?? 0))
            }
            return JSONValue.object([JSONMember("name", .string(name)), JSONMember("counts", .array(values))])
        }
        return .console([
            JSONMember("bucket_seconds", .integer(Int(TrafficCounters.bucketSeconds))),
            JSONMember("start", .string(Timestamp.format(unixSeconds: first))),
            JSONMember("series", .array(series)),
        ])
    }

    /// `GET /admin/v1/audit`: events, newest activity first, filtered by `user` (a username or a
    /// user id), `actor` (an administrator's user id), `type`, `address` (first or latest client
    /// address), `since` and `until` (RFC 3339), at most `limit` (1–500, 100).
    func consoleAudit(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        let query = context.request.query
        var conditions: [String] = []
        var parameters: [SQLValue] = []
        func text(_ name: String) throws -> String? {
            guard let value = query[name], !value.isEmpty else { return nil }
            guard value.utf8.count <= 128 else { throw APIError.invalid("\(name) is at most 128 bytes") }
            return value
        }
        if let user = try text("user") {
            conditions.append("(user_id = ? OR user_id IN (SELECT id FROM users WHERE username = ?))")
            parameters += [.text(user), .text(user)]
        }
        if let actor = try text("actor") {
            conditions.append("actor_id = ?")
            parameters.append(.text(actor))
        }
        if let type = try text("type") {
            conditions.append("type = ?")
            parameters.append(.text(type))
        }
        if let address = try text("address") {
            conditions.append("(client_address = ? OR last_client_address = ?)")
            parameters += [.text(address), .text(address)]
        }
        for (name, condition) in [("since", "last_at >= ?"), ("until", "time <= ?")] {
            guard let value = try text(name) else { continue }
            guard let time = Timestamp.parse(value) else {
                throw APIError.invalid("\(name) must be an RFC 3339 time, like 2026-12-01T10:00:00Z")
            }
            conditions.append(condition)
            parameters.append(.date(time))
        }
        var limit = 100
        if let value = try text("limit") {
            guard let number = Int(value), (1...500).contains(number) else {
                throw APIError.invalid("limit must be an integer from 1 to 500")
            }
            limit = number
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let events = try database.read { connection in
            try connection.query(
                AuditEvent.self,
                "SELECT \(AuditEvent.columns) FROM audit_events \(filter) ORDER BY last_at DESC, id LIMIT ?",
                parameters + [.integer(Int64(limit))])
        }
        return .console([JSONMember("events", .array(events.map(\.json)))])
    }

    // MARK: OAuth clients and webhooks

    /// `GET /admin/v1/oauth-clients`: the registered clients, oldest first (no secrets).
    func consoleClients(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        return .console([JSONMember("clients", .array(try clientInfos().map(\.consoleJSON)))])
    }

    /// `POST /admin/v1/oauth-clients` with `{"name": …, "redirect_uris": [...], "confidential":
    /// true|false}`: registers a client as `keybound client add` does (the same rules); the answer
    /// (201) carries a confidential client's secret, shown this once. CIBA, DPoP, extra scopes and
    /// `private_key_jwt` clients are registered with `keybound client add`.
    func consoleAddClient(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)  // before the body says anything
        let usage = "send {\"name\": \"…\", \"redirect_uris\": [\"https://…\"], \"confidential\": true}"
        guard case .object(let members)? = try? JSON.parse(context.request.body),
            case .string(let name)? = members.first(where: { $0.name == "name" })?.value,
            case .array(let list)? = members.first(where: { $0.name == "redirect_uris" })?.value,
            case .bool(let confidential)? = members.first(where: { $0.name == "confidential" })?.value,
            members.count == 3, list.count <= 16
        else { throw APIError.invalid(usage) }
        let redirectURIs = try list.map { value in
            guard case .string(let uri) = value, uri.utf8.count <= 2048 else { throw APIError.invalid(usage) }
            return uri
        }
        var registration = OAuthClientRegistration(name: name, redirectURIs: redirectURIs)
        registration.confidential = confidential
        let client: OAuthClientInfo
        do {
            client = try consoleConfigurationChange(context, "OAuth client \(name) added") { also in
                try addClient(registration, alsoWriting: also)
            }
        } catch let refusal as OAuthError {
            throw APIError.invalid(refusal.description)
        }
        return .console(
            (client.consoleJSON.members ?? []) + [JSONMember("secret", .text(client.secret))], status: 201)
    }

    /// `DELETE /admin/v1/oauth-clients/{id}`: removes the client and ends its sessions.
    func consoleRemoveClient(_ context: RequestContext) throws -> HTTPResponse {
        let id = context.parameter("id")
        guard Grammar.isIdentifier(id) else { throw APIError.notFound }
        let removed = try consoleConfigurationChange(context, "OAuth client \(id) removed") { also in
            try removeClient(id: id, alsoWriting: also)
        }
        guard removed else { throw APIError.notFound }
        return HTTPResponse.noContent
    }

    /// `GET /admin/v1/webhooks`: the endpoints, oldest first (no secrets).
    func consoleWebhooks(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        return .console([JSONMember("webhooks", .array(try webhooks().map { .object($0.jsonMembers) }))])
    }

    /// `POST /admin/v1/webhooks` with `{"url": …, "events": [...]}`: registers an endpoint; the
    /// answer (201) carries its signing secret, shown this once.
    func consoleAddWebhook(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)  // before the body says anything
        guard case .object(let members)? = try? JSON.parse(context.request.body),
            case .string(let url)? = members.first(where: { $0.name == "url" })?.value,
            case .array(let list)? = members.first(where: { $0.name == "events" })?.value,
            members.count == 2, url.utf8.count <= 2048
        else {
            throw APIError.invalid("send {\"url\": \"https://…\", \"events\": [\"approval.decided\", …]}")
        }
        let events = try list.map { value in
            guard case .string(let event) = value else { throw APIError.invalid("events are strings") }
            return event
        }
        let endpoint = try consoleConfigurationChange(context, "webhook \(url) added") { also in
            try addWebhook(url: url, events: events, alsoWriting: also)
        }
        return .console(endpoint.jsonMembers + [JSONMember("secret", .text(endpoint.secret))], status: 201)
    }

    /// `DELETE /admin/v1/webhooks/{id}`: removes the endpoint and what it had not received.
    func consoleRemoveWebhook(_ context: RequestContext) throws -> HTTPResponse {
        let endpoint = try webhookEndpoint(context)
        guard
            try consoleConfigurationChange(
                context, "webhook \(endpoint.url) removed",
                { also in
                    try removeWebhook(url: endpoint.url, alsoWriting: also)
                })
        else { throw APIError.notFound }
        return HTTPResponse.noContent
    }

    /// `GET /admin/v1/webhooks/{id}/deliveries`: the latest 100, newest first, with attempts.
    func consoleDeliveries(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        let endpoint = try webhookEndpoint(context)
        let deliveries = try webhookDeliveries(url: endpoint.url, limit: 100) ?? []
        return .console([JSONMember("deliveries", .array(deliveries.map { .object($0.jsonMembers) }))])
    }

    /// `POST /admin/v1/webhook-deliveries/{id}/retry`: sends the delivery again.
    func consoleRetryDelivery(_ context: RequestContext) throws -> HTTPResponse {
        let id = context.parameter("id")
        guard Grammar.isIdentifier(id) else { throw APIError.notFound }
        guard
            try consoleConfigurationChange(
                context, "webhook delivery \(id) sent again",
                { also in
                    try retryWebhookDelivery(id: id, alsoWriting: also)
                })
        else { throw APIError.notFound }
        return HTTPResponse.noContent
    }

    /// The webhook endpoint the path's `{id}` names.
    private func webhookEndpoint(_ context: RequestContext) throws -> WebhookEndpointInfo {
        _ = try consoleAdmin(context)
        let id = context.parameter("id")
        guard let endpoint = try webhooks().first(where: { $0.id == id }) else { throw APIError.notFound }
        return endpoint
    }

    /// Runs an administrator's change to the server's configuration (OAuth clients, webhooks),
    /// made by an operator function that writes in a transaction of its own: the administrator is
    /// checked before (a valid token, the role, a recent login: ``consoleChange(_:_:)``'s rules)
    /// and, with the `configuration_changed` audit event, again inside that transaction, which
    /// `operation` hands to its write.
    private func consoleConfigurationChange<T>(
        _ context: RequestContext, _ detail: String,
        _ operation: (_ alsoWriting: (any SQLConnection) throws -> Void) throws -> T
    ) throws -> T {
        let caller = try consoleAdmin(context)
        try checkRecentLogin(caller, context)
        return try operation { connection in
            guard try holds(.admin, userID: caller.userID, connection) else { throw APIError.adminRequired }
            try insertAuditEvent(
                connection, now: context.now, clientAddress: context.clientAddress.text,
                .configurationChanged,
                method: nil, userID: nil, deviceID: nil, sessionID: nil, actorID: caller.userID,
                detail: detail)
        }
    }
}

extension OAuthClientInfo {
    /// The client as the console shows it, without its secret.
    fileprivate var consoleJSON: JSONValue {
        .object([
            JSONMember("client_id", .string(clientID)), JSONMember("name", .string(name)),
            JSONMember("redirect_uris", .array(redirectURIs.map(JSONValue.string))),
            JSONMember("authentication", .string(authentication)),
            JSONMember("scopes", .array(scopes.map(JSONValue.string))),
            JSONMember("dpop_required", .bool(dpopRequired)),
            JSONMember("ciba", .text(ciba?.rawValue)), JSONMember("created_at", .time(createdAt)),
        ])
    }
}

extension JSONValue {
    /// An object's members; nil for anything else.
    fileprivate var members: [JSONMember]? {
        guard case .object(let members) = self else { return nil }
        return members
    }
}
