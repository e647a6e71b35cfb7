import Foundation
import KeyboundWire

// Device-key login: a challenge, then its signature by the bound device's key.

extension Application {
    /// `POST /v1/challenges`. Writes nothing: the challenge lives in its id (``LoginChallenge``),
    /// so unauthenticated callers cannot grow the database through it.
    func createChallenge(_ context: RequestContext, _ body: RequestBody<ChallengeRequest>) throws
        -> ChallengeResponse
    {
        let request = try body.decode()
        guard let device = try database.read({ try loadDevice($0, id: request.deviceID) }) else {
            throw APIError.notFound
        }
        if let refusal = checkUsable(device) { throw refusal }
        let challenge = try LoginChallenge(
            deviceID: device.id,
            expires: context.now.wholeSeconds.adding(seconds: configuration.challengeLifetime),
            server: configuration.serverID, key: challengeKey)
        let payload = try challenge.payload(server: configuration.serverID)
        return ChallengeResponse(
            challengeID: challenge.id, payload: payload.bytes, expiresAt: payload.expires)
    }

    /// `POST /v1/sessions/device`. A valid signature always logs in: nobody without the key can
    /// make one, so no throttle stands between the key's holder and a session. Bad signatures are
    /// throttled per device (``Configuration/deviceFailureLimit`` consecutive ones) and per client
    /// address (``Configuration/addressFailureLimit`` failed logins of any kind): further bad ones
    /// get 429 and write nothing. A device is never suspended. Refusals that check no signature
    /// (unknown, used or expired challenge, revoked device, a device bound without App Attest on a
    /// server that requires it) prove nothing new and write nothing.
    func deviceLogin(_ context: RequestContext, _ body: RequestBody<DeviceLoginRequest>) throws
        -> TokenResponse
    {
        let request = try body.decode()
        let proof = try loginProof(context)
        // An id this server did not make (or whose tag was changed) is unknown, like any other.
        guard
            let challenge = LoginChallenge(
                id: request.challengeID, server: configuration.serverID, key: challengeKey)
        else { throw APIError.notFound }
        guard context.now < challenge.expiresAt else { throw APIError.challengeExpired }
        guard Grammar.isIdentifier(challenge.deviceID) else { throw APIError.notFound }
        let (found, used) = try database.read { connection in
            let answers = try connection.queries([
                Self.deviceQuery(id: challenge.deviceID),
                SQLStatement("SELECT 1 FROM used_challenges WHERE id = ?", [.text(request.challengeID)]),
            ])
            return (try DeviceRecord.first(of: answers[0]), !answers[1].isEmpty)
        }
        guard let device = found else { throw APIError.notFound }
        if used { throw APIError.challengeUsed }
        if let refusal = checkUsable(device) { throw refusal }

        // Verified outside any transaction: a P-256 check needs no lock.
        let payload = try challenge.payload(server: configuration.serverID)
        let valid = device.signatureIsValid(request.signature, over: payload.bytes)
        let deviceScope = ThrottleScope.device(device.id)
        let addressScope =
            configuration.addressFailureLimit > 0 ? ThrottleScope.address(context.clientAddress) : nil
        return try database.write { connection -> WriteOutcome<TokenResponse> in
            // Single use: the id's unique key makes exactly one of several concurrent attempts
            // win, in this process or another on the same database; the losers learn only what
            // a replay learns, and write nothing.
            let usedUp = Rows.usedChallengeInsert(id: request.challengeID, expiresAt: challenge.expiresAt)
            guard valid else {
                if let blockedUntil = try blockEnd(
                    connection, scopes: [deviceScope] + (addressScope.map { [$0] } ?? []), now: context.now)
                {
                    return .refused(refuseThrottled(method: .device, context, blockedUntil: blockedUntil))
                }
                guard try !connection.queries([usedUp])[0].isEmpty else { return .refused(.challengeUsed) }
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
                traffic.count(.failure(AuthMethod.device.rawValue), at: context.now)
                return .refused(.signatureInvalid)
            }
            // In one round trip (PostgreSQL): the challenge used up, the device read again
            // (revoked while the signature was checked?), and whether its user may log in.
            let answers = try connection.queries([
                usedUp, Self.deviceQuery(id: device.id), AccountStanding.statement(userID: device.userID),
            ])
            guard !answers[0].isEmpty else { return .refused(.challengeUsed) }
            guard let current = try DeviceRecord.first(of: answers[1]), !current.revoked else {
                return .refused(.deviceRevoked)
            }
            if let refusal = try checkAppAttestAssertion(
                request.appAttestAssertion, device: current, clientData: payload.bytes, connection, context)
            {
                return .refused(refusal)
            }
            try clearThrottle(connection, deviceScope)
            try connection.executeLater(
                "UPDATE devices SET last_used_at = ? WHERE id = ?", [.date(context.now), .text(device.id)])
            return .done(
                try openSession(
                    connection, context, userID: device.userID, clientID: device.clientID, method: .device,
                    deviceID: device.id, proof: proof, standing: try AccountStanding(rows: answers[2])))
        }.get()
    }
}
