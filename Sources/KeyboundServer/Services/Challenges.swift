import Foundation
import KeyboundWire

extension Application {
    /// Builds a signing payload that expires `lifetime` seconds from now (whole seconds).
    func makePayload(
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

    func createChallenge(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(ChallengeRequest.self)
        let challengeID = SecureRandomBytes.identifier("chl")
        let issued = try database.write { connection in
            guard let device = try loadDevice(connection, id: request.deviceID) else {
                throw APIError.notFound
            }
            if let refusal = device.checkUsable() { throw refusal }
            let issued = try makePayload(
                context, purpose: .login, deviceID: device.id, lifetime: configuration.challengeLifetime,
                action: nil)
            try connection.execute(
                """
                INSERT INTO challenges (id, device_id, payload, created_at, expires_at, used_at)
                VALUES (?, ?, ?, ?, ?, NULL)
                """,
                [
                    .text(challengeID), .text(device.id), .text(Base64URL.encode(issued.payload.bytes)),
                    .integer(context.now), .integer(issued.expiresAt),
                ])
            return issued
        }
        return .json(
            201,
            ChallengeResponse(
                challengeID: challengeID, payload: issued.payload.bytes, expiresAt: issued.payload.expires))
    }

    func deviceLogin(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(DeviceLoginRequest.self)
        guard Validate.identifier(request.challengeID) else { throw APIError.notFound }
        let result: Result<TokenResponse, APIError> = try database.write { connection in
            guard
                let row = try connection.queryOne(
                    "SELECT device_id, payload, expires_at, used_at FROM challenges WHERE id = ?",
                    [.text(request.challengeID)])
            else { return .failure(.notFound) }
            guard let device = try loadDevice(connection, id: try row.text(0)),
                let payload = Base64URL.decode(try row.text(1))
            else { return .failure(.notFound) }
            func refuse(_ error: APIError) throws -> Result<TokenResponse, APIError> {
                try audit(
                    connection, context, "login_failed", method: "device", userID: device.userID,
                    deviceID: device.id)
                metrics.recordLogin(method: "device", outcome: "failure")
                return .failure(error)
            }
            guard try row.optionalInteger(3) == nil else { return try refuse(.challengeUsed) }
            // Single use: whatever happens next, this attempt consumes the challenge. The
            // conditional update makes exactly one of several concurrent attempts win.
            let claimed = try connection.execute(
                "UPDATE challenges SET used_at = ? WHERE id = ? AND used_at IS NULL",
                [.integer(context.now), .text(request.challengeID)])
            guard claimed == 1 else { return try refuse(.challengeUsed) }
            guard context.now < (try row.integer(2)) else { return try refuse(.challengeExpired) }
            if let refusal = device.checkUsable() { return try refuse(refusal) }
            if let failure = try verifyDeviceSignature(
                connection, context, device: device, payload: payload, signature: request.signature,
                method: "device")
            {
                metrics.recordLogin(method: "device", outcome: "failure")
                return .failure(failure)
            }
            return .success(
                try openSession(
                    connection, context, userID: device.userID, clientID: device.clientID, method: .device,
                    deviceID: device.id))
        }
        return .json(200, try result.get())
    }
}
