import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire

// Passkeys: a WebAuthn Level 3 relying party (docs/server.md, "Passkeys and App Attest").
//
// KeyboundWebAuthn runs every check of §7.1 and §7.2 as pure functions; this file is the part
// that stores: it issues the challenges and finds them again through the client data, makes each
// one single-use in the same transaction as what the ceremony creates, keeps credential ids unique
// across users (§7.1 step 26), stores sign counts and backup state, throttles failures, and opens
// sessions like every other login.

extension Application {
    // MARK: Settings

    /// The RP ID: configured, or the host of the first origin, or `localhost`.
    var relyingPartyID: String {
        if let configured = configuration.relyingPartyID { return configured }
        return configuration.origins.first.flatMap { URL(string: $0)?.host } ?? "localhost"
    }

    /// The origins ceremonies may run on: configured, or this server's `localhost` origin.
    var passkeyOrigins: [String] {
        guard configuration.origins.isEmpty else { return configuration.origins }
        let port = listeningPort.withLock { $0 } ?? configuration.port
        return ["\(configuration.tlsKeyPath == nil ? "http" : "https")://localhost:\(port)"]
    }

    var relyingParty: RelyingParty {
        RelyingParty(
            id: relyingPartyID, origins: Set(passkeyOrigins),
            requiresUserVerification: configuration.passkeyUserVerification)
    }

    /// `required` or `preferred`, as the options say it.
    private var userVerification: String { configuration.passkeyUserVerification ? "required" : "preferred" }

