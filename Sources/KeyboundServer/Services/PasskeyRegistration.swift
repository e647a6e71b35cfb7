import Foundation
import KeyboundWebAuthn
import KeyboundWire

extension Application {
    /// `POST /v1/webauthn/register/options`. Without a bearer token: a sign-up, under the same
    /// rules as `POST /v1/accounts` (registration open, the address's sign-up limit, a free
    /// username). With one: another passkey for the caller, who must have authenticated with a
    /// password or a passkey within the step-up window.
    func passkeyRegistrationOptions(
        _ context: RequestContext, _ body: RequestBody<PasskeyRegistrationOptionsRequest>
    ) throws -> PasskeyCreationOptions {
        if context.request.headers["authorization"] != nil {
            let caller = try authenticate(context)  // 401 comes before any complaint about the body
            try requireStepUp(caller, context, for: "Adding a passkey")
            let request = try body.decode()
            if let username = request.username, username.rawValue != caller.username {
                // 403, not 400: the body is well-formed; the caller may not act on another account.
                throw APIError(
                    403, .usernameMismatch, "username must be the signed-in user's, or be left out")
            }
            let displayName = try Validate.displayName(request.displayName ?? caller.username)
            let exclude = try database.read { try passkeyCredentialIDs($0, userID: caller.userID) }
            guard exclude.count < configuration.maxPasskeysPerUser else { throw passkeyLimitReached }
            let challenge = try issueChallenge(
                .register, userID: caller.userID, username: caller.username, sessionID: caller.sessionID,
                clientID: caller.clientID, context)
            return creationOptions(
                challenge, displayName: displayName, exclude: exclude, attestation: request.attestation)
        }
        guard configuration.registration == .open else { throw APIError.registrationClosed }
        let request = try body.decode()
        guard let username = request.username?.rawValue else {
            throw APIError.invalid("username is required to sign up (send a bearer token to add a passkey)")
        }
        let displayName = try Validate.displayName(request.displayName ?? username)
        let clientID = Validate.optionalClientID(request.clientID)
        try claimSignUp(context)
        let taken = try database.read {
            try $0.queryOne("SELECT id FROM users WHERE username = ?", [.text(username)]) != nil
        }
        if taken { throw APIError.usernameTaken }
        // The account's id is chosen now: it is the user handle the authenticator stores.
        let challenge = try issueChallenge(
            .register, userID: SecureRandomBytes.identifier("usr"), username: username, sessionID: nil,
            clientID: clientID, context)
        return creationOptions(
            challenge, displayName: displayName, exclude: [], attestation: request.attestation)
    }

    private func creationOptions(
        _ challenge: PasskeyChallenge, displayName: String, exclude: [Data],
        attestation: AttestationConveyance?
    ) -> PasskeyCreationOptions {
        PasskeyCreationOptions(
            rpID: relyingPartyID, rpName: configuration.serverID,
            userID: Data(challenge.userID?.utf8 ?? "".utf8),
            userName: challenge.username ?? "", userDisplayName: displayName, challenge: challenge.bytes,
            algorithms: relyingParty(.api).algorithms.map { Int($0.rawValue) },
            timeout: configuration.ceremonyLifetime * 1000,
            excludeCredentials: exclude.map(PasskeyCredentialDescriptor.init(id:)),
            userVerification: userVerification, attestation: attestation ?? AttestationConveyance.none)
    }

