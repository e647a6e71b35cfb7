import Foundation
import KeyboundWebAuthn
import KeyboundWire

extension Application {
    /// `POST /v1/webauthn/login/options`. Reads and writes nothing: the ceremony lives in its
    /// challenge (``PasskeyChallenge``). Every Keybound passkey is discoverable, so the options
    /// never list credentials (`allowCredentials`): they would tell anyone which usernames have
    /// passkeys, and which. A username the caller names is kept in the challenge as the only user
    /// whose passkey may answer (checked at verify); whether it exists shows nowhere.
    func passkeyLoginOptions(_ context: RequestContext, _ body: RequestBody<PasskeyLoginOptionsRequest>)
        throws
        -> PasskeyRequestOptions
    {
        let request = try body.decode()
        let challenge = try issueChallenge(
            .login, userID: nil, username: request.username?.rawValue, sessionID: nil,
            clientID: Validate.optionalClientID(request.clientID), context)
        return PasskeyRequestOptions(
            challenge: challenge.bytes, timeout: configuration.ceremonyLifetime * 1000, rpID: relyingPartyID,
            userVerification: userVerification)
    }

    /// `POST /v1/webauthn/login/verify`: the browser's `toJSON()` of the assertion. Opens a session
    /// like every login. As for device signatures, a valid assertion always signs in; failed ones
    /// are throttled per passkey and per client address and never lock the passkey: someone
    /// without the authenticator cannot lock its owner out. Refusals that check no signature
    /// (unknown, used or expired challenge, unknown credential) write nothing. A sign count that
    /// does not rise (a cloned authenticator) suspends the passkey: the sessions it opened end,
    /// and it signs in again only once its user has signed in another way since.
    func passkeyLoginVerify(_ context: RequestContext, _ body: RequestBody<PasskeyAssertion>) throws
        -> PasskeyLoginResult
    {
        // Browsers' JSON, read as KeyboundWebAuthn reads it: members it does not use are ignored.
        let response = try APIError.refusing(as: 400) { try AuthenticationResponse(json: body.data) }
        let proof = try loginProof(context)
        let ceremony = try ceremony(
            of: try APIError.refusing(as: 400) { try response.clientData() }, purpose: .login, refusal: 401,
            context)
        guard let passkey = try database.read({ try loadPasskey($0, credentialID: response.credentialId) })
        else { throw APIError.unknownCredential }
        // §7.2 steps 1–25, in order (KeyboundWebAuthn). Step 5: no allowCredentials were sent.
        // Step 6: a ceremony that named a user accepts only that user's passkeys; one that named
        // nobody identifies the user by the passkey's user handle, which must be its owner's.
        let verdict: Result<VerifiedAuthentication, WebAuthnError>
        if let expected = ceremony.username, expected != passkey.username {
            verdict = .failure(WebAuthnError.credentialMismatch)
        } else {
            do {
                verdict = .success(
                    try relyingParty(context.listener).verifyAuthentication(
                        response, challenge: ceremony.bytes, credential: passkey.record,
                        identification: ceremony.username == nil ? .byUserHandle : .beforeCeremony))
            } catch let error as WebAuthnError {
                verdict = .failure(error)
            }
        }
        let passkeyScope = ThrottleScope.passkey(passkey.id)
        let addressScope =
            configuration.addressFailureLimit > 0 ? ThrottleScope.address(context.clientAddress) : nil
        return try database.write { connection -> WriteOutcome<PasskeyLoginResult> in
            if case .failure = verdict,
                let blockedUntil = try blockEnd(
                    connection, scopes: [passkeyScope] + (addressScope.map { [$0] } ?? []), now: context.now)
            {
                return .refused(refuseThrottled(method: .passkey, context, blockedUntil: blockedUntil))
            }
            // Single use: exactly one of several concurrent attempts claims the challenge; the
            // others learn only what a replay learns, and write nothing.
            guard try markUsed(ceremony, connection) else { return .refused(.challengeUsed) }
            // Step 22 again, against the stored count as it is now: another login with this passkey
            // may have committed since it was read. Removed meanwhile: unknown.
            guard let current = try loadPasskey(connection, credentialID: response.credentialId) else {
                return .refused(.unknownCredential)
            }
            var outcome = verdict
            if case .success(let verified) = verdict,
                verified.signCount != 0 || current.signCount != 0, verified.signCount <= current.signCount
            {
                outcome = .failure(WebAuthnError.clonedAuthenticator)
            }
            switch outcome {
            case .failure(let error):
                try countPasskeyFailure(
                    connection, context, passkey: passkey, error: error, scopes: (passkeyScope, addressScope))
                return .refused(APIError.refused(error, status: 401))
            case .success(let verified):
                if let suspendedAt = current.cloneDetectedAt,
                    try !hasSignedInOtherwise(
                        connection, userID: passkey.userID, since: suspendedAt, passkey.id)
                {
                    return .refused(.passkeySuspended)
                }
                try connection.execute(
                    """
                    UPDATE passkeys SET sign_count = ?, backed_up = ?, last_used_at = ?, clone_detected_at = NULL
                    WHERE id = ?
                    """,
                    [
                        .integer(Int64(verified.signCount)), .integer(verified.backedUp ? 1 : 0),
                        .date(context.now), .text(passkey.id),
                    ])
                try clearThrottle(connection, passkeyScope)
                let tokens = try openPasskeySession(
                    connection, context, userID: passkey.userID, clientID: ceremony.clientID,
                    passkeyID: passkey.id, proof: proof)
                return .done(
                    PasskeyLoginResult(
                        username: passkey.username, credentialID: passkey.record.id,
                        signCount: Int(verified.signCount), tokens: tokens))
            }
        }.get()
    }