    /// Refuses settings no browser could use: origins that are not exactly what a browser writes
    /// (`scheme://host[:port]`, lowercase, no default port, no path), and an RP ID that is not
    /// their host or a parent domain of it.
    static func checkPasskeySettings(_ configuration: Configuration) throws {
        for origin in configuration.origins {
            guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme),
                let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil,
                url.user == nil, url.port != (scheme == "http" ? 80 : 443),
                origin == "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? ""),
                origin == origin.lowercased()
            else {
                throw ServerError(
                    .invalidConfiguration,
                    "--origin must be scheme://host[:port] as a browser writes it "
                        + "(e.g. https://example.org or http://localhost:8420), not '\(origin)'")
            }
            let rpID = configuration.relyingPartyID ?? URL(string: configuration.origins[0])?.host ?? ""
            guard host == rpID || host.hasSuffix("." + rpID) else {
                throw ServerError(
                    .invalidConfiguration,
                    "--rp-id \(rpID) is neither the host of \(origin) nor a parent domain of it")
            }
        }
    }

    // MARK: Registration

    /// `POST /v1/webauthn/register/options`. Without a bearer token: a sign-up, under the same
    /// rules as `POST /v1/accounts` (registration open, the address's sign-up limit, a free
    /// username). With one: another passkey for the caller, who must have authenticated with a
    /// password or a passkey within the step-up window.
    func passkeyRegistrationOptions(_ context: RequestContext) throws -> HTTPResponse {
        if context.request.headers["authorization"] != nil {
            let caller = try authenticate(context)  // 401 comes before any complaint about the body
            try requireStepUp(caller, context, for: "Adding a passkey")
            let request = try context.decode(PasskeyRegistrationOptionsRequest.self)
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
            return .json(
                200,
                creationOptions(
                    challenge, displayName: displayName, exclude: exclude, attestation: request.attestation))
        }
        guard configuration.registration == .open else { throw APIError.registrationClosed }
        let request = try context.decode(PasskeyRegistrationOptionsRequest.self)
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
        return .json(
            200,
            creationOptions(
                challenge, displayName: displayName, exclude: [], attestation: request.attestation))
    }

    private func creationOptions(
        _ challenge: PasskeyChallenge, displayName: String, exclude: [Data],
        attestation: AttestationConveyance?
    ) -> PasskeyCreationOptions {
        PasskeyCreationOptions(
            rpID: relyingPartyID, rpName: configuration.serverID,
            userID: Data(challenge.userID?.utf8 ?? "".utf8),
            userName: challenge.username ?? "", userDisplayName: displayName, challenge: challenge.bytes,
            algorithms: relyingParty.algorithms.map { Int($0.rawValue) },
            timeout: configuration.ceremonyLifetime * 1000,
            excludeCredentials: exclude.map(PasskeyCredentialDescriptor.init(id:)),
            userVerification: userVerification, attestation: attestation ?? AttestationConveyance.none)
    }

    /// `POST /v1/webauthn/register/verify`: the browser's `toJSON()` of the new credential.
    func passkeyRegistrationVerify(_ context: RequestContext) throws -> HTTPResponse {
        let response = try refusingAs(400) { try RegistrationResponse(json: context.request.body) }
        let ceremony = try ceremony(
            of: try refusingAs(400) { try response.clientData() }, purpose: .register, refusal: 400, context)
        if let sessionID = ceremony.sessionID {
            // Adding a passkey: only the session that asked may finish.
            guard try authenticate(context).sessionID == sessionID else { throw APIError.tokenInvalid }
        }
        // §7.1 steps 1–25 and 27–29, in order (KeyboundWebAuthn); attestation certificates are
        // checked at the server's time. An attestation from a root not configured counts as
        // unattested: trusting roots is policy. A statement whose signature is wrong was refused.
        let registration: VerifiedRegistration
        do {
            registration = try relyingParty.verifyRegistration(
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
                try claim(ceremony, connection)
                guard
                    try passkeyCredentialIDs(connection, userID: caller.userID).count
                        < configuration.maxPasskeysPerUser
                else { throw passkeyLimitReached }
                try insertPasskey(
                    connection, context, registration, userID: caller.userID, sessionID: sessionID)
                return PasskeyRegistrationResult(registration, username: caller.username, tokens: nil)
            }
        } else {
            // A sign-up: the account, its first passkey and its first session in one commit.
            guard let userID = ceremony.userID, let username = ceremony.username else {
                throw APIError.notFound
            }
            result = try database.write { connection in
                try claim(ceremony, connection)
                try insertAccount(
                    connection, id: userID, username: Username(username), passwordHash: "", now: context.now)
                try audit(connection, context, .accountCreated, method: .passkey, userID: userID)
                let passkeyID = try insertPasskey(
                    connection, context, registration, userID: userID, sessionID: nil)
                let tokens = try openPasskeySession(
                    connection, context, userID: userID, clientID: ceremony.clientID, passkeyID: passkeyID)
                return PasskeyRegistrationResult(registration, username: username, tokens: tokens)
            }
        }
        return .json(200, result)
    }

    /// Stores a verified credential.
    /// - Returns: the passkey's id.
    /// - Throws: ``APIError`` 409 `credential_exists` when the credential id is registered already,
    ///   to anyone (§7.1 step 26). The unique index decides, so two concurrent registrations of
    ///   one credential cannot both pass, on any engine.
    @discardableResult
    private func insertPasskey(
        _ connection: any SQLConnection, _ context: RequestContext, _ registration: VerifiedRegistration,
        userID: String, sessionID: String?
    ) throws -> String {
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
                .integer(context.now),
            ])
        guard inserted == 1 else {
            throw APIError(409, .credentialExists, "This passkey is registered already.")
        }
        try audit(
            connection, context, .passkeyRegistered, method: .passkey,
            userID: userID, sessionID: sessionID)
        return passkeyID
    }

    // MARK: Login

    /// `POST /v1/webauthn/login/options`. Reads and writes nothing: the ceremony lives in its
    /// challenge (``PasskeyChallenge``). Every Keybound passkey is discoverable, so the options
    /// never list credentials (`allowCredentials`): they would tell anyone which usernames have
    /// passkeys, and which. A username the caller names is kept in the challenge as the only user
    /// whose passkey may answer (checked at verify); whether it exists shows nowhere.
    func passkeyLoginOptions(_ context: RequestContext) throws -> HTTPResponse {
        let request = try context.decode(PasskeyLoginOptionsRequest.self)
        let challenge = try issueChallenge(
            .login, userID: nil, username: request.username?.rawValue, sessionID: nil,
            clientID: Validate.optionalClientID(request.clientID), context)
        return .json(
            200,
            PasskeyRequestOptions(
                challenge: challenge.bytes, timeout: configuration.ceremonyLifetime * 1000,
                rpID: relyingPartyID,
                userVerification: userVerification))
    }

    /// `POST /v1/webauthn/login/verify`: the browser's `toJSON()` of the assertion. Opens a session
    /// like every login. As for device signatures, a valid assertion always signs in; failed ones
    /// are throttled per passkey and per client address and never lock the passkey: someone
    /// without the authenticator cannot lock its owner out. Refusals that check no signature
    /// (unknown, used or expired challenge, unknown credential) write nothing. A sign count that
    /// does not rise (a cloned authenticator) suspends the passkey: the sessions it opened end,
    /// and it signs in again only once its user has signed in another way since.
    func passkeyLoginVerify(_ context: RequestContext) throws -> HTTPResponse {
        let response = try refusingAs(400) { try AuthenticationResponse(json: context.request.body) }
        let ceremony = try ceremony(
            of: try refusingAs(400) { try response.clientData() }, purpose: .login, refusal: 401, context)
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
                    try relyingParty.verifyAuthentication(
                        response, challenge: ceremony.bytes, credential: passkey.record,
                        identification: ceremony.username == nil ? .byUserHandle : .beforeCeremony))
            } catch let error as WebAuthnError {
                verdict = .failure(error)
            }
        }
        let passkeyScope = ThrottleScope.passkey(passkey.id)
        let addressScope =
            configuration.addressFailureLimit > 0 ? ThrottleScope.address(context.clientAddress) : nil
        let result: Result<PasskeyLoginResult, APIError> = try database.write { connection in
            if case .failure = verdict,
                let blockedUntil = try blockEnd(
                    connection, scopes: [passkeyScope] + (addressScope.map { [$0] } ?? []), now: context.now)
            {
                return .failure(refuseThrottled(method: .passkey, context, blockedUntil: blockedUntil))
            }
            // Single use: exactly one of several concurrent attempts claims the challenge; the
            // others learn only what a replay learns, and write nothing.
            guard try markUsed(ceremony, connection) else { return .failure(.challengeUsed) }
            // Step 22 again, against the stored count as it is now: another login with this passkey
            // may have committed since it was read. Removed meanwhile: unknown.
            guard let current = try loadPasskey(connection, credentialID: response.credentialId) else {
                return .failure(.unknownCredential)
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
                return .failure(APIError.refused(error, status: 401))
            case .success(let verified):
                if let suspendedAt = current.cloneDetectedAt,
                    try !hasSignedInOtherwise(
                        connection, userID: passkey.userID, since: suspendedAt, passkey.id)
                {
                    return .failure(.passkeySuspended)
                }
                try connection.execute(
                    """
                    UPDATE passkeys SET sign_count = ?, backed_up = ?, last_used_at = ?, clone_detected_at = NULL
                    WHERE id = ?
                    """,
                    [
                        .integer(Int64(verified.signCount)), .integer(verified.backedUp ? 1 : 0),
                        .integer(context.now), .text(passkey.id),
                    ])
                try clearThrottle(connection, passkeyScope)
                let tokens = try openPasskeySession(
                    connection, context, userID: passkey.userID, clientID: ceremony.clientID,
                    passkeyID: passkey.id)
                return .success(
                    PasskeyLoginResult(
                        username: passkey.username, credentialID: passkey.credentialID,
                        signCount: Int(verified.signCount), tokens: tokens))
            }
        }
        return .json(200, try result.get())
    }

    /// Whether the user opened a session after `time` by anything but `passkeyID`: a password, a
    /// device key, another passkey. A passkey suspended as cloned waits for that. (Strictly after:
    /// a session opened in the same millisecond as the clone was seen may be the clone's doing.)
    private func hasSignedInOtherwise(
        _ connection: any SQLConnection, userID: String, since time: Int64, _ passkeyID: String
    ) throws -> Bool {
        try connection.queryOne(
            """
            SELECT 1 FROM sessions
            WHERE user_id = ? AND auth_time > ? AND (passkey_id IS NULL OR passkey_id <> ?)
            LIMIT 1
            """, [.text(userID), .integer(time), .text(passkeyID)]) != nil
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
                [.integer(context.now), .text(passkey.id)])
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
    }

    /// Opens a session for a passkey ceremony and records which passkey opened it.
    private func openPasskeySession(
        _ connection: any SQLConnection, _ context: RequestContext, userID: String, clientID: String,
        passkeyID: String
    ) throws -> TokenResponse {
        let tokens = try openSession(
            connection, context, userID: userID, clientID: clientID, method: .passkey, deviceID: nil)
        try connection.execute(
            "UPDATE sessions SET passkey_id = ? WHERE id = ?", [.text(passkeyID), .text(tokens.sessionID)])
        return tokens
    }

    // MARK: Managing passkeys

    /// `GET /v1/passkeys`: the caller's passkeys, oldest first.
    func listPasskeys(_ context: RequestContext) throws -> HTTPResponse {
        let caller = try authenticate(context)
        let rows = try database.read { connection in
            try connection.query(
                """
                SELECT id, credential_id, algorithm, attestation_format, attested, backup_eligible, backed_up,
                    created_at, last_used_at
                FROM passkeys WHERE user_id = ? ORDER BY created_at, id
                """, [.text(caller.userID)])
        }
        func date(_ milliseconds: Int64) -> Date {
            Date(timeIntervalSince1970: TimeInterval(milliseconds / 1000))
        }
        let passkeys = try rows.map { row in
            PasskeyInfo(
                passkeyID: try row.text(0), credentialID: Base64URL.decode(try row.text(1)) ?? Data(),
                algorithm: Int(try row.integer(2)), attestationFormat: try row.text(3),
                attested: try row.integer(4) != 0,
                backupEligible: try row.integer(5) != 0, backedUp: try row.integer(6) != 0,
                createdAt: date(try row.integer(7)), lastUsedAt: try row.optionalInteger(8).map(date))
        }
        return .json(200, PasskeyListResponse(passkeys: passkeys))
    }

    /// `DELETE /v1/passkeys/{id}`: removes one of the caller's passkeys and ends the sessions it
    /// opened. The last passkey of an account without a password stays: removing it would lock
    /// the user out.
    func removePasskey(_ context: RequestContext) throws -> HTTPResponse {
        let passkeyID = context.parameter("id")
        try authenticatedWrite(context) { connection, caller in
            guard Grammar.isIdentifier(passkeyID),
                let row = try connection.queryOne(
                    "SELECT user_id FROM passkeys WHERE id = ?", [.text(passkeyID)]),
                try row.text(0) == caller.userID
            else { throw APIError.notFound }
            let hasPassword =
                try connection.queryOne(
                    "SELECT password_hash FROM users WHERE id = ?", [.text(caller.userID)])?
                .text(0).isEmpty == false
            if !hasPassword, try passkeyCredentialIDs(connection, userID: caller.userID).count <= 1 {
                throw APIError(
                    409, .lastPasskey, "This is the account's only way to sign in; add another passkey first."
                )
            }
            try connection.execute("DELETE FROM passkeys WHERE id = ?", [.text(passkeyID)])
            try clearThrottle(connection, ThrottleScope.passkey(passkeyID))
            try revokeSessions(
                connection, where: "passkey_id = ?", [.text(passkeyID)], reason: "passkey_removed",
                now: context.now)
            try audit(
                connection, context, .passkeyRemoved, userID: caller.userID, sessionID: caller.sessionID)
        }
        return .noContent
    }

    // MARK: Step-up, challenges and records

    /// Refuses a caller who has not authenticated with a password or a passkey within the
    /// step-up window (whose end `GET /v1/me` states).
    func requireStepUp(_ caller: Caller, _ context: RequestContext, for operation: String) throws {
        guard let end = stepUpEnd(caller), context.now < end else {
            throw APIError(
                403, .stepUpRequired,
                "\(operation) needs a password or passkey login within the last \(configuration.stepUpWindow) seconds."
            )
        }
    }

    /// A fresh challenge for a ceremony, valid for ``Configuration/ceremonyLifetime``. Stores
    /// nothing (``PasskeyChallenge``).
    private func issueChallenge(
        _ purpose: PasskeyChallenge.Purpose, userID: String?, username: String?, sessionID: String?,
        clientID: String, _ context: RequestContext
    ) throws -> PasskeyChallenge {
        try PasskeyChallenge(
            purpose: purpose, expires: context.now / 1000 + Int64(configuration.ceremonyLifetime),
            userID: userID,
            username: username, sessionID: sessionID, clientID: clientID, server: configuration.serverID,
            key: challengeKey)
    }

    /// Finds the ceremony a response belongs to through the challenge in its client data (§7.1
    /// step 8, §7.2 step 11 compare it again).
    /// - Throws: ``APIError`` `challenge_mismatch` (status `refusal`) when this server issued no
    ///   such challenge for this kind of ceremony, 410 `challenge_expired`, 409 `challenge_used`.
    private func ceremony(
        of clientData: CollectedClientData, purpose: PasskeyChallenge.Purpose, refusal: Int,
        _ context: RequestContext
    ) throws -> PasskeyChallenge {
        guard let bytes = clientData.challengeBytes,
            let challenge = PasskeyChallenge(bytes: bytes, server: configuration.serverID, key: challengeKey),
            challenge.purpose == purpose
        else {
            throw APIError(
                refusal, .challengeMismatch,
                "The client data's challenge was not issued here for this ceremony.")
        }
        guard context.now < challenge.expiresAt else { throw APIError.challengeExpired }
        let used = try database.read { connection in
            try connection.queryOne("SELECT 1 FROM used_challenges WHERE id = ?", [.text(challenge.usedID)])
                != nil
        }
        if used { throw APIError.challengeUsed }
        return challenge
    }

    /// Uses a challenge up in the current transaction: the unique key of `used_challenges` lets
    /// exactly one of several concurrent attempts do it, on any number of instances.
    /// - Returns: false when another attempt used it first.
    private func markUsed(_ challenge: PasskeyChallenge, _ connection: any SQLConnection) throws -> Bool {
        try connection.execute(
            "INSERT INTO used_challenges (id, expires_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
            [.text(challenge.usedID), .integer(challenge.expiresAt)]) == 1
    }

    /// Uses a challenge up in the current transaction, for the ceremony that creates something.
    /// - Throws: ``APIError/challengeUsed`` when another attempt used it first.
    private func claim(_ challenge: PasskeyChallenge, _ connection: any SQLConnection) throws {
        guard try markUsed(challenge, connection) else { throw APIError.challengeUsed }
    }

    /// The credential ids of a user's passkeys, oldest first.
    private func passkeyCredentialIDs(_ connection: any SQLConnection, userID: String) throws -> [Data] {
        try connection.query(
            "SELECT credential_id FROM passkeys WHERE user_id = ? ORDER BY created_at, id", [.text(userID)]
        ).compactMap { Base64URL.decode(try $0.text(0)) }
    }

    private func loadPasskey(_ connection: any SQLConnection, credentialID: Data) throws -> PasskeyRecord? {
        guard credentialID.count <= AuthenticatorData.maximumCredentialIdLength else { return nil }
        return try connection.queryOne(
            """
            SELECT p.id, p.user_id, p.credential_id, p.public_key, p.sign_count, p.backup_eligible,
                p.clone_detected_at, u.username
            FROM passkeys p JOIN users u ON u.id = p.user_id WHERE p.credential_id = ?
            """, [.text(Base64URL.encode(credentialID))]
        ).map { try PasskeyRecord($0) }
    }

    private var passkeyLimitReached: APIError {
        APIError(
            409, .passkeyLimitReached,
            "This account has \(configuration.maxPasskeysPerUser) passkeys; remove one first.")
    }
}

