import Foundation
import KeyboundWire

extension Application {
    /// Builds an approval's signing payload (a random challenge) that expires `lifetime` seconds
    /// from now (whole seconds).
    private func makePayload(
        _ context: RequestContext, purpose: SigningPayload.Purpose, deviceID: String, lifetime: Int,
        action: ApprovalAction?
    ) throws -> (payload: SigningPayload, expiresAt: Int64) {
        let expiresSeconds = context.now / 1000 + Int64(lifetime)
        let payload = try SigningPayload(
            purpose: purpose, server: configuration.serverID, device: deviceID,
            challenge: SecureRandomBytes.bytes(SigningPayload.challengeLength),
            expires: Date(timeIntervalSince1970: TimeInterval(expiresSeconds)), action: action)
        return (payload, expiresSeconds * 1000)
    }

    /// `POST /v1/approvals`: a payload for the caller's device to sign, naming the action.
    func createApproval(_ context: RequestContext, _ body: RequestBody<CreateApprovalRequest>) throws
        -> ApprovalChallengeResponse
    {
        _ = try authenticate(context)  // 401 comes before any complaint about the body
        let request = try body.decode()
        let approvalID = SecureRandomBytes.identifier("apr")
        let issued = try authenticatedWrite(context) { connection, caller in
            guard let device = try loadDevice(connection, id: request.deviceID),
                device.userID == caller.userID
            else {
                throw APIError.notFound
            }
            if let refusal = checkUsable(device) { throw refusal }
            let issued = try makePayload(
                context, purpose: .approve, deviceID: device.id, lifetime: configuration.approvalLifetime,
                action: request.action)
            try connection.execute(
                """
                INSERT INTO approvals (id, user_id, device_id, action, payload, status, created_at, expires_at,
                    decided_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)
                """,
                [
                    .text(approvalID), .text(caller.userID), .text(device.id),
                    .text(String(decoding: JSON.serialize(request.action.json), as: UTF8.self)),
                    .text(Base64URL.encode(issued.payload.bytes)), .text(ApprovalStatus.pending.rawValue),
                    .integer(context.now),
                    .integer(issued.expiresAt),
                ])
            try audit(
                connection, context, .approvalCreated, userID: caller.userID, deviceID: device.id,
                sessionID: caller.sessionID)
            return issued
        }
        return ApprovalChallengeResponse(
            approvalID: approvalID, payload: issued.payload.bytes, expiresAt: issued.payload.expires)
    }

    /// `POST /v1/approvals/{id}/confirm`: the device's signature over the payload. The first
    /// confirmation decides, valid or not.
    func confirmApproval(_ context: RequestContext, _ body: RequestBody<ConfirmApprovalRequest>) throws
        -> ConfirmApprovalResponse
    {
        let caller = try authenticate(context)  // 401 comes before any complaint about the body
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
        try authenticatedWrite(context) { connection, caller -> WriteOutcome<Void> in
            // Bound to the user: another user's approval does not exist for this caller.
            guard
                let row = try connection.queryOne(
                    "SELECT device_id, payload, status, expires_at FROM approvals WHERE id = ? AND user_id = ?",
                    [.text(approvalID), .text(caller.userID)])
            else { return .refused(.notFound) }
            guard try row.text(2) == ApprovalStatus.pending.rawValue else { return .refused(.challengeUsed) }
            guard context.now < (try row.integer(3)) else { return .refused(.challengeExpired) }
            guard let device = try loadDevice(connection, id: try row.text(0)),
                let payload = Base64URL.decode(try row.text(1))
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
            // Single use: the first confirmation decides, valid or not.
            let decided = try connection.execute(
                "UPDATE approvals SET status = ?, decided_at = ? WHERE id = ? AND status = ?",
                [
                    .text(valid ? ApprovalStatus.approved.rawValue : ApprovalStatus.failed.rawValue),
                    .integer(context.now), .text(approvalID), .text(ApprovalStatus.pending.rawValue),
                ])
            guard decided == 1 else { return .refused(.challengeUsed) }
            if let refusal { return .refused(refusal) }
            try audit(
                connection, context, .approvalConfirmed, userID: caller.userID, deviceID: device.id,
                sessionID: caller.sessionID)
            return .done(())
        }.get()
        return ConfirmApprovalResponse(status: .approved)
    }

    /// `GET /v1/approvals/{id}`.
    func approvalStatus(_ context: RequestContext) throws -> ApprovalResponse {
        let caller = try authenticate(context)
        let approvalID = context.parameter("id")
        guard Grammar.isIdentifier(approvalID) else { throw APIError.notFound }
        let row = try database.read { connection in
            try connection.queryOne(
                """
                SELECT device_id, action, status, created_at, expires_at, decided_at
                FROM approvals WHERE id = ? AND user_id = ?
                """, [.text(approvalID), .text(caller.userID)])
        }
        guard let row else { throw APIError.notFound }
        var status = ApprovalStatus(rawValue: try row.text(2)) ?? .failed
        if status == .pending, context.now >= (try row.integer(4)) { status = .expired }
        let action = try ApprovalAction(json: JSON.parse(Data(try row.text(1).utf8)))
        func date(_ milliseconds: Int64) -> Date {
            Date(timeIntervalSince1970: TimeInterval(milliseconds / 1000))
        }
        return ApprovalResponse(
            approvalID: approvalID, status: status, deviceID: try row.text(0), action: action,
            createdAt: date(try row.integer(3)), expiresAt: date(try row.integer(4)),
            decidedAt: try row.optionalInteger(5).map(date))
    }
}
