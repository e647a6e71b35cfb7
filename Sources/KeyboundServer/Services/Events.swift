import Foundation
import KeyboundWire

/// The type of an event that webhooks deliver (docs/webhooks.md).
public struct WebhookEventType: Hashable, Sendable, CustomStringConvertible {
    /// The type as it appears in a delivery's `type`: `device.bound`.
    public let rawValue: String

    /// The type named `rawValue`, if this version emits it.
    public init?(rawValue: String) {
        guard Self.known.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }

    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// The type's name.
    public var description: String { rawValue }

    /// An app asked for an approval (`POST /v1/approvals`).
    public static let approvalRequested = WebhookEventType("approval.requested")
    /// An approval was decided: `approved`, or `failed` (a signature that did not verify).
    public static let approvalDecided = WebhookEventType("approval.decided")
    /// A device key was bound.
    public static let deviceBound = WebhookEventType("device.bound")
    /// A device was revoked (by its user, or replaced by a new key from the same client).
    public static let deviceRevoked = WebhookEventType("device.revoked")
    /// A passkey was registered, at sign-up or added to the account.
    public static let passkeyAdded = WebhookEventType("passkey.added")
    /// A passkey was removed.
    public static let passkeyRemoved = WebhookEventType("passkey.removed")
    /// A session ended before its time: logout, refresh-token reuse, replaced by a new login,
    /// its device revoked, its passkey removed, its OAuth client removed.
    public static let sessionRevoked = WebhookEventType("session.revoked")
    /// An account was created (sign-up, passkey sign-up, `keybound user add`).
    public static let accountCreated = WebhookEventType("account.created")
    /// Password logins to an account were blocked: from one client address, or from all of them.
    public static let accountLocked = WebhookEventType("account.locked")

    /// Every type this version emits, in the order of docs/webhooks.md.
    public static let known: [WebhookEventType] = [
        .approvalRequested, .approvalDecided, .deviceBound, .deviceRevoked, .passkeyAdded, .passkeyRemoved,
        .sessionRevoked, .accountCreated, .accountLocked,
    ]
}

extension AuditEventType {
    /// The event an audit row of this type reports, when it reports one by itself. Approvals
    /// and sessions report theirs where their rows change (``Application/emit(_:now:_:_:)``
    /// from the approval and session code), since their events carry more than an audit row.
    var webhookEvent: WebhookEventType? {
        switch self {
        case .accountCreated: .accountCreated
        case .deviceBound: .deviceBound
        case .deviceRevoked: .deviceRevoked
        case .passkeyRegistered: .passkeyAdded
        case .passkeyRemoved: .passkeyRemoved
        case .lockout, .accountCeiling: .accountLocked
        default: nil
        }
    }
}

extension Application {
    /// Writes an event to the outbox in the running write transaction: one message (the body
    /// every delivery sends, byte for byte) and one pending delivery per endpoint that takes
    /// `type`. Nothing is written when no endpoint takes it. The change and its event commit or
    /// roll back together; the deliverer is woken once they have committed.
    /// - Parameter endpoints: the endpoints that take `type`, when the caller has read them in
    ///   this transaction already (``subscribers(of:)``); else they are read here.
    func emit(
        _ connection: any SQLConnection, now: Date, _ type: WebhookEventType, _ data: [JSONMember],
        endpoints: [String]? = nil
    ) throws {
        let endpoints = try endpoints ?? Self.endpointIDs(connection.queries([Self.subscribers(of: type)])[0])
        guard !endpoints.isEmpty else { return }
        let messageID = SecureRandomBytes.timeOrderedIdentifier("msg", milliseconds: now.milliseconds)
        let body = JSON.serialize(
            .object([
                JSONMember("type", .string(type.rawValue)),
                JSONMember("timestamp", .string(Timestamp.format(now))),
                JSONMember("data", .object(data)),
            ]))
        try connection.executeLater(
            "INSERT INTO webhook_messages (id, type, created_at, body) VALUES (?, ?, ?, ?)",
            [
                .text(messageID), .text(type.rawValue), .date(now),
                .text(String(decoding: body, as: UTF8.self)),
            ])
        for endpoint in endpoints {
            try connection.executeLater(
                """
                INSERT INTO webhook_deliveries (id, message_id, endpoint_id, status, attempts, window_start,
                    next_attempt_at, lease_owner, lease_until, delivered_at)
                VALUES (?, ?, ?, ?, 0, ?, ?, NULL, NULL, NULL)
                """,
                [
                    .text(SecureRandomBytes.identifier("whd")), .text(messageID), .text(endpoint),
                    .text(WebhookDeliveryStatus.pending.rawValue), .date(now), .date(now),
                ])
        }
        AfterCommit.run { [webhookWakeUp] in webhookWakeUp.signal() }
    }

    /// The statement that reads the ids of the endpoints that take `type`, for ``emit(_:now:_:_:endpoints:)``:
    /// one that can go in the round trip of another (``SQLConnection/queries(_:)``).
    static func subscribers(of type: WebhookEventType) -> SQLStatement {
        SQLStatement(
            "SELECT endpoint_id FROM webhook_subscriptions WHERE event_type = ?", [.text(type.rawValue)])
    }

    /// The endpoint ids that ``subscribers(of:)`` read.
    static func endpointIDs(_ rows: [SQLRow]) throws -> [String] { try rows.map { try $0.text(0) } }

    /// Emits the event an audit row reports by itself (``AuditEventType/webhookEvent``): who
    /// (user, device, session, method) and `details`. A lockout of an unknown username reports
    /// nothing: there is no account.
    func emitAudited(
        _ connection: any SQLConnection, now: Date, _ type: AuditEventType, method: AuditMethod?,
        userID: String?, deviceID: String?, sessionID: String?, details: [JSONMember]
    ) throws {
        guard let event = type.webhookEvent, let userID else { return }
        var data = [JSONMember("user_id", .string(userID))]
        if let deviceID { data.append(JSONMember("device_id", .string(deviceID))) }
        if let sessionID { data.append(JSONMember("session_id", .string(sessionID))) }
        if let method { data.append(JSONMember("method", .string(method.rawValue))) }
        if type == .lockout || type == .accountCeiling {
            // One client address blocked, or every address (the account's ceiling).
            data.append(JSONMember("scope", .string(type == .lockout ? "address" : "account")))
        }
        try emit(connection, now: now, event, data + details)
    }

    /// `approval.decided` for an approval whose status this transaction has just set, with the
    /// receipt of an approved one (docs/approvals.md), which anyone can check offline.
    func emitApprovalDecided(
        _ connection: any SQLConnection, now: Date, approvalID: String, userID: String, deviceID: String,
        status: ApprovalStatus, action: ApprovalAction, receipt: String?
    ) throws {
        var data = [
            JSONMember("approval_id", .string(approvalID)), JSONMember("user_id", .string(userID)),
            JSONMember("device_id", .string(deviceID)), JSONMember("status", .string(status.rawValue)),
            JSONMember("decided_at", .string(Timestamp.format(now))), JSONMember("action", action.json),
        ]
        if let receipt { data.append(JSONMember("receipt", .string(receipt))) }
        try emit(connection, now: now, .approvalDecided, data)
        traffic.count(status == .approved ? .approvalApproved : .approvalDenied, at: now)
    }
}
