import Foundation

/// The paths of the OAuth 2.0 / OpenID Connect provider (docs/oauth.md). These endpoints speak
/// OAuth's own encodings — form-encoded requests, `{error, error_description}` answers,
/// redirects, discovery documents — so they are not ``Endpoint``s of the JSON API; their paths
/// are written here once, for the server's route table and its discovery documents.
package enum OAuthPaths {
    /// OpenID Connect Discovery 1.0.
    package static let openIDConfiguration = "/.well-known/openid-configuration"
    /// OAuth 2.0 Authorization Server Metadata (RFC 8414).
    package static let authorizationServer = "/.well-known/oauth-authorization-server"
    /// The issuer's signing keys, a JWK Set.
    package static let jwks = "/oauth/jwks"
    /// The authorization endpoint (RFC 6749 §3.1).
    package static let authorize = "/oauth/authorize"
    /// The token endpoint (RFC 6749 §3.2).
    package static let token = "/oauth/token"
    /// The UserInfo endpoint (OpenID Connect Core §5.3).
    package static let userinfo = "/oauth/userinfo"
    /// Token introspection (RFC 7662).
    package static let introspect = "/oauth/introspect"
    /// Token revocation (RFC 7009).
    package static let revoke = "/oauth/revoke"
    /// The backchannel authentication endpoint (OpenID CIBA Core 1.0 §7).
    package static let backchannelAuthentication = "/oauth/bc-authorize"
    /// The apps that may share this site's passkeys, for Apple platforms.
    package static let appleAppSiteAssociation = "/.well-known/apple-app-site-association"
    /// The apps that may share this site's passkeys, for Android.
    package static let assetLinks = "/.well-known/assetlinks.json"
}

/// `POST /v1/oauth/authorize` request: the authorization request (RFC 6749 §4.1.1 with PKCE,
/// RFC 7636) that the sign-in page, or a native app holding a session, completes for its user.
package struct OAuthAuthorizeRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "OAuthAuthorizeRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case clientID = "client_id"
        case redirectURI = "redirect_uri"
        case responseType = "response_type"
        case scope, state, nonce
        case codeChallenge = "code_challenge"
        case codeChallengeMethod = "code_challenge_method"
    }
    /// The client asking.
    package let clientID: String
    /// Where the answer goes; must be one the client registered.
    package let redirectURI: String
    /// `code`.
    package let responseType: String
    /// Space-separated scopes (`openid`, `profile`, `offline_access`, …).
    package let scope: String?
    /// The client's value, returned with the answer.
    package let state: String?
    /// The client's value, put into the ID token.
    package let nonce: String?
    /// The PKCE challenge: base64url of SHA-256 of the verifier.
    package let codeChallenge: String?
    /// `S256`.
    package let codeChallengeMethod: String?

    /// Creates the message from its members.
    package init(
        clientID: String, redirectURI: String, responseType: String, scope: String?, state: String?,
        nonce: String?, codeChallenge: String?, codeChallengeMethod: String?
    ) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.responseType = responseType
        self.scope = scope
        self.state = state
        self.nonce = nonce
        self.codeChallenge = codeChallenge
        self.codeChallengeMethod = codeChallengeMethod
    }

    package init(reader: JSONReader<Member>) throws(WireFailure) {
        clientID = try reader.string(.clientID)
        redirectURI = try reader.string(.redirectURI)
        responseType = try reader.string(.responseType)
        scope = try reader.optionalString(.scope)
        state = try reader.optionalString(.state)
        nonce = try reader.optionalString(.nonce)
        codeChallenge = try reader.optionalString(.codeChallenge)
        codeChallengeMethod = try reader.optionalString(.codeChallengeMethod)
    }

    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.clientID, clientID)
        object.add(.redirectURI, redirectURI)
        object.add(.responseType, responseType)
        for (member, value) in [
            (Member.scope, scope), (.state, state), (.nonce, nonce), (.codeChallenge, codeChallenge),
            (.codeChallengeMethod, codeChallengeMethod),
        ] {
            if let value { object.add(member, value) }
        }
    }
}

/// `POST /v1/oauth/authorize` response: where to send the user's browser next — the client's
/// redirect URI with `code`, `state` and `iss` (RFC 9207), or with `error`.
package struct OAuthAuthorizeResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "OAuthAuthorizeResponse"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case redirectTo = "redirect_to" }
    /// The URL.
    package let redirectTo: String

    /// Creates the message from its members.
    package init(redirectTo: String) { self.redirectTo = redirectTo }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        redirectTo = try reader.string(.redirectTo)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.redirectTo, redirectTo)
    }
}
