import Foundation
import KeyboundWire

extension Application {
    /// Builds an approval's signing payload (a random challenge) that expires `lifetime` seconds
    /// from now, in whole seconds (the payload's `expires` has no fraction).
    private func makePayload(
        _ context: RequestContext, purpose: SigningPayload.Purpose, deviceID: String, lifetime: Int,
        action: ApprovalAction?
    ) throws -> SigningPayload {
        try SigningPayload(
            purpose: purpose, server: configuration.serverID, device: deviceID,
            challenge: SecureRandomBytes.bytes(SigningPayload.challengeLength),
            expires: context.now.wholeSeconds.adding(seconds: lifetime), action: action)
    }

    /// `POST /v1/approvals`: a payload for the caller's device to sign, naming the action.
    func createApproval(_ context: RequestContext, _ body: RequestBody<CreateApprovalRequest>) throws
        -> ApprovalChallengeResponse
    {
        _ = try checkCaller(context)  // 401 comes before any complaint about the body
        let request = try body.decode()
        return try authenticatedWrite(context) { connection, caller in
            guard let device = try loadDevice(connection, id: request.deviceID),
                device.userID == caller.userID
            else {
                throw APIError.notFound
            }
            if let refusal = checkUsable(device) { throw refusal }
            let approval = try insertApproval(
                connection, context, userID: caller.userID, device: device, action: request.action,
                lifetime: configuration.approvalLifetime, sessionID: caller.sessionID)
            return ApprovalChallengeResponse(
                approvalID: approval.id, payload: approval.payload, expiresAt: approval.expiresAt)
        }
    }

    /// Writes a pending approval of `action` for `device` to sign, audited `approval_created`,
    /// with its `approval.requested` event.
    /// - Parameters:
    ///   - client: the CIBA client that asked for it; nil when the user's app did.
    ///   - bindingMessage: the CIBA request's message for the user.
    ///   - sessionID: the session of the app that asked, for the audit row.
    /// - Returns: its id, the payload bytes and when they expire.
    func insertApproval(
        _ connection: any SQLConnection, _ context: RequestContext, userID: String, device: DeviceRecord,
        action: ApprovalAction, lifetime: Int, client: OAuthClient? = nil, bindingMessage: String? = nil,
        sessionID: String? = nil
    ) throws -> (id: String, payload: Data, expiresAt: Date) {
        let approvalID = SecureRandomBytes.identifier("apr")
        let payload = try makePayload(
            context, purpose: .approve, deviceID: device.id, lifetime: lifetime, action: action)
        try connection.execute(
            """
            INSERT INTO approvals (id, user_id, device_id, action, payload, status, created_at, expires_at,
                decided_at, client_id, binding_message)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
            """,
            [
                .text(approvalID), .text(userID), .text(device.id),
                .text(String(decoding: JSON.serialize(action.json), as: UTF8.self)),
                .text(Base64URL.encode(payload.bytes)), .text(ApprovalStatus.pending.rawValue),
                .date(context.now), .date(payload.expires), (client?.id).sql, bindingMessage.sql,
            ])
        try audit(
            connection, context, .approvalCreated, userID: userID, deviceID: device.id, sessionID: sessionID,
            details: client.map { [JSONMember("client_id", .string($0.id))] } ?? [])
        var data = [
            JSONMember("approval_id", .string(approvalID)), JSONMember("user_id", .string(userID)),
            JSONMember("device_id", .string(device.id)), JSONMember("status", .string("pending")),
            JSONMember("expires_at", .string(Timestamp.format(payload.expires))),
            JSONMember("action", action.json),
        ]
        if let client { data.append(JSONMember("client_id", .string(client.id))) }
        if let bindingMessage { data.append(JSONMember("binding_message", .string(bindingMessage))) }
        try emit(connection, now: context.now, .approvalRequested, data)
        return (approvalID, payload.bytes, payload.expires)
    }

