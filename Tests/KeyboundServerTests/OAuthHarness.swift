import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The issuer the OAuth tests configure (the tests never fetch it: they reach the server
/// through their ``Client``).
let testIssuer = "http://127.0.0.1:8420"

/// A PKCE pair (RFC 7636): a verifier and its S256 challenge.
struct PKCE {
    let verifier: String
    let challenge: String

    init() {
        verifier = Base64URL.encode(SecureRandom.bytes(32))
        challenge = Base64URL.encode(Digest.sha256(Data(verifier.utf8)))
    }
}

/// A redirect's query, decoded.
func queryItems(of location: String) throws -> [String: String] {
    let items = try #require(URLComponents(string: location)?.queryItems, "no query in \(location)")
    return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
}

/// Form encoding, as an OAuth client library writes a token request.
func form(_ pairs: [(String, String)]) -> Data {
    Data(OAuthParameters.encode(pairs).utf8)
}

/// A test server with the provider on, and what the OAuth tests do with it.
struct OAuthFixture {
    let test: TestServer
    let administration: ProviderAdministration
    var client: Client { test.client }

    init(
        _ transport: Transport = .inProcess, engine: Engine = .sqlite, instances: Int = 1,
        _ adjust: @escaping (inout Configuration) -> Void = { _ in }
    ) throws {
        let configure: (inout Configuration) -> Void = { configuration in
            configuration.issuer = testIssuer
            adjust(&configuration)
        }
        test = try TestServer(transport, engine: engine, instances: instances, configure)
        var configuration = test.database.configuration
        configuration.clock = test.clock.serverClock
        configuration.log = .discard
        configure(&configuration)
        administration = try ProviderAdministration(configuration: configuration)
    }

    /// Registers a client.
    func addClient(
        redirectURIs: [String] = ["http://127.0.0.1/callback"], confidential: Bool = false, jwks: Data? = nil,
        scopes: [String] = [], dpopRequired: Bool = false
    ) throws -> OAuthClientInfo {
        var registration = OAuthClientRegistration(name: "Test app", redirectURIs: redirectURIs)
        registration.confidential = confidential
        registration.jwks = jwks
        registration.scopes = scopes
        registration.dpopRequired = dpopRequired
        return try administration.addClient(registration)
    }

    /// An account with a fresh password session: its access token.
    func signedInUser(_ username: String) async throws -> (userID: String, accessToken: String) {
        let userID = try await client.createAccount(username)
        return (userID, try await client.login(username).accessToken)
    }

    /// `POST /v1/oauth/authorize` for `session`: the raw reply.
    func authorize(
        _ clientID: String, session: String, redirectURI: String = "http://127.0.0.1/callback",
        scope: String = "openid offline_access", state: String? = "state-1", nonce: String? = "nonce-1",
        pkce: PKCE?
    ) async throws -> Reply {
        try await client.send(
            API.oauthAuthorize,
            OAuthAuthorizeRequest(
                clientID: clientID, redirectURI: redirectURI, responseType: "code", scope: scope,
                state: state,
                nonce: nonce, codeChallenge: pkce?.challenge, codeChallengeMethod: pkce.map { _ in "S256" }),
            token: session)
    }

    /// A code for `clientID`, issued to `session`'s user.
    func code(
        _ clientID: String, session: String, redirectURI: String = "http://127.0.0.1/callback",
        scope: String = "openid offline_access", pkce: PKCE
    ) async throws -> String {
        let reply = try await authorize(
            clientID, session: session, redirectURI: redirectURI, scope: scope, pkce: pkce)
        #expect(reply.status == 200, "\(reply.text)")
        let answer = try queryItems(of: try reply.decode(OAuthAuthorizeResponse.self).redirectTo)
        return try #require(answer["code"], "no code in \(answer)")
    }

    /// `POST /oauth/token` with `pairs`, form-encoded.
    func token(_ pairs: [(String, String)], headers: [String: String] = [:]) async throws -> Reply {
        try await client.send(
            "POST", OAuthPaths.token, body: form(pairs), contentType: "application/x-www-form-urlencoded",
            headers: headers)
    }

    /// A POST of `pairs` to one of the provider's form endpoints.
    func post(_ path: String, _ pairs: [(String, String)], headers: [String: String] = [:]) async throws
        -> Reply
    {
        try await client.send(
            "POST", path, body: form(pairs), contentType: "application/x-www-form-urlencoded",
            headers: headers)
    }

    /// The code exchange of a public client.
    func exchange(
        _ code: String, clientID: String, pkce: PKCE, redirectURI: String = "http://127.0.0.1/callback"
    ) async throws -> Reply {
        try await token([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
            ("code_verifier", pkce.verifier), ("client_id", clientID),
        ])
    }

    /// The whole flow for a public client: tokens for a new user.
    func tokens(_ clientID: String, username: String, scope: String = "openid offline_access") async throws
        -> JSONValue
    {
        let (_, session) = try await signedInUser(username)
        let pkce = PKCE()
        let code = try await code(clientID, session: session, scope: scope, pkce: pkce)
        let reply = try await exchange(code, clientID: clientID, pkce: pkce)
        #expect(reply.status == 200, "\(reply.text)")
        return try JSON.parse(reply.body)
    }

    /// The published JWK Set.
    func keys() async throws -> JWKS {
        let reply = try await client.send("GET", OAuthPaths.jwks)
        #expect(reply.status == 200)
        return try JWKS(json: reply.body)
    }

    /// Verifies an access token offline against the JWK Set, as a resource server would, and
    /// returns its claims, bound to a DPoP key or not (a resource server would want the proof of
    /// a bound one: `AccessTokenVerifier.verify(_:dpopProof:method:uri:at:)`).
    func verify(_ accessToken: String) async throws -> AccessToken {
        try AccessTokenVerifier(issuer: testIssuer, audience: testIssuer, keys: try await keys(), leeway: 0)
            .claims(of: accessToken, at: test.clock.now)
    }

    /// `GET /oauth/userinfo` with `accessToken` as a bearer token.
    func userinfo(_ accessToken: String) async throws -> Reply {
        try await client.send("GET", OAuthPaths.userinfo, headers: ["Authorization": "Bearer \(accessToken)"])
    }

    /// `POST /oauth/introspect` by a confidential client (HTTP Basic).
    func introspect(_ token: String, by client: OAuthClientInfo) async throws -> JSONValue {
        let reply = try await post(OAuthPaths.introspect, [("token", token)], headers: basic(client))
        #expect(reply.status == 200, "\(reply.text)")
        return try JSON.parse(reply.body)
    }
}

/// `Authorization: Basic` for a client with a secret (RFC 6749 §2.3.1: each part form-encoded).
func basic(_ client: OAuthClientInfo, secret: String? = nil) -> [String: String] {
    let credentials =
        OAuthParameters.encode([("", client.clientID)]).dropFirst() + ":"
        + OAuthParameters.encode([("", secret ?? client.secret ?? "")]).dropFirst()
    return ["Authorization": "Basic " + Data(credentials.utf8).base64EncodedString()]
}

extension JSONValue {
    /// A string member, for assertions.
    subscript(string name: String) -> String? { self[member: name]?.stringValue }
}
