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

    /// `POST /v1/sessions/device`. A valid signature always logs in: nobody without the key can
    /// make one, so no throttle stands between the key's holder and a session. Bad signatures are
    /// throttled per device (``Configuration/deviceFailureLimit`` consecutive ones) and per client
    /// address (``Configuration/addressFailureLimit`` failed logins of any kind): further bad ones
    /// get 429 and write nothing. A device is never suspended. Refusals that check no signature
    /// (unknown, used or expired challenge, revoked device) prove nothing new and write nothing.
    func deviceLogin(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(DeviceLoginRequest.self)
        guard Grammar.isIdentifier(request.challengeID) else { throw APIError.notFound }
        let found = try database.read { connection -> IssuedChallenge? in
            guard
                let row = try connection.queryOne(
                    "SELECT device_id, payload, expires_at, used_at FROM challenges WHERE id = ?",
                    [.text(request.challengeID)]),
                let device = try loadDevice(connection, id: try row.text(0)),
                let payload = Base64URL.decode(try row.text(1))
            else { return nil }
            return IssuedChallenge(
                device: device, payload: payload, expiresAt: try row.integer(2),
                used: try row.optionalInteger(3) != nil)
        }
        guard let found else { throw APIError.notFound }
        if found.used { throw APIError.challengeUsed }
        guard context.now < found.expiresAt else { throw APIError.challengeExpired }
        let device = found.device
        if let refusal = device.checkUsable() { throw refusal }

        // Verified outside any transaction: a P-256 check needs no lock.
        let valid = device.signatureIsValid(request.signature, over: found.payload)
        let deviceScope = ThrottleScope.device(device.id)
        let addressScope =
            configuration.addressFailureLimit > 0 ? ThrottleScope.address(context.clientAddress) : nil
        let result: Result<TokenResponse, APIError> = try database.write { connection in
            if !valid,
                let blockedUntil = try blockEnd(
                    connection, scopes: [deviceScope] + (addressScope.map { [$0] } ?? []), now: context.now)
            {
                return .failure(refuseThrottled(method: .device, context, blockedUntil: blockedUntil))
            }
            // Single use: the conditional update makes exactly one of several concurrent attempts
            // win; the losers learn only what a replay learns, and write nothing.
            let claimed = try connection.execute(
                "UPDATE challenges SET used_at = ? WHERE id = ? AND used_at IS NULL",
                [.integer(context.now), .text(request.challengeID)])
            guard claimed == 1 else { return .failure(.challengeUsed) }
            guard valid else {
                let deviceCount = try countFailure(
                    connection, scope: deviceScope, limit: configuration.deviceFailureLimit, window: nil,
                    now: context.now)
                let addressCount = try addressScope.map {
                    try countFailure(
                        connection, scope: $0, limit: configuration.addressFailureLimit,
                        window: Self.addressFailureWindow, now: context.now)
                }
                try auditRefusal(
                    connection, context, .loginFailed, method: .device, userID: device.userID,
                    deviceID: device.id)
                if deviceCount.startedBlock {
                    try auditRefusal(
                        connection, context, .deviceThrottled, method: .device, userID: device.userID,
                        deviceID: device.id)
                }
                if addressCount?.startedBlock == true {
                    try auditRefusal(connection, context, .addressLockout, method: .device)
                }
                metrics.recordLogin(method: AuthMethod.device.rawValue, outcome: "failure")
                return .failure(.signatureInvalid)
            }
            // Revoked while the signature was checked?
            guard let current = try loadDevice(connection, id: device.id), !current.revoked else {
                return .failure(.deviceRevoked)
            }
            if let refusal = try checkAppAttestAssertion(
                request.appAttestAssertion, device: device, clientData: found.payload, connection, context)
            {
                return .failure(refusal)
            }
            try clearThrottle(connection, deviceScope)
            try connection.execute(
                "UPDATE devices SET last_used_at = ? WHERE id = ?", [.integer(context.now), .text(device.id)])
            return .success(
                try openSession(
                    connection, context, userID: device.userID, clientID: device.clientID, method: .device,
                    deviceID: device.id))
        }
        return .json(200, try result.get())
    }

    /// A login challenge as issued, with its device.
    private struct IssuedChallenge {
        let device: DeviceRecord
        let payload: Data
        let expiresAt: Int64
        let used: Bool
    }
}
