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
    /// The server is busy; retry after the `Retry-After` header (503).
    public static let unavailable = ProblemCode(rawValue: "unavailable")
    /// An unexpected server error (500); never caused by client input.
    public static let `internal` = ProblemCode(rawValue: "internal")

    /// Every code this version's server sends, in the order of docs/openapi.yaml
    /// (``deviceSuspended`` is not among them).
    public static let known: [ProblemCode] = [
        .invalidRequest, .unknownMember, .bodyTooLarge, .unsupportedMediaType, .invalidCredentials,
        .throttled,
        .tokenInvalid, .challengeExpired, .challengeUsed, .signatureInvalid, .deviceRevoked,
        .invalidPublicKey,
        .stepUpRequired, .notFound, .methodNotAllowed, .usernameTaken, .deviceLimitReached,
        .registrationClosed, .unavailable, .internal,
    ]
}

/// An error response body, `application/problem+json` (RFC 9457).
package struct Problem: WireMessage, Hashable {
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

    package init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader<Member>(json)
        type = try reader.string(.type)
        title = try reader.string(.title)
        status = try reader.integer(.status)
        code = try reader.vocabulary(.code, as: ProblemCode.self)
        detail = try reader.string(.detail)
    }

    package var json: JSONValue {
        var object = JSONObjectBuilder<Member>()
        object.add(.type, type)
        object.add(.title, title)
        object.add(.status, status)
        object.add(.code, code)
        object.add(.detail, detail)
        return object.value
    }
}