    /// Whether the user opened a session after `time` by anything but `passkeyID`: a password, a
    /// device key, another passkey. A passkey suspended as cloned waits for that. (Strictly after:
    /// a session opened in the same millisecond as the clone was seen may be the clone's doing.)
    private func hasSignedInOtherwise(
        _ connection: any SQLConnection, userID: String, since time: Date, _ passkeyID: String
    ) throws -> Bool {
        try connection.queryOne(
            """
            SELECT 1 FROM sessions
            WHERE user_id = ? AND auth_time > ? AND (passkey_id IS NULL OR passkey_id <> ?)
            LIMIT 1
            """, [.text(userID), .date(time), .text(passkeyID)]) != nil
    }

    /// Counts a failed passkey login on the passkey and the client address, and audits it: a
    /// sign count that went backwards as `passkey_cloned`, everything else as `login_failed`. A
    /// cloned passkey is suspended and the sessions it opened end (which copy opened them, nobody
    /// can tell).
    private func countPasskeyFailure(
        _ connection: any SQLConnection, _ context: RequestContext, passkey: PasskeyRecord,
        error: WebAuthnError,
        scopes: (passkey: String, address: String?)
    ) throws {
        let passkeyCount = try countFailure(
            connection, scope: scopes.passkey, limit: configuration.deviceFailureLimit, window: nil,
            now: context.now)
        let addressCount = try scopes.address.map {
            try countFailure(
                connection, scope: $0, limit: configuration.addressFailureLimit,
                window: Self.addressFailureWindow,
                now: context.now)
        }
        if error == .clonedAuthenticator {
            try connection.execute(
                "UPDATE passkeys SET clone_detected_at = ? WHERE id = ?",
                [.date(context.now), .text(passkey.id)])
            try revokeSessions(
                connection, where: "passkey_id = ?", [.text(passkey.id)], reason: "passkey_cloned",
                now: context.now)
        }
        // A cloned authenticator is worth its own line in the user's history: two copies of the
        // passkey's private key may exist.
        try auditRefusal(
            connection, context, error == .clonedAuthenticator ? .passkeyCloned : .loginFailed,
            method: .passkey, userID: passkey.userID)
        if passkeyCount.startedBlock {
            try auditRefusal(
                connection, context, .passkeyThrottled, method: .passkey, userID: passkey.userID)
        }
        if addressCount?.startedBlock == true {
            try auditRefusal(connection, context, .addressLockout, method: .passkey)
        }
        metrics.recordLogin(method: AuthMethod.passkey.rawValue, outcome: "failure")
        traffic.count(.failure(AuthMethod.passkey.rawValue), at: context.now)
    }
}
