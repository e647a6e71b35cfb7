import Foundation
import KeyboundWire

/// An OAuth error, answered as OAuth says (RFC 6749 §5.2, RFC 6750 §3): JSON
/// `{"error": …, "error_description": …}`, never problem+json, with `Cache-Control: no-store`.
struct OAuthError: Error {
    let status: Int
    /// The error code of the RFCs (`invalid_request`, `invalid_client`, `invalid_grant`, …).
    let error: String
    /// What happened, for a developer; never a secret.
    let description: String
    var headers: [String: String] = [:]

    static func invalidRequest(_ description: String) -> OAuthError {
        OAuthError(status: 400, error: "invalid_request", description: description)
    }
    static func invalidClient(_ description: String, basic: Bool = false) -> OAuthError {
        // A client that tried HTTP Basic is told the scheme it failed (RFC 6749 §5.2).
        OAuthError(
            status: 401, error: "invalid_client", description: description,
            headers: basic ? ["WWW-Authenticate": #"Basic realm="keybound""#] : [:])
    }
    static func invalidGrant(_ description: String) -> OAuthError {
        OAuthError(status: 400, error: "invalid_grant", description: description)
    }
    static func unauthorizedClient(_ description: String) -> OAuthError {
        OAuthError(status: 400, error: "unauthorized_client", description: description)
    }
    static func unsupportedGrantType(_ description: String) -> OAuthError {
        OAuthError(status: 400, error: "unsupported_grant_type", description: description)
    }
    static func invalidScope(_ description: String) -> OAuthError {
        OAuthError(status: 400, error: "invalid_scope", description: description)
    }
    /// A bearer token a protected resource refuses (RFC 6750 §3.1).
    static func invalidToken(_ description: String) -> OAuthError {
        OAuthError(
            status: 401, error: "invalid_token", description: description,
            headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])
    }
    /// A token without the scope the resource needs (RFC 6750 §3.1).
    static func insufficientScope(_ scope: String) -> OAuthError {
        OAuthError(
            status: 403, error: "insufficient_scope", description: "the token lacks the scope \(scope)",
            headers: ["WWW-Authenticate": #"Bearer error="insufficient_scope", scope="\#(scope)""#])
    }

    var response: HTTPResponse {
        .oauthJSON(
            status,
            .object([
                JSONMember("error", .string(error)), JSONMember("error_description", .string(description)),
            ]),
            headers: headers)
    }
}

extension OAuthError {
    /// A refused DPoP proof at the token endpoint (RFC 9449 §5, §8): 400 `invalid_dpop_proof` or
    /// `use_dpop_nonce` (the answer then carries the nonce in `DPoP-Nonce`).
    init(dpop failure: DPoPFailure) {
        self.init(status: 400, error: failure.oauthError, description: failure.detail)
    }
}

extension APIError {
    /// The response: problem+json, or, on a route that speaks OAuth, the same refusal in OAuth's
    /// format (`server_error` and `temporarily_unavailable` as RFC 6749 §4.1.2.1 names them,
    /// `invalid_request` for a request refused as a whole), with the same status and headers.
    func response(oauth: Bool) -> HTTPResponse {
        guard oauth else { return response }
        let error =
            switch status {
            case 503: "temporarily_unavailable"
            case 500...: "server_error"
            default: "invalid_request"
            }
        return OAuthError(status: status, error: error, description: detail, headers: headers).response
    }
}

extension HTTPResponse {
    /// A JSON answer of the OAuth endpoints: never cached (it may carry tokens; RFC 6749 §5.1).
    static func oauthJSON(_ status: Int, _ value: JSONValue, headers: [String: String] = [:]) -> HTTPResponse
    {
        var headers = headers
        headers["Content-Type"] = "application/json"
        headers["Cache-Control"] = "no-store"
        headers["Pragma"] = "no-cache"
        return HTTPResponse(status: status, headers: headers, body: JSON.serialize(value))
    }
}

/// The parameters of an OAuth request: an `application/x-www-form-urlencoded` body (RFC 6749
/// Appendix B); the authorization endpoint reads its query with ``values(of:)-(HTTPRequest)``. A parameter without a value counts as left out, and one the
/// endpoints read may not be given twice (RFC 6749 §3.1); others, unread, may (RFC 8707's
/// `resource` is repeatable).
struct OAuthParameters {
    let values: [String: String]

    subscript(_ name: String) -> String? { values[name] }

    /// The parameters some endpoint reads: each at most once.
    static let read: Set<String> = [
        "grant_type", "code", "redirect_uri", "code_verifier", "refresh_token", "scope", "client_id",
        "client_secret", "client_assertion_type", "client_assertion", "token", "token_type_hint",
        "response_type", "state", "nonce", "code_challenge", "code_challenge_method", "prompt", "auth_req_id",
        "login_hint", "login_hint_token", "id_token_hint", "binding_message", "user_code", "requested_expiry",
        "client_notification_token", "authorization_details", "request", "request_uri",
    ]

    /// The body of `request`, which must be form-encoded.
    /// - Throws: ``OAuthError`` `invalid_request` for another media type, bad encoding or a
    ///   repeated parameter.
    init(body request: HTTPRequest) throws {
        try self.init(Self.values(of: try Self.form(request)))
    }

    private init(_ parameters: (values: [String: String], repeated: Set<String>)) throws {
        if let name = parameters.repeated.sorted().first {
            throw OAuthError.invalidRequest("the parameter \(name) is given more than once")
        }
        values = parameters.values
    }

    /// The non-empty values of a query, and which of the parameters the endpoints read it
    /// repeats.
    static func values(of query: HTTPRequest) -> (values: [String: String], repeated: Set<String>) {
        (query.query.filter { !$0.value.isEmpty }, query.repeatedQueryNames.intersection(read))
    }

    /// The non-empty values of a form, and which of the parameters the endpoints read it repeats.
    static func values(of pairs: [(String, String)]) -> (values: [String: String], repeated: Set<String>) {
        var values: [String: String] = [:]
        var repeated: Set<String> = []
        for (name, value) in pairs where !value.isEmpty {
            if values.updateValue(value, forKey: name) != nil, read.contains(name) { repeated.insert(name) }
        }
        return (values, repeated)
    }

    /// The pairs of a form-encoded body, in order.
    /// - Throws: ``OAuthError`` `invalid_request` for another media type or bad encoding.
    static func form(_ request: HTTPRequest) throws -> [(String, String)] {
        let type = request.headers["content-type"]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/x-www-form-urlencoded" else {
            throw OAuthError.invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        guard let text = String(data: request.body, encoding: .utf8) else {
            throw OAuthError.invalidRequest("the body is not UTF-8")
        }
        return try text.split(separator: "&").filter { !$0.isEmpty }.map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else {
                throw OAuthError.invalidRequest("the body is not valid form encoding")
            }
            return (name, value)
        }
    }

    /// Form decoding: `+` is a space, `%XX` a byte; the bytes must be UTF-8.
    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// Form encoding of `values` (for redirect URIs' queries): `application/x-www-form-urlencoded`.
    static func encode(_ values: [(String, String)]) -> String {
        // ASCII letters and digits only: CharacterSet.alphanumerics would let other letters through.
        let allowed = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._*")
        func escape(_ text: String) -> String {
            (text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "").replacingOccurrences(
                of: "%20", with: "+")
        }
        return values.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }
}
