/// A stable problem code, the `code` member of every error response. Open (``OpenVocabulary``):
/// a newer server may add codes; they decode with their text.
public struct ProblemCode: OpenVocabulary {
    /// The code as it appears on the wire.
    public let rawValue: String
    /// A code from its wire text (unknown codes are kept as they are).
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Malformed JSON, a missing member, a wrong type, or a value outside its grammar (400).
    public static let invalidRequest = ProblemCode(rawValue: "invalid_request")
    /// A member the message does not define (400).
    public static let unknownMember = ProblemCode(rawValue: "unknown_member")
    /// The body is larger than the server accepts (413).
    public static let bodyTooLarge = ProblemCode(rawValue: "body_too_large")
    /// The body is not `application/json` (415).
    public static let unsupportedMediaType = ProblemCode(rawValue: "unsupported_media_type")
    /// Username or password wrong; the same for an unknown user (401).
    public static let invalidCredentials = ProblemCode(rawValue: "invalid_credentials")
    /// Too many failures; retry after the `Retry-After` header (429).
    public static let throttled = ProblemCode(rawValue: "throttled")
    /// Missing, unknown, expired or revoked access or refresh token (401).
    public static let tokenInvalid = ProblemCode(rawValue: "token_invalid")
    /// The challenge or approval has expired (410).
    public static let challengeExpired = ProblemCode(rawValue: "challenge_expired")
    /// The challenge or approval was already used (409).
    public static let challengeUsed = ProblemCode(rawValue: "challenge_used")
    /// The signature does not verify for the issued payload and the device key (401).
    public static let signatureInvalid = ProblemCode(rawValue: "signature_invalid")
    /// The device was revoked (403).
    public static let deviceRevoked = ProblemCode(rawValue: "device_revoked")
    /// The device is suspended (403). Keybound servers no longer send it (bad signatures are
    /// throttled instead, and never suspend a device); kept so older servers' answers decode.
    public static let deviceSuspended = ProblemCode(rawValue: "device_suspended")
    /// The public key is not a P-256 SubjectPublicKeyInfo (400).
    public static let invalidPublicKey = ProblemCode(rawValue: "invalid_public_key")
    /// The operation needs a password login within the server's step-up window (403; see
    /// ``MeResponse/stepUpExpiresAt``).
    public static let stepUpRequired = ProblemCode(rawValue: "step_up_required")
    /// No such resource for this caller (404).
    public static let notFound = ProblemCode(rawValue: "not_found")
    /// The method is not allowed on this path (405).
    public static let methodNotAllowed = ProblemCode(rawValue: "method_not_allowed")
    /// The account has as many active devices as the server allows; revoke one first (409).
    public static let deviceLimitReached = ProblemCode(rawValue: "device_limit_reached")
    /// Sign-up through the API is turned off on this server; an operator creates accounts (403).
    public static let registrationClosed = ProblemCode(rawValue: "registration_closed")
    /// The username is taken (409).
    public static let usernameTaken = ProblemCode(rawValue: "username_taken")
    /// A signed-in caller named another account's username (403): a bearer token acts only on
    /// its own account.
    public static let usernameMismatch = ProblemCode(rawValue: "username_mismatch")
    /// The server is busy; retry after the `Retry-After` header (503).
    public static let unavailable = ProblemCode(rawValue: "unavailable")
    /// An unexpected server error (500); never caused by client input.
    public static let `internal` = ProblemCode(rawValue: "internal")

    // Passkey ceremonies. Most carry the name of the WebAuthn check that refused the ceremony.

