import Foundation
import KeyboundWebAuthn
import KeyboundWire

/// An error a handler answers with: becomes an `application/problem+json` response.
struct APIError: Error {
    let status: Int
    let code: ProblemCode
    let detail: String
    var headers: [String: String] = [:]

    init(_ status: Int, _ code: ProblemCode, _ detail: String, headers: [String: String] = [:]) {
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    static func invalid(_ detail: String) -> APIError { APIError(400, .invalidRequest, detail) }

    static let invalidCredentials = APIError(
        401, .invalidCredentials, "The username or the password is wrong.")
    static let tokenInvalid = APIError(
        401, .tokenInvalid, "The token is missing, unknown, expired or revoked.",
        headers: ["WWW-Authenticate": #"Bearer error="invalid_token", DPoP algs="ES256""#])
    /// A token of a session bound to a DPoP key, presented as a bearer token (RFC 9449 §7.1).
    static let boundTokenAsBearer = APIError(
        401, .tokenInvalid,
        "This token is bound to a DPoP key: send it as Authorization: DPoP, with a proof.",
        headers: ["WWW-Authenticate": #"DPoP algs="ES256", error="invalid_token""#])
    /// A token of a bearer session, presented with the DPoP scheme: it is bound to no key.
    static let unboundTokenAsDPoP = APIError(
        401, .tokenInvalid, "This token is bound to no DPoP key: send it as Authorization: Bearer.",
        headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])
    static let notFound = APIError(404, .notFound, "No such resource.")
    static let challengeUsed = APIError(409, .challengeUsed, "This challenge was already used.")
    static let challengeExpired = APIError(410, .challengeExpired, "This challenge has expired.")
    static let signatureInvalid = APIError(
        401, .signatureInvalid, "The signature does not verify for the issued payload and the device key.")
    static let deviceRevoked = APIError(403, .deviceRevoked, "This device was revoked.")
    /// A device bound without App Attest on a server that now requires it (`--require-app-attest`).
    static let unattestedDevice = APIError(
        403, .appAttestRequired,
        "This server requires App Attest and this device was bound without it: bind the device again, "
            + "with an App Attest attestation.")
    static let registrationClosed = APIError(
        403, .registrationClosed, "This server does not take sign-ups; an operator creates accounts.")

    static let usernameTaken = APIError(409, .usernameTaken, "This username is taken.")
    static let credentialExists = APIError(409, .credentialExists, "This passkey is registered already.")
    static let unknownCredential = APIError(
        401, .unknownCredential, "No passkey with this credential id is registered here.")
    static let passkeySuspended = APIError(
        403, .passkeySuspended,
        "This passkey was suspended after a cloned copy of it was seen; sign in with your password, "
            + "a device or another passkey once, then it signs in again.")

    /// 429 with `Retry-After`. The default detail is the same for every login throttle, so the
    /// answer never says which limit was reached.
    static func throttled(
        retryAfter seconds: Int64, detail: String = "Too many failed attempts. Try again later."
    ) -> APIError {
        APIError(429, .throttled, detail, headers: ["Retry-After": String(max(1, seconds))])
    }

    /// Short titles, one per code (RFC 9457 `title`).
    static func title(for code: ProblemCode) -> String {
        switch code {
        case .invalidRequest: "Invalid request"
        case .unknownMember: "Unknown member"
        case .bodyTooLarge: "Body too large"
        case .unsupportedMediaType: "Unsupported media type"
        case .invalidCredentials: "Invalid credentials"
        case .throttled: "Too many attempts"
        case .tokenInvalid: "Invalid token"
        case .challengeExpired: "Challenge expired"
        case .challengeUsed: "Challenge already used"
        case .signatureInvalid: "Invalid signature"
        case .deviceRevoked: "Device revoked"
        case .invalidPublicKey: "Invalid public key"
        case .deviceLimitReached: "Too many devices"
        case .stepUpRequired: "Password authentication required"
        case .notFound: "Not found"
        case .methodNotAllowed: "Method not allowed"
        case .usernameTaken: "Username taken"
        case .usernameMismatch: "Not the signed-in user"
        case .registrationClosed: "Registration closed"
        case .unavailable: "Service unavailable"
        case .malformedCredential: "Malformed credential"
        case .unsupportedCredential: "Unsupported credential"
        case .challengeMismatch: "Unknown challenge"
        case .unknownCredential: "Unknown passkey"
        case .credentialExists: "Passkey already registered"
        case .lastPasskey: "Last passkey"
        case .passkeyLimitReached: "Too many passkeys"
        case .clonedAuthenticator: "Cloned authenticator"
        case .passkeySuspended: "Passkey suspended"
        case .invalidAttestation: "Invalid attestation"
        case .appAttestRequired: "App Attest required"
        case .replayedAssertion: "Replayed assertion"
        case .dpopProofInvalid: "Invalid DPoP proof"
        case .useDPoPNonce: "DPoP nonce required"
        case .idempotencyKeyReused: "Idempotency key reused"
        case .idempotencyKeyInFlight: "Request in progress"
        case .clientDataTypeMismatch, .originNotAllowed, .crossOriginNotAllowed, .rpIDMismatch,
            .userPresenceMissing, .userVerificationMissing, .invalidBackupState, .algorithmNotAllowed,
            .credentialMismatch, .userHandleMismatch, .environmentMismatch:
            "Passkey refused"
        default: "Internal error"
        }
    }

    var response: HTTPResponse {
        let problem = Problem(status: status, code: code, title: Self.title(for: code), detail: detail)
        var headers = headers
        headers["Content-Type"] = Problem.mediaType
        headers["Cache-Control"] = "no-store"
        return HTTPResponse(status: status, headers: headers, body: problem.jsonData)
    }
}

extension HTTPResponse {
    /// A JSON response with `Cache-Control: no-store` (bodies may carry tokens).
    static func json(_ status: Int, _ message: some WireMessage, headers: [String: String] = [:])
        -> HTTPResponse
    {
        var headers = headers
        headers["Content-Type"] = "application/json"
        headers["Cache-Control"] = "no-store"
        return HTTPResponse(status: status, headers: headers, body: message.jsonData)
    }

    static let noContent = HTTPResponse(status: 204, headers: ["Cache-Control": "no-store"])
}

// MARK: Storage failures

extension APIError {
    /// The one mapping of storage failures to problems: a busy or unreachable database is a 503
    /// with `Retry-After` (the storage reconnects by itself); nil for every other storage failure,
    /// which is an internal error.
    init?(storage error: DatabaseError) {
        switch error {
        case .busy:
            self.init(503, .unavailable, "The server is busy. Try again.", headers: ["Retry-After": "1"])
        case .unavailable:
            self.init(
                503, .unavailable, "The database is unavailable. Try again shortly.",
                headers: ["Retry-After": "2"])
        case .engine, .unexpectedType, .unsupportedURL, .schemaTooNew: return nil
        }
    }
}

// MARK: WebAuthn and App Attest refusals

extension APIError {
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

    /// Runs `body`, turning a ``WebAuthnError`` into its problem with `status`.
    static func refusing<T>(as status: Int, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as WebAuthnError {
            throw APIError.refused(error, status: status)
        }
    }
}
