import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire

// App Attest (docs/server.md, "Passkeys and App Attest"): a device binding may carry an
// attestation that a genuine copy of the app, on a genuine Apple device, asked for it; requests
// of an attested device may then carry assertions, whose counter must keep rising.
//
// The attestation vouches for the device key through its client data: the app hashes the
// server's challenge followed by the device key it binds (`AppAttestClientData.binding`). The App
// Attest key itself cannot be the device key: it has no biometric access control and signs only
// through `generateAssertion`, while the device key is a Secure Enclave key that only Face ID or
// Touch ID unlocks.

/// An attestation that passed, waiting to be stored with the device it vouches for.
struct VerifiedAppAttestation {
    let key: AppAttest.AttestedKey
    /// The challenge it was made over, claimed in the binding's transaction.
    let challenge: Data
}

extension Application {
    var appAttest: AppAttest {
        AppAttest(
            appIds: configuration.appIDs, environment: configuration.appAttestEnvironment,
            roots: configuration.appAttestRoots)
    }

    /// `POST /v1/app-attest/challenges`: a fresh nonce for the next attested device binding of
    /// the caller's session. A session has one: a new one replaces the last.
    func createAppAttestChallenge(_ context: RequestContext) throws -> AppAttestChallengeResponse {
        let challenge = SecureRandomBytes.bytes(32)
        let expiresAt = context.now.wholeSeconds.adding(seconds: configuration.ceremonyLifetime)
        return try authenticatedWrite(context) { connection, caller in
            try connection.execute(
                """
                INSERT INTO app_attest_challenges (session_id, challenge, expires_at, used_at) VALUES (?, ?, ?, NULL)
                ON CONFLICT (session_id) DO UPDATE SET challenge = excluded.challenge,
                    expires_at = excluded.expires_at, used_at = NULL
                """,
                [.text(caller.sessionID), .text(Base64URL.encode(challenge)), .date(expiresAt)])
            return AppAttestChallengeResponse(challenge: challenge, expiresAt: expiresAt)
        }
    }

    /// Verifies the App Attest attestation of a device binding, as Apple specifies (through
    /// KeyboundWebAuthn): the chain to the App Attestation root at the server's time, the nonce
    /// over the authenticator data and the client data hash, the key id, the App ID
    /// (``Configuration/appIDs``), counter 0, the environment's AAGUID. The client data is the
    /// session's outstanding challenge followed by the `public_key` being bound.
    ///
    /// - Returns: nil when the binding carries no attestation and none is required.
    /// - Throws: ``APIError`` 403 `app_attest_required`; `challenge_mismatch`, `challenge_used`,
    ///   `challenge_expired` for the session's challenge; the attestation's refusal (400), which
    ///   is audited and uses the challenge up.
    func verifyAppAttestBinding(_ request: BindDeviceRequest, caller: Caller, _ context: RequestContext)
        throws
        -> VerifiedAppAttestation?
    {
        guard let binding = request.appAttest else {
            guard !configuration.requireAppAttest else {
                throw APIError(
                    403, .appAttestRequired,
                    "This server binds only devices an App Attest attestation vouches for.")
            }
            return nil
        }
        let row = try database.read { connection in
            try connection.queryOne(
                AppAttestChallengeRecord.self,
                "SELECT \(AppAttestChallengeRecord.columns) FROM app_attest_challenges WHERE session_id = ?",
                [.text(caller.sessionID)])
        }
        guard let row, let challenge = Base64URL.decode(row.challenge) else {
            throw APIError(
                400, .challengeMismatch,
                "No App Attest challenge for this session: \(API.createAppAttestChallenge.method.rawValue) "
                    + "\(API.createAppAttestChallenge.template).")
        }
        if row.usedAt != nil { throw APIError.challengeUsed }
        guard context.now < row.expiresAt else { throw APIError.challengeExpired }
        let clientData = AppAttestClientData.binding(challenge: challenge, publicKey: request.publicKey)
        do {
            let key = try appAttest.verifyAttestation(
                binding.attestation, keyId: binding.keyID, clientDataHash: Digest.sha256(clientData),
                at: clock.now)
            return VerifiedAppAttestation(key: key, challenge: challenge)
        } catch let error as WebAuthnError {
            try database.write { connection in
                try connection.execute(
                    "UPDATE app_attest_challenges SET used_at = ? WHERE session_id = ? AND used_at IS NULL",
                    [.date(context.now), .text(caller.sessionID)])
                try auditRefusal(
                    connection, context, .appAttestFailed, method: .appAttest, userID: caller.userID)
            }
            throw APIError.refused(error, status: 400)
        }
    }