    /// The credential JSON, its CBOR, client data or authenticator data is malformed (400).
    public static let malformedCredential = ProblemCode(rawValue: "malformed_credential")
    /// The credential uses an algorithm or attestation format the server does not verify (400).
    public static let unsupportedCredential = ProblemCode(rawValue: "unsupported_credential")
    /// `clientDataJSON.challenge` is not a challenge this server issued for this ceremony (400 on
    /// registration, 401 on login).
    public static let challengeMismatch = ProblemCode(rawValue: "challenge_mismatch")
    /// `clientDataJSON.type` is not the ceremony's (`webauthn.create`, `webauthn.get`).
    public static let clientDataTypeMismatch = ProblemCode(rawValue: "client_data_type_mismatch")
    /// `clientDataJSON.origin` is not one of the server's `--origin`s.
    public static let originNotAllowed = ProblemCode(rawValue: "origin_not_allowed")
    /// The ceremony ran in a cross-origin iframe.
    public static let crossOriginNotAllowed = ProblemCode(rawValue: "cross_origin_not_allowed")
    /// The authenticator data is for another RP ID (or, for App Attest, another App ID).
    public static let rpIDMismatch = ProblemCode(rawValue: "rp_id_mismatch")
    /// The authenticator did not test user presence.
    public static let userPresenceMissing = ProblemCode(rawValue: "user_presence_missing")
    /// The server requires user verification (biometrics or device PIN) and the authenticator did
    /// not perform it.
    public static let userVerificationMissing = ProblemCode(rawValue: "user_verification_missing")
    /// The backup flags are impossible, or backup eligibility changed since registration.
    public static let invalidBackupState = ProblemCode(rawValue: "invalid_backup_state")
    /// The credential's algorithm was not offered in `pubKeyCredParams`.
    public static let algorithmNotAllowed = ProblemCode(rawValue: "algorithm_not_allowed")
    /// The credential is not the one the ceremony names (id, `allowCredentials`).
    public static let credentialMismatch = ProblemCode(rawValue: "credential_mismatch")
    /// `userHandle` is missing for a discoverable login, or is not the credential owner's.
    public static let userHandleMismatch = ProblemCode(rawValue: "user_handle_mismatch")
    /// The signature counter went backwards: the authenticator may be cloned (401, audited).
    public static let clonedAuthenticator = ProblemCode(rawValue: "cloned_authenticator")
    /// The attestation statement does not verify (a wrong signature, a broken certificate rule,
    /// a nonce or key that does not match, an expired chain) (400).
    public static let invalidAttestation = ProblemCode(rawValue: "invalid_attestation")
    /// No passkey with this credential id is registered (401).
    public static let unknownCredential = ProblemCode(rawValue: "unknown_credential")
    /// This credential id is already registered, to this or another user (409).
    public static let credentialExists = ProblemCode(rawValue: "credential_exists")
    /// The account has no password and this is its last passkey: removing it would lock the user
    /// out (409).
    public static let lastPasskey = ProblemCode(rawValue: "last_passkey")
    /// The account has as many passkeys as the server allows; remove one first (409).
    public static let passkeyLimitReached = ProblemCode(rawValue: "passkey_limit_reached")
    /// The passkey is suspended since a cloned copy of it showed (a sign count that did not rise):
    /// it signs in again once its user has signed in another way (403).
    public static let passkeySuspended = ProblemCode(rawValue: "passkey_suspended")

    // App Attest.

    /// The server requires App Attest (`--require-app-attest`) and the request carried none (403).
    public static let appAttestRequired = ProblemCode(rawValue: "app_attest_required")
    /// The App Attest environment (development or production) is not the server's (400).
    public static let environmentMismatch = ProblemCode(rawValue: "environment_mismatch")
    /// An App Attest assertion's counter is not above the last one accepted: a replay (401).
    public static let replayedAssertion = ProblemCode(rawValue: "replayed_assertion")

    // DPoP (RFC 9449).

    /// The `DPoP` proof is missing, malformed, not for this request (method, URI, time, access
    /// token), used before, or not by the key the session is bound to (400 on a login or refresh,
    /// 401 on a bearer route, with `WWW-Authenticate: DPoP error="invalid_dpop_proof"`).
    public static let dpopProofInvalid = ProblemCode(rawValue: "dpop_proof_invalid")
    /// The proof lacks the server's current nonce: send it again with the `DPoP-Nonce` header's
    /// value as its `nonce` (400 on a login or refresh, 401 on a bearer route).
    public static let useDPoPNonce = ProblemCode(rawValue: "use_dpop_nonce")