/// A stored passkey, as the login ceremony needs it.
private struct PasskeyRecord {
    let id: String
    let userID: String
    /// The owner's username.
    let username: String
    let credentialID: Data
    let record: CredentialRecord
    /// When a cloned authenticator was detected, until the user signs in another way.
    let cloneDetectedAt: Int64?

    var signCount: UInt32 { record.signCount }

    init(_ row: SQLRow) throws {
        id = try row.text(0)
        userID = try row.text(1)
        guard let credentialID = Base64URL.decode(try row.text(2)),
            let coseKey = Base64URL.decode(try row.text(3))
        else { throw DatabaseError.unexpectedType(column: 2) }
        self.credentialID = credentialID
        record = CredentialRecord(
            id: credentialID, publicKey: try CredentialPublicKey(coseKey: coseKey),
            signCount: UInt32(clamping: try row.integer(4)), userHandle: Data(userID.utf8),
            backupEligible: try row.integer(5) != 0)
        cloneDetectedAt = try row.optionalInteger(6)
        username = try row.text(7)
    }
}

extension ThrottleScope {
    /// Consecutive failed logins with one passkey.
    static func passkey(_ passkeyID: String) -> String { "passkey:" + passkeyID }
}

extension Validate {
    /// The client the request named, or, when it named none, a new one: sessions of different
    /// ceremonies then never replace each other.
    static func optionalClientID(_ clientID: ClientID?) -> String {
        clientID?.rawValue ?? "passkey:" + SecureRandomBytes.make(12)
    }