    /// `POST /v1/webauthn/register/verify`: the browser's `toJSON()` of the new credential.
    func passkeyRegistrationVerify(_ context: RequestContext, _ body: RequestBody<PasskeyRegistration>) throws
        -> PasskeyRegistrationResult
    {
        // Browsers' JSON, read as KeyboundWebAuthn reads it: members it does not use are ignored.
        let response = try APIError.refusing(as: 400) { try RegistrationResponse(json: body.data) }
        let ceremony = try ceremony(
            of: try APIError.refusing(as: 400) { try response.clientData() }, purpose: .register,
            refusal: 400, context)
        // A sign-up opens a session, which a DPoP proof binds to its key; adding a passkey is a
        // bearer request, whose proof (if its session is bound) the write below uses up.
        var proof: DPoPProof?
        if let sessionID = ceremony.sessionID {
            // Adding a passkey: only the session that asked may finish.
            guard try checkCaller(context).sessionID == sessionID else { throw APIError.tokenInvalid }
        } else {
            proof = try loginProof(context)
        }
        // §7.1 steps 1–25 and 27–29, in order (KeyboundWebAuthn); attestation certificates are
        // checked at the server's time. An attestation from a root not configured counts as
        // unattested: trusting roots is policy. A statement whose signature is wrong was refused.
        let registration: VerifiedRegistration
        do {
            registration = try relyingParty(.api).verifyRegistration(
                response, challenge: ceremony.bytes, at: clock.now)
        } catch let error as WebAuthnError {
            // A checked attempt uses the challenge up: nobody gets to try variations of one.
            try database.write { try markUsed(ceremony, $0) }
            throw APIError.refused(error, status: 400)
        }
        let result: PasskeyRegistrationResult
        if let sessionID = ceremony.sessionID {
            result = try authenticatedWrite(context) { connection, caller in
                guard caller.sessionID == sessionID else { throw APIError.tokenInvalid }
                // Checked again where the passkey is stored: the window may have closed while
                // the user was at the authenticator.
                try requireStepUp(caller, context, for: "Adding a passkey")
                guard try markUsed(ceremony, connection) else { throw APIError.challengeUsed }
                guard
                    try passkeyCredentialIDs(connection, userID: caller.userID).count
                        < configuration.maxPasskeysPerUser
                else { throw passkeyLimitReached }
                guard
                    try insertPasskey(
                        connection, context, registration, userID: caller.userID, sessionID: sessionID) != nil
                else { throw APIError.credentialExists }
                return PasskeyRegistrationResult(registration, username: caller.username, tokens: nil)
            }
        } else {
            // A sign-up: the account, its first passkey and its first session in one commit.
            guard let userID = ceremony.userID, let username = ceremony.username else {
                throw APIError.notFound
            }
            result = try database.write { connection in
                guard try markUsed(ceremony, connection) else { throw APIError.challengeUsed }
                guard
                    try insertAccount(
                        connection, id: userID, username: Username(username), passwordHash: "",
                        now: context.now)
                        != nil
                else { throw APIError.usernameTaken }
                try audit(
                    connection, context, .accountCreated, method: .passkey, userID: userID,
                    details: [JSONMember("username", .string(username))])
                guard
                    let passkeyID = try insertPasskey(
                        connection, context, registration, userID: userID, sessionID: nil)
                else { throw APIError.credentialExists }
                let tokens = try openPasskeySession(
                    connection, context, userID: userID, clientID: ceremony.clientID, passkeyID: passkeyID,
                    proof: proof)
                return PasskeyRegistrationResult(registration, username: username, tokens: tokens)
            }
        }
        return result
    }

    /// Stores a verified credential.
    /// - Returns: the passkey's id; nil, having stored nothing, when the credential id is
    ///   registered already, to anyone (§7.1 step 26). The unique index decides, so two concurrent
    ///   registrations of one credential cannot both pass, on any engine.
    private func insertPasskey(
        _ connection: any SQLConnection, _ context: RequestContext, _ registration: VerifiedRegistration,
        userID: String, sessionID: String?
    ) throws -> String? {
        let passkeyID = SecureRandomBytes.identifier("pky")
        let inserted = try connection.execute(
            """
            INSERT INTO passkeys (id, user_id, credential_id, public_key, algorithm, sign_count, backup_eligible,
                backed_up, attestation_format, attested, aaguid, created_at, last_used_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
            ON CONFLICT (credential_id) DO NOTHING
            """,
            [
                .text(passkeyID), .text(userID), .text(Base64URL.encode(registration.credentialId)),
                .text(Base64URL.encode(registration.publicKey.coseKey)),
                .integer(registration.publicKey.algorithm.rawValue), .integer(Int64(registration.signCount)),
                .integer(registration.backupEligible ? 1 : 0), .integer(registration.backedUp ? 1 : 0),
                .text(registration.attestation.format.rawValue),
                .integer(registration.attestation.isTrusted ? 1 : 0), .text(Hex.encode(registration.aaguid)),
                .date(context.now),
            ])
        guard inserted == 1 else { return nil }
        try audit(
            connection, context, .passkeyRegistered, method: .passkey,
            userID: userID, sessionID: sessionID, details: [JSONMember("passkey_id", .string(passkeyID))])
        return passkeyID
    }
}

extension PasskeyRegistrationResult {
    init(_ registration: VerifiedRegistration, username: String, tokens: TokenResponse?) {
        self.init(
            credentialID: registration.credentialId, format: registration.attestation.format.rawValue,
            algorithm: Int(registration.publicKey.algorithm.rawValue), signCount: Int(registration.signCount),
            username: username, tokens: tokens)
    }
}
