/// A stable problem code, the `code` member of every error response. New codes may be added.
public struct ProblemCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The code as it appears on the wire.
    public let rawValue: String
    /// A code from its wire text (unknown codes are kept as they are).
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The code as it appears on the wire.
    public var description: String { rawValue }

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
    /// The operation needs a password login within the last 5 minutes (403).
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
}

/// An error response body, `application/problem+json` (RFC 9457).
public struct Problem: WireMessage, Hashable {
    /// The media type of problem bodies.
    public static let mediaType = "application/problem+json"

    /// A URI naming the problem type: `urn:keybound:problem:<code>`.
    public let type: String
    /// A short summary of the problem type.
    public let title: String
    /// The HTTP status.
    public let status: Int
    /// The stable code.
    public let code: ProblemCode
    /// What happened, for a human; never a secret.
    public let detail: String

    /// A problem whose `type` is made from `code`.
    ///
    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - code: the stable code (also names the type).
    ///   - title: a short summary.
    ///   - detail: what happened.
    public init(status: Int, code: ProblemCode, title: String, detail: String) {
        self.type = "urn:keybound:problem:" + code.rawValue
        self.title = title
        self.status = status
        self.code = code
        self.detail = detail
    }

    /// Decodes the body strictly: `type`, `title`, `status`, `code` and `detail` required, no other
    /// member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["type", "title", "status", "code", "detail"])
        type = try reader.string("type")
        title = try reader.string("title")
        status = try reader.integer("status")
        code = ProblemCode(rawValue: try reader.string("code"))
        detail = try reader.string("detail")
    }

    /// The body as sent: `type`, `title`, `status`, `code` and `detail`, in this order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("type", type)
        object.add("title", title)
        object.add("status", status)
        object.add("code", code.rawValue)
        object.add("detail", detail)
        return object.value
    }
}
