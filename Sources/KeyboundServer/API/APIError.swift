import Foundation
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
        headers: ["WWW-Authenticate": "Bearer error=\"invalid_token\""])
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
