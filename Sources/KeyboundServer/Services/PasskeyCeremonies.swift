import Foundation
import KeyboundWebAuthn
import KeyboundWire

// Passkeys: a WebAuthn Level 3 relying party (docs/server.md, "Passkeys and App Attest").
//
// KeyboundWebAuthn runs every check of §7.1 and §7.2 as pure functions; the passkey flows store:
// they issue challenges and find them again through the client data, make each one single-use in
// the same transaction as what the ceremony creates, keep credential ids unique across users
// (§7.1 step 26), store sign counts and backup state, throttle failures, and open sessions like
// every other login. This file holds what the ceremonies share: the relying party's settings,
// their challenges, and the stored passkey.

extension Application {
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

    /// The origin of the operator console (``Configuration/adminOrigin``): configured, or the
    /// `localhost` origin of its listener.
    var adminOrigin: String {
        if let configured = configuration.adminOrigin { return configured }
        let port = adminPort.withLock { $0 } ?? configuration.adminListen?.port ?? 0
        return "\(configuration.tlsKeyPath == nil ? "http" : "https")://localhost:\(port)"
    }

    /// The relying party of a ceremony that arrived on `listener`: on the API's, the web origins
    /// and the Android apps of ``Configuration/androidApps`` (whose ceremonies carry their signing
    /// certificate's hash as origin); on the console's, the console's origin alone.
    func relyingParty(_ listener: Listener) -> RelyingParty {
        let origins =
            listener == .admin
            ? [adminOrigin]
            : passkeyOrigins + configuration.androidApps.compactMap { AndroidApp($0)?.passkeyOrigin }
        return RelyingParty(
            id: relyingPartyID, origins: Set(origins),
            requiresUserVerification: configuration.passkeyUserVerification)
    }

    /// `required` or `preferred`, as the options say it.
    var userVerification: String { configuration.passkeyUserVerification ? "required" : "preferred" }

    /// Refuses settings no browser could use: origins that are not exactly what a browser writes
    /// (`scheme://host[:port]`, lowercase, no default port, no path), and an RP ID that is not
    /// their host or a parent domain of it.
    static func checkPasskeySettings(_ configuration: Configuration) throws {
        for origin in configuration.origins + [configuration.adminOrigin].compactMap({ $0 }) {
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
            let rpID =
                configuration.relyingPartyID ?? configuration.origins.first.flatMap { URL(string: $0)?.host }
                ?? "localhost"
            guard host == rpID || host.hasSuffix("." + rpID) else {
                throw ServerError(
                    .invalidConfiguration,
                    "--rp-id \(rpID) is neither the host of \(origin) nor a parent domain of it")
            }
        }
    }

    // MARK: Challenges and stored passkeys

    /// A fresh challenge for a ceremony, valid for ``Configuration/ceremonyLifetime``. Stores
    /// nothing (``PasskeyChallenge``).
    func issueChallenge(
        _ purpose: PasskeyChallenge.Purpose, userID: String?, username: String?, sessionID: String?,
        clientID: String, _ context: RequestContext
    ) throws -> PasskeyChallenge {
        try PasskeyChallenge(
            purpose: purpose,
            expires: context.now.wholeSeconds.adding(seconds: configuration.ceremonyLifetime),
            userID: userID,
            username: username, sessionID: sessionID, clientID: clientID, server: configuration.serverID,
            key: challengeKey)
    }

    /// Finds the ceremony a response belongs to through the challenge in its client data (§7.1
    /// step 8, §7.2 step 11 compare it again).
    /// - Throws: ``APIError`` `challenge_mismatch` (status `refusal`) when this server issued no
    ///   such challenge for this kind of ceremony, 410 `challenge_expired`, 409 `challenge_used`.
    func ceremony(
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

    /// Uses a challenge up in the current transaction (``Rows/insertUsedChallenge(_:id:expiresAt:)``).
    /// - Returns: false when another attempt used it first.
    func markUsed(_ challenge: PasskeyChallenge, _ connection: any SQLConnection) throws -> Bool {
        try Rows.insertUsedChallenge(connection, id: challenge.usedID, expiresAt: challenge.expiresAt)
    }

    /// The credential ids of a user's passkeys, oldest first.
    func passkeyCredentialIDs(_ connection: any SQLConnection, userID: String) throws -> [Data] {
        try connection.query(
            "SELECT credential_id FROM passkeys WHERE user_id = ? ORDER BY created_at, id", [.text(userID)]
        ).compactMap { Base64URL.decode(try $0.text(0)) }
    }

    func loadPasskey(_ connection: any SQLConnection, credentialID: Data) throws -> PasskeyRecord? {
        guard credentialID.count <= AuthenticatorData.maximumCredentialIdLength else { return nil }
        return try connection.queryOne(
            PasskeyRecord.self,
            """
            SELECT \(PasskeyRecord.columns) FROM passkeys p JOIN users u ON u.id = p.user_id
            WHERE p.credential_id = ?
            """, [.text(Base64URL.encode(credentialID))])
    }

    var passkeyLimitReached: APIError {
        APIError(
            409, .passkeyLimitReached,
            "This account has \(configuration.maxPasskeysPerUser) passkeys; remove one first.")
    }
    /// Opens a session for a passkey ceremony and records which passkey opened it.
    func openPasskeySession(
        _ connection: any SQLConnection, _ context: RequestContext, userID: String, clientID: String,
        passkeyID: String, proof: DPoPProof?
    ) throws -> TokenResponse {
        let tokens = try openSession(
            connection, context, userID: userID, clientID: clientID, method: .passkey, deviceID: nil,
            proof: proof)
        try connection.execute(
            "UPDATE sessions SET passkey_id = ? WHERE id = ?", [.text(passkeyID), .text(tokens.sessionID)])
        return tokens
    }
}

/// A stored passkey, as the login ceremony needs it.
struct PasskeyRecord: SQLRecord {
    static let columns = """
        p.id, p.user_id, p.credential_id, p.public_key, p.sign_count, p.backup_eligible, p.clone_detected_at,
            u.username
        """
    let id: String
    let userID: String
    /// The owner's username.
    let username: String
    /// The credential (its id, public key, sign count, owner's user handle, backup eligibility).
    let record: CredentialRecord
    /// When a cloned authenticator was detected, until the user signs in another way.
    let cloneDetectedAt: Date?

    var signCount: UInt32 { record.signCount }

    init(row: inout SQLRowReader) throws {
        id = try row.text()
        userID = try row.text()
        guard let credentialID = Base64URL.decode(try row.text()),
            let coseKey = Base64URL.decode(try row.text())
        else { throw DatabaseError.unexpectedType(column: 2) }
        record = CredentialRecord(
            id: credentialID, publicKey: try CredentialPublicKey(coseKey: coseKey),
            signCount: UInt32(clamping: try row.integer()), userHandle: Data(userID.utf8),
            backupEligible: try row.bool())
        cloneDetectedAt = try row.optionalDate()
        username = try row.text()
    }
}

extension ThrottleScope {
    /// Consecutive failed logins with one passkey.
    static func passkey(_ passkeyID: String) -> String { "passkey:" + passkeyID }
}