    /// `POST /v1/approvals/{id}/confirm`: the device's signature over the payload. The first
    /// confirmation decides, valid or not.
    func confirmApproval(_ context: RequestContext, _ body: RequestBody<ConfirmApprovalRequest>) throws
        -> ConfirmApprovalResponse
    {
        let caller = try checkCaller(context)  // 401 comes before any complaint about the body
        let request = try body.decode()
        let approvalID = context.parameter("id")
        guard Grammar.isIdentifier(approvalID) else { throw APIError.notFound }
        // An approval id the caller does not have is refused after a read: forged ids cost no
        // write transaction. The write below checks it again, with the status and the expiry.
        let exists = try database.read { connection in
            try connection.queryOne(
                "SELECT 1 FROM approvals WHERE id = ? AND user_id = ?",
                [.text(approvalID), .text(caller.userID)])
                != nil
        }
        guard exists else { throw APIError.notFound }
        return try authenticatedWrite(context) {
            connection, caller -> WriteOutcome<ConfirmApprovalResponse> in
            // Bound to the user: another user's approval does not exist for this caller.
            guard let approval = try loadApproval(connection, id: approvalID, userID: caller.userID) else {
                return .refused(.notFound)
            }
            guard approval.stored.status == .pending else { return .refused(.challengeUsed) }
            guard context.now < approval.stored.expiresAt else { return .refused(.challengeExpired) }
            guard let device = try loadDevice(connection, id: approval.stored.deviceID),
                let payload = Base64URL.decode(approval.payload)
            else { return .refused(.notFound) }
            if let refusal = checkUsable(device) { return .refused(refusal) }
            var refusal = try verifyDeviceSignature(
                connection, context, device: device, payload: payload, signature: request.signature,
                method: .approval)
            if refusal == nil {
                refusal = try checkAppAttestAssertion(
                    request.appAttestAssertion, device: device, clientData: payload, connection, context)
            }
            let valid = refusal == nil
            let decidedAt = Date(milliseconds: context.now.milliseconds)
            let receipt =
                valid
                ? try approvalReceipt(
                    connection, approvalID: approvalID, userID: caller.userID, device: device,
                    action: approval.stored.action, bindingMessage: approval.bindingMessage, payload: payload,
                    signature: request.signature, decidedAt: decidedAt) : nil
            // Single use: the first confirmation decides, valid or not.
            let decided = try connection.execute(
                "UPDATE approvals SET status = ?, decided_at = ?, receipt = ? WHERE id = ? AND status = ?",
                [
                    .text(valid ? ApprovalStatus.approved.rawValue : ApprovalStatus.failed.rawValue),
                    .date(decidedAt), receipt.map(SQLValue.text) ?? .null, .text(approvalID),
                    .text(ApprovalStatus.pending.rawValue),
                ])
            guard decided == 1 else { return .refused(.challengeUsed) }
            try emitApprovalDecided(
                connection, now: decidedAt, approvalID: approvalID, userID: caller.userID,
                deviceID: device.id,
                status: valid ? .approved : .failed, action: approval.stored.action, receipt: receipt)
            if approval.requestedByClient {
                try notifyBackchannelClient(connection, approvalID: approvalID, now: decidedAt)
            }
            if let refusal { return .refused(refusal) }
            try audit(
                connection, context, .approvalConfirmed, userID: caller.userID, deviceID: device.id,
                sessionID: caller.sessionID)
            return .done(ConfirmApprovalResponse(status: .approved))
        }.get()
    }

    /// `GET /v1/approvals/{id}`.
    func approvalStatus(_ context: RequestContext) throws -> ApprovalResponse {
        let caller = try authenticate(context)
        let approvalID = context.parameter("id")
        guard Grammar.isIdentifier(approvalID) else { throw APIError.notFound }
        guard
            let stored = try database.read({
                try loadApproval($0, id: approvalID, userID: caller.userID)?.stored
            })
        else { throw APIError.notFound }
        return stored.asOf(context.now)
    }

    /// `GET /v1/approvals?status=pending`: the caller's approvals waiting for a decision (not
    /// expired, on a device that is not revoked), newest first, at most 100. Only `pending` is
    /// listed: a decided approval is read by its id.
    func listApprovals(_ context: RequestContext) throws -> PendingApprovalListResponse {
        let caller = try authenticate(context)
        guard context.request.query["status"] == ApprovalStatus.pending.rawValue,
            !context.request.repeatedQueryNames.contains("status")
        else { throw APIError.invalid("status must be pending: approvals waiting for a decision are listed") }
        let approvals = try database.read { connection in
            try connection.query(
                PendingApprovalInfo.self,
                """
                SELECT \(PendingApprovalInfo.columns) FROM approvals a JOIN devices d ON d.id = a.device_id
                LEFT JOIN oauth_clients c ON c.id = a.client_id
                WHERE a.user_id = ? AND a.status = ? AND a.expires_at > ? AND d.revoked_at IS NULL
                ORDER BY a.created_at DESC, a.id LIMIT 100
                """,
                [.text(caller.userID), .text(ApprovalStatus.pending.rawValue), .date(context.now)])
        }
        return PendingApprovalListResponse(approvals: approvals)
    }