    // OAuth 2.0 and OpenID Connect (`POST /v1/oauth/authorize`).

    /// No OAuth client with this `client_id` is registered (400).
    public static let unknownClient = ProblemCode(rawValue: "unknown_client")
    /// The `redirect_uri` is not one the client registered (400): the answer goes nowhere.
    public static let unregisteredRedirectURI = ProblemCode(rawValue: "unregistered_redirect_uri")

    // Idempotent retries (`Idempotency-Key`).

    /// The `Idempotency-Key` was used before with another request (another body, path or
    /// credential): a key names one request; send a new one with a new request (422).
    public static let idempotencyKeyReused = ProblemCode(rawValue: "idempotency_key_reused")
    /// The request first sent with this `Idempotency-Key` is still running: send it again after
    /// the `Retry-After` header, and it gets that request's answer (409).
    public static let idempotencyKeyInFlight = ProblemCode(rawValue: "idempotency_key_in_flight")

    // The operator console (docs/console.md).

    /// An administrator locked the account: no login opens a session until one unlocks it (403).
    public static let accountLocked = ProblemCode(rawValue: "account_locked")
    /// The operator console's API takes only accounts with the `admin` role (403).
    public static let adminRequired = ProblemCode(rawValue: "admin_required")

    /// Every code this version's server sends, in the order of docs/openapi.yaml
    /// (``deviceSuspended`` is not among them).
    public static let known: [ProblemCode] = [
        .invalidRequest, .unknownMember, .bodyTooLarge, .unsupportedMediaType, .invalidCredentials,
        .throttled,
        .tokenInvalid, .challengeExpired, .challengeUsed, .signatureInvalid, .deviceRevoked,
        .invalidPublicKey,
        .stepUpRequired, .notFound, .methodNotAllowed, .usernameTaken, .deviceLimitReached,
        .registrationClosed, .unavailable, .internal, .malformedCredential, .unsupportedCredential,
        .challengeMismatch, .clientDataTypeMismatch, .originNotAllowed, .crossOriginNotAllowed, .rpIDMismatch,
        .userPresenceMissing, .userVerificationMissing, .invalidBackupState, .algorithmNotAllowed,
        .credentialMismatch, .userHandleMismatch, .clonedAuthenticator, .invalidAttestation,
        .unknownCredential,
        .credentialExists, .lastPasskey, .passkeyLimitReached, .passkeySuspended, .appAttestRequired,
        .environmentMismatch,
        .replayedAssertion, .usernameMismatch, .dpopProofInvalid, .useDPoPNonce, .unknownClient,
        .unregisteredRedirectURI, .idempotencyKeyReused, .idempotencyKeyInFlight, .accountLocked,
        .adminRequired,
    ]
}

/// An error response body, `application/problem+json` (RFC 9457).
package struct Problem: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Problem"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case type, title, status, code, detail }
    /// The media type of problem bodies.
    package static let mediaType = "application/problem+json"

    /// A URI naming the problem type: `urn:keybound:problem:<code>`.
    package let type: String
    /// A short summary of the problem type.
    package let title: String
    /// The HTTP status.
    package let status: Int
    /// The stable code.
    package let code: ProblemCode
    /// What happened, for a human; never a secret.
    package let detail: String

    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - code: the stable code (also names the type).
    ///   - title: a short summary.
    ///   - detail: what happened.
    package init(status: Int, code: ProblemCode, title: String, detail: String) {
        self.type = "urn:keybound:problem:" + code.rawValue
        self.title = title
        self.status = status
        self.code = code
        self.detail = detail
    }

    package init(reader: JSONReader<Member>) throws(WireFailure) {
        type = try reader.string(.type)
        title = try reader.string(.title)
        status = try reader.integer(.status)
        code = try reader.vocabulary(.code, as: ProblemCode.self)
        detail = try reader.string(.detail)
    }

    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.type, type)
        object.add(.title, title)
        object.add(.status, status)
        object.add(.code, code)
        object.add(.detail, detail)
    }
}