    /// A display name shown by the authenticator: 1–64 code points (as the spec counts them), no
    /// control characters.
    static func displayName(_ name: String) throws -> String {
        guard (1...64).contains(name.unicodeScalars.count),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw APIError.invalid("displayName must be 1-64 characters without control characters") }
        return name
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

extension APIError {
    static let usernameTaken = APIError(409, .usernameTaken, "This username is taken.")
    static let unknownCredential = APIError(
        401, .unknownCredential, "No passkey with this credential id is registered here.")
    static let passkeySuspended = APIError(
        403, .passkeySuspended,
        "This passkey was suspended after a cloned copy of it was seen; sign in with your password, "
            + "a device or another passkey once, then it signs in again.")

    /// The problem code each KeyboundWebAuthn refusal answers with. Malformed input is a bad
    /// request whatever the ceremony.
    private static let webAuthnProblems: [(error: WebAuthnError, code: ProblemCode, malformed: Bool)] = [
        (.malformedCBOR, .malformedCredential, true),
        (.malformedResponse, .malformedCredential, true),
        (.malformedClientData, .malformedCredential, true),
        (.malformedAuthenticatorData, .malformedCredential, true),
        (.invalidPublicKey, .malformedCredential, true),
        (.credentialIdTooLong, .malformedCredential, true),
        (.unsupportedAlgorithm, .unsupportedCredential, true),
        (.unsupportedAttestationFormat, .unsupportedCredential, true),
        (.typeMismatch, .clientDataTypeMismatch, false),
        (.challengeMismatch, .challengeMismatch, false),
        (.originNotAllowed, .originNotAllowed, false),
        (.crossOriginNotAllowed, .crossOriginNotAllowed, false),
        (.rpIdMismatch, .rpIDMismatch, false),
        (.userPresenceMissing, .userPresenceMissing, false),
        (.userVerificationMissing, .userVerificationMissing, false),
        (.invalidBackupState, .invalidBackupState, false),
        (.algorithmNotAllowed, .algorithmNotAllowed, false),
        (.credentialMismatch, .credentialMismatch, false),
        (.userHandleMismatch, .userHandleMismatch, false),
        (.invalidSignature, .signatureInvalid, false),
        (.clonedAuthenticator, .clonedAuthenticator, false),
        (.invalidAttestation, .invalidAttestation, false),
        (.malformedCertificate, .invalidAttestation, false),
        (.nonceMismatch, .invalidAttestation, false),
        (.certificateChainInvalid, .invalidAttestation, false),
        (.keyIdMismatch, .invalidAttestation, false),
        (.environmentMismatch, .environmentMismatch, false),
        (.replayedAssertion, .replayedAssertion, false),
    ]

    /// The problem for a refused ceremony or App Attest check: `status` for a check that failed
    /// (400 while registering or attesting, 401 while signing in), 400 for malformed input. The
    /// detail names the check; it holds no secret.
    static func refused(_ error: WebAuthnError, status: Int) -> APIError {
        let entry = webAuthnProblems.first { $0.error == error }
        let detail =
            "The passkey or attestation was refused: \(error.code)"
            + (error.detail.map { " (\($0))." } ?? ".")
        return APIError(
            entry?.malformed ?? true ? 400 : status, entry?.code ?? .malformedCredential, detail)
    }
}

/// Runs `body`, turning a ``WebAuthnError`` into its problem with `status`.
private func refusingAs<T>(_ status: Int, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as WebAuthnError {
        throw APIError.refused(error, status: status)
    }
}