    /// `POST /v1/approvals/{id}/deny`: the user refuses a pending approval; it can never be
    /// approved afterwards. Needs the user's session, not the device's signature: refusing can
    /// only stop what the approval would have allowed.
    /// - Throws: 404 for another user's or an unknown approval; 409 `challenge_used` once it is
    ///   decided; 410 `challenge_expired` after its payload expired.
    func denyApproval(_ context: RequestContext) throws -> ApprovalResponse {
        let approvalID = context.parameter("id")
        guard Grammar.isIdentifier(approvalID) else { throw APIError.notFound }
        return try authenticatedWrite(context) { connection, caller in
            guard let record = try loadApproval(connection, id: approvalID, userID: caller.userID) else {
                throw APIError.notFound
            }
            let approval = record.stored
            guard approval.status == .pending else { throw APIError.challengeUsed }
            guard context.now < approval.expiresAt else { throw APIError.challengeExpired }
            let decidedAt = Date(milliseconds: context.now.milliseconds)
            let decided = try connection.execute(
                "UPDATE approvals SET status = ?, decided_at = ? WHERE id = ? AND status = ?",
                [
                    .text(ApprovalStatus.denied.rawValue), .date(decidedAt), .text(approvalID),
                    .text(ApprovalStatus.pending.rawValue),
                ])
            guard decided == 1 else { throw APIError.challengeUsed }
            try emitApprovalDecided(
                connection, now: decidedAt, approvalID: approvalID, userID: caller.userID,
                deviceID: approval.deviceID, status: .denied, action: approval.action, receipt: nil)
            if record.requestedByClient {
                try notifyBackchannelClient(connection, approvalID: approvalID, now: decidedAt)
            }
            try audit(
                connection, context, .approvalDenied, userID: caller.userID, deviceID: approval.deviceID,
                sessionID: caller.sessionID)
            return ApprovalResponse(
                approvalID: approval.approvalID, status: .denied, deviceID: approval.deviceID,
                action: approval.action, createdAt: approval.createdAt, expiresAt: approval.expiresAt,
                decidedAt: decidedAt)
        }
    }

    /// The approval `id` of the user `userID`: another user's does not exist for them.
    private func loadApproval(_ connection: any SQLConnection, id: String, userID: String) throws
        -> ApprovalRecord?
    {
        try connection.queryOne(
            ApprovalRecord.self,
            "SELECT \(ApprovalRecord.columns) FROM approvals WHERE id = ? AND user_id = ?",
            [.text(id), .text(userID)])
    }
}

/// An approval row: the approval as stored (its status not yet turned `expired`), the payload
/// bytes the device signs (base64url), a CIBA request's message for the user, and whether an
/// OAuth client asked for it (CIBA): only then may a decision owe that client a ping.
private struct ApprovalRecord {
    let stored: ApprovalResponse
    let payload: String
    let bindingMessage: String?
    let requestedByClient: Bool
}

extension ApprovalRecord: SQLRecord {
    static let columns = """
        id, status, device_id, action, created_at, expires_at, decided_at, receipt, payload, binding_message,
            client_id
        """

    init(row: inout SQLRowReader) throws {
        self.init(
            stored: try ApprovalResponse(row: &row), payload: try row.text(),
            bindingMessage: try row.optionalText(), requestedByClient: try row.optionalText() != nil)
    }
}

extension ApprovalResponse: SQLRecord {
    static let columns = "id, status, device_id, action, created_at, expires_at, decided_at, receipt"

    /// The approval as it stands at `now`: a pending one past its expiry is `expired`.
    func asOf(_ now: Date) -> ApprovalResponse {
        guard status == .pending, now >= expiresAt else { return self }
        return ApprovalResponse(
            approvalID: approvalID, status: .expired, deviceID: deviceID, action: action,
            createdAt: createdAt,
            expiresAt: expiresAt, decidedAt: decidedAt, receipt: nil)
    }

    /// Reads `id, status, device_id, action, created_at, expires_at, decided_at, receipt`. A
    /// status this server does not know reads as `failed`.
    init(row: inout SQLRowReader) throws {
        self.init(
            approvalID: try row.text(), status: ApprovalStatus(rawValue: try row.text()) ?? .failed,
            deviceID: try row.text(), action: try ApprovalAction(json: JSON.parse(Data(try row.text().utf8))),
            createdAt: try row.date(), expiresAt: try row.date(), decidedAt: try row.optionalDate(),
            receipt: try row.optionalText())
    }
}

extension PendingApprovalInfo: SQLRecord {
    static let columns = "a.id, a.device_id, a.payload, a.created_at, a.expires_at, a.binding_message, c.name"

    init(row: inout SQLRowReader) throws {
        self.init(
            approvalID: try row.text(), deviceID: try row.text(), payload: try row.base64URLBytes(),
            createdAt: try row.date(), expiresAt: try row.date(), bindingMessage: try row.optionalText(),
            clientName: try row.optionalText())
    }
}