    /// Stores a verified attestation with the device it vouches for, in the binding's
    /// transaction, and uses its challenge up.
    /// - Returns: false, having stored nothing, when another binding used the challenge first.
    func storeAppAttestation(
        _ attestation: VerifiedAppAttestation, deviceID: String, caller: Caller,
        _ connection: any SQLConnection,
        _ context: RequestContext
    ) throws -> Bool {
        let claimed = try connection.execute(
            """
            UPDATE app_attest_challenges SET used_at = ? WHERE session_id = ? AND challenge = ? AND used_at IS NULL
            """,
            [.date(context.now), .text(caller.sessionID), .text(Base64URL.encode(attestation.challenge))])
        guard claimed == 1 else { return false }
        try connection.execute(
            """
            INSERT INTO app_attest_keys (device_id, key_id, public_key, app_id, counter, created_at)
            VALUES (?, ?, ?, ?, 0, ?)
            """,
            [
                .text(deviceID), .text(Base64URL.encode(attestation.key.keyId)),
                .text(Base64URL.encode(attestation.key.publicKey.x963Representation)),
                .text(attestation.key.appId),
                .date(context.now),
            ])
        return true
    }

    /// Checks the App Attest assertion of a request made by an attested device, over `clientData`
    /// (the exact payload bytes the server issued, which hold its challenge), and stores its
    /// counter, in the request's transaction. An assertion must show a counter above every
    /// earlier one: the conditional update lets exactly one of two concurrent uses of a counter
    /// win.
    ///
    /// - Returns: nil when the request may go on (no App Attest key and no assertion, which
    ///   ``checkUsable(_:)`` has already refused when App Attest is required; an attested device
    ///   without an assertion while none is required; a valid assertion), otherwise the
    ///   refusal: 401 `unknown_credential` for an assertion from a device without a key, 403
    ///   `app_attest_required`, 401 for an assertion that does not verify (audited) or is replayed.
    func checkAppAttestAssertion(
        _ assertion: Data?, device: DeviceRecord, clientData: Data, _ connection: any SQLConnection,
        _ context: RequestContext
    ) throws -> APIError? {
        guard let key = device.appAttestKey
        else {
            // 401, not 400: the body is well-formed (no schema can tie it to how the device was
            // bound); there is just no App Attest key to check the assertion against.
            return assertion == nil
                ? nil
                : APIError(
                    401, .unknownCredential,
                    "app_attest_assertion is only for devices bound with App Attest; this one has no App Attest key."
                )
        }
        guard let assertion else {
            guard configuration.requireAppAttest else { return nil }
            return APIError(403, .appAttestRequired, "Requests of this device need an App Attest assertion.")
        }
        let previous = key.counter
        let counter: UInt32
        do {
            counter = try appAttest.verifyAssertion(
                assertion, clientData: clientData,
                publicKey: P256PublicKey(x963Representation: key.publicKey),
                appId: key.appID, previousCounter: UInt32(clamping: previous))
        } catch let error as WebAuthnError {
            try auditRefusal(
                connection, context, .appAttestFailed, method: .appAttest, userID: device.userID,
                deviceID: device.id)
            return APIError.refused(error, status: 401)
        }
        let stored = try connection.execute(
            "UPDATE app_attest_keys SET counter = ? WHERE device_id = ? AND counter < ?",
            [.integer(Int64(counter)), .text(device.id), .integer(Int64(counter))])
        guard stored == 1 else {
            return APIError.refused(WebAuthnError.replayedAssertion, status: 401)
        }
        return nil
    }
}

/// A session's outstanding App Attest challenge (the 32 bytes, base64url).
private struct AppAttestChallengeRecord {
    let challenge: String
    let expiresAt: Date
    let usedAt: Date?
}

extension AppAttestChallengeRecord: SQLRecord {
    static let columns = "challenge, expires_at, used_at"

    init(row: inout SQLRowReader) throws {
        self.init(challenge: try row.text(), expiresAt: try row.date(), usedAt: try row.optionalDate())
    }
}

/// An attested device's App Attest key: its P-256 point (X9.63), the App ID it was attested for,
/// and the counter of its last accepted assertion.
struct AppAttestKey {
    let publicKey: Data
    let appID: String
    let counter: Int64

}

extension AppAttestKey {
    /// Its columns in a device query that LEFT JOINs `app_attest_keys k`.
    static let columns = "k.public_key, k.app_id, k.counter"

    /// Reads ``columns``: nil when the device has no App Attest key (they are NULL).
    init?(row: inout SQLRowReader) throws {
        let (point, appID, counter) = (
            try row.optionalText(), try row.optionalText(), try row.optionalInteger()
        )
        guard let point, let appID, let counter else { return nil }
        guard let publicKey = Base64URL.decode(point) else { throw DatabaseError.unexpectedType(column: 0) }
        self.init(publicKey: publicKey, appID: appID, counter: counter)
    }
}
