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
/// Appendix B), or a query string. A parameter given twice is refused (RFC 6749 §3.1).
struct OAuthParameters {
    let values: [String: String]

    subscript(_ name: String) -> String? { values[name] }

    /// The body of `request`, which must be form-encoded.
    /// - Throws: ``OAuthError`` `invalid_request` for another media type, bad encoding or a
    ///   repeated parameter.
    init(body request: HTTPRequest) throws {
        let type = request.headers["content-type"]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/x-www-form-urlencoded" else {
            throw OAuthError.invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        guard let text = String(data: request.body, encoding: .utf8) else {
            throw OAuthError.invalidRequest("the body is not UTF-8")
        }
        var values: [String: String] = [:]
        for pair in text.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count > 1 ? parts[1] : "")
            else {
                throw OAuthError.invalidRequest("the body is not valid form encoding")
            }
            guard values.updateValue(value, forKey: name) == nil else {
                throw OAuthError.invalidRequest("the parameter \(name) is given more than once")
            }
        }
        self.values = values
    }

    /// The query of `request` (already decoded by the HTTP layer).
    /// - Throws: ``OAuthError`` `invalid_request` for a repeated parameter.
    init(query request: HTTPRequest) throws {
        if let name = request.repeatedQueryNames.first {
            throw OAuthError.invalidRequest("the parameter \(name) is given more than once")
        }
        values = request.query
    }

    init(_ values: [String: String]) { self.values = values }

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
