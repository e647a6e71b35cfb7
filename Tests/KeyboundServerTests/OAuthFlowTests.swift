import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The OAuth 2.0 / OpenID Connect provider's flows as a client and a resource server see them:
/// the code flow with PKCE, the tokens and what verifies them, refresh, userinfo, introspection
/// and revocation. The attacks on them are in OAuthAttackTests.
@Suite("OAuth 2.0 and OpenID Connect flows")
struct OAuthFlowTests {
    @Test(arguments: Engine.all) func codeFlowWithPKCEIssuesTokensThatVerifyOffline(engine: Engine)
        async throws
    {
        let oauth = try OAuthFixture(.live, engine: engine)
        let app = try oauth.addClient()
        let (userID, session) = try await oauth.signedInUser("alice")
        let pkce = PKCE()
        let reply = try await oauth.authorize(app.clientID, session: session, pkce: pkce)
        #expect(reply.status == 200, "\(reply.text)")
        let location = try reply.decode(OAuthAuthorizeResponse.self).redirectTo
        #expect(location.hasPrefix("http://127.0.0.1/callback?"))
        let answer = try queryItems(of: location)
        #expect(answer["state"] == "state-1")
        #expect(answer["iss"] == testIssuer)  // RFC 9207
        let code = try #require(answer["code"])

        let exchanged = try await oauth.exchange(code, clientID: app.clientID, pkce: pkce)
        #expect(exchanged.status == 200, "\(exchanged.text)")
        #expect(exchanged.header("cache-control") == "no-store")
        let tokens = try JSON.parse(exchanged.body)
        #expect(tokens[string: "token_type"] == "Bearer")
        #expect(tokens[string: "scope"] == "openid offline_access")
        #expect(tokens[member: "expires_in"]?.integerValue == 900)
        #expect(tokens[string: "refresh_token"] != nil)

        // The access token verifies offline against the published keys, with the claims of RFC 9068.
        let access = try await oauth.verify(try #require(tokens[string: "access_token"]))
        #expect(access.subject == userID)
        #expect(access.clientID == app.clientID)
        #expect(access.scopes == ["openid", "offline_access"])
        #expect(access.authenticationMethods == ["pwd"])
        #expect(access.sessionID != nil)
        #expect(access.boundKeyThumbprint == nil)

        // The ID token: signed by the same keys, for the client, with the nonce and at_hash.
        let idToken = try #require(tokens[string: "id_token"])
        let claims = try JWTVerification.verify(idToken, type: "JWT", keys: try await oauth.keys().keySet)
        #expect(claims[string: "iss"] == testIssuer)
        #expect(claims[string: "aud"] == app.clientID)
        #expect(claims[string: "sub"] == userID)
        #expect(claims[string: "nonce"] == "nonce-1")
        #expect(claims[string: "sid"] == access.sessionID)
        let accessToken = try #require(tokens[string: "access_token"])
        #expect(
            claims[string: "at_hash"] == Base64URL.encode(Digest.sha256(Data(accessToken.utf8)).prefix(16)))

        let user = try await oauth.userinfo(accessToken)
        #expect(user.status == 200, "\(user.text)")
        let info = try JSON.parse(user.body)
        #expect(info[string: "sub"] == userID)
        #expect(info[string: "preferred_username"] == "alice")
    }

    @Test func withoutOfflineAccessNoRefreshTokenAndWithoutOpenIDNoIDToken() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let tokens = try await oauth.tokens(app.clientID, username: "bob", scope: "profile")
        #expect(tokens[string: "access_token"] != nil)
        #expect(tokens[string: "refresh_token"] == nil)
        #expect(tokens[string: "id_token"] == nil)
        // userinfo is for openid tokens (RFC 6750 insufficient_scope).
        let user = try await oauth.userinfo(try #require(tokens[string: "access_token"]))
        #expect(user.status == 403)
        #expect(try JSON.parse(user.body)[string: "error"] == "insufficient_scope")
    }

    @Test(arguments: Engine.all) func refreshRotatesAndReuseEndsTheSession(engine: Engine) async throws {
        let oauth = try OAuthFixture(engine: engine)
        let app = try oauth.addClient()
        let gateway = try oauth.addClient(confidential: true)
        let first = try await oauth.tokens(app.clientID, username: "carol")
        let oldRefresh = try #require(first[string: "refresh_token"])
        let refreshed = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", oldRefresh), ("client_id", app.clientID),
        ])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        let second = try JSON.parse(refreshed.body)
        let newRefresh = try #require(second[string: "refresh_token"])
        #expect(newRefresh != oldRefresh)
        #expect(second[string: "id_token"] != nil)
        let newAccess = try #require(second[string: "access_token"])
        #expect(try await oauth.introspect(newAccess, by: gateway)[member: "active"] == .bool(true))

        // The old refresh token again: refused, and the whole session ends (RFC 9700 §4.14.2).
        let reuse = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", oldRefresh), ("client_id", app.clientID),
        ])
        #expect(reuse.status == 400)
        #expect(try JSON.parse(reuse.body)[string: "error"] == "invalid_grant")
        let afterReuse = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", newRefresh), ("client_id", app.clientID),
        ])
        #expect(try JSON.parse(afterReuse.body)[string: "error"] == "invalid_grant")
        #expect(
            try await oauth.introspect(newAccess, by: gateway)
                == .object([JSONMember("active", .bool(false))]))
        #expect(try await oauth.userinfo(newAccess).status == 401)
    }

    @Test func aRefreshMayNarrowTheScopeButNotWidenIt() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let tokens = try await oauth.tokens(app.clientID, username: "dana")
        let refresh = try #require(tokens[string: "refresh_token"])
        let wider = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", app.clientID),
            ("scope", "openid offline_access profile"),
        ])
        #expect(try JSON.parse(wider.body)[string: "error"] == "invalid_scope")
        let narrower = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", app.clientID),
            ("scope", "openid"),
        ])
        #expect(narrower.status == 200, "\(narrower.text)")
        let narrowed = try JSON.parse(narrower.body)
        #expect(narrowed[string: "scope"] == "openid")
        #expect(try await oauth.verify(try #require(narrowed[string: "access_token"])).scopes == ["openid"])
        // The refresh token keeps the session's scope (RFC 6749 §6): the next refresh may have it all again.
        let again = try await oauth.token([
            ("grant_type", "refresh_token"),
            ("refresh_token", try #require(narrowed[string: "refresh_token"])),
            ("client_id", app.clientID),
        ])
        #expect(try JSON.parse(again.body)[string: "scope"] == "openid offline_access", "\(again.text)")
    }

    @Test(arguments: Engine.all) func introspectionSeesEveryKindOfTokenAndRevocationAtOnce(engine: Engine)
        async throws
    {
        let oauth = try OAuthFixture(engine: engine)
        let app = try oauth.addClient()
        let gateway = try oauth.addClient(confidential: true)
        let tokens = try await oauth.tokens(app.clientID, username: "erin")
        let access = try #require(tokens[string: "access_token"])
        let refresh = try #require(tokens[string: "refresh_token"])
        let jwt = try await oauth.introspect(access, by: gateway)
        #expect(jwt[member: "active"] == .bool(true))
        #expect(jwt[string: "client_id"] == app.clientID)
        #expect(jwt[string: "username"] == "erin")
        #expect(jwt[string: "token_type"] == "Bearer")
        #expect(jwt[string: "iss"] == testIssuer)
        let opaque = try await oauth.introspect(refresh, by: gateway)
        #expect(opaque[member: "active"] == .bool(true))
        #expect(opaque[member: "token_type"] == nil)
        // A /v1 session's opaque access token too.
        let v1 = try await oauth.client.login("erin")
        let v1Answer = try await oauth.introspect(v1.accessToken, by: gateway)
        #expect(v1Answer[member: "active"] == .bool(true))
        // No client_id: a /v1 session was issued to no OAuth client ("app-1" is the app's own name).
        #expect(v1Answer[member: "client_id"] == nil)
        #expect(v1Answer[string: "username"] == "erin")
        #expect(v1Answer[string: "token_type"] == "Bearer")
        // Unknown and random tokens: inactive, nothing else said.
        for token in ["x", String(repeating: "a", count: 43), access + "x"] {
            #expect(
                try await oauth.introspect(token, by: gateway)
                    == .object([JSONMember("active", .bool(false))]))
        }

        // The client revokes its refresh token (RFC 7009): the session ends, both tokens at once.
        let revoked = try await oauth.post(
            OAuthPaths.revoke, [("token", refresh), ("client_id", app.clientID)])
        #expect(revoked.status == 200, "\(revoked.text)")
        #expect(try await oauth.introspect(access, by: gateway)[member: "active"] == .bool(false))
        #expect(try await oauth.introspect(refresh, by: gateway)[member: "active"] == .bool(false))
        #expect(try await oauth.userinfo(access).status == 401)
        // The /v1 session is another session: untouched.
        #expect(try await oauth.introspect(v1.accessToken, by: gateway)[member: "active"] == .bool(true))
    }

    @Test func revokingAnAccessTokenEndsItsSessionAndUnknownTokensAre200() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let tokens = try await oauth.tokens(app.clientID, username: "fay")
        let access = try #require(tokens[string: "access_token"])
        for token in ["unknown-token-unknown-token", access] {
            let reply = try await oauth.post(
                OAuthPaths.revoke, [("token", token), ("client_id", app.clientID)])
            #expect(reply.status == 200, "\(reply.text)")
        }
        let refresh = try #require(tokens[string: "refresh_token"])
        let refreshed = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", app.clientID),
        ])
        #expect(try JSON.parse(refreshed.body)[string: "error"] == "invalid_grant")
    }

    @Test func discoveryDocumentsNameTheEndpointsAndTheJWKSTheSigningKey() async throws {
        let oauth = try OAuthFixture()
        for path in [OAuthPaths.openIDConfiguration, OAuthPaths.authorizationServer] {
            let reply = try await oauth.client.send("GET", path)
            #expect(reply.status == 200)
            let metadata = try JSON.parse(reply.body)
            #expect(metadata[string: "issuer"] == testIssuer)
            #expect(metadata[string: "token_endpoint"] == testIssuer + OAuthPaths.token)
            #expect(metadata[string: "jwks_uri"] == testIssuer + OAuthPaths.jwks)
            #expect(metadata[member: "code_challenge_methods_supported"] == .array([.string("S256")]))
            #expect(metadata[member: "authorization_response_iss_parameter_supported"] == .bool(true))
        }
        let keys = try await oauth.keys()
        #expect(keys.keyIDs.count == 1)
        let jwks = try JSON.parse(try await oauth.client.send("GET", OAuthPaths.jwks).body)
        guard case .array(let list)? = jwks[member: "keys"], let key = list.first else {
            throw TestFailure("no keys")
        }
        #expect(key[string: "alg"] == "ES256")
        #expect(key[string: "use"] == "sig")
        // kid is the RFC 7638 thumbprint of the key.
        #expect(key[string: "kid"] == (try ECPublicJWK(json: key)).thumbprint)
        #expect(key[member: "d"] == nil)
    }

    @Test func withoutAnIssuerTheProviderIsOff() async throws {
        let test = try TestServer(.inProcess)
        for (method, path) in [
            ("GET", OAuthPaths.openIDConfiguration), ("GET", OAuthPaths.jwks), ("GET", OAuthPaths.authorize),
            ("POST", OAuthPaths.token),
        ] {
            let reply = try await test.client.send(method, path, checkSpec: false)
            #expect(reply.status == 404, "\(method) \(path)")
            #expect(reply.problem?.code == .notFound)
        }
    }

    @Test func loopbackRedirectURIsMatchAnyPortAndOthersMatchExactly() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient(redirectURIs: [
            "http://127.0.0.1/callback", "https://app.example.com/cb", "com.example.app:/oauth",
        ])
        let (_, session) = try await oauth.signedInUser("gus")
        for (uri, allowed) in [
            ("http://127.0.0.1:53111/callback", true), ("http://127.0.0.1/callback", true),
            ("com.example.app:/oauth", true), ("https://app.example.com/cb", true),
            ("http://127.0.0.1:53111/other", false), ("https://app.example.com/cb/", false),
            ("https://app.example.com:8443/cb", false), ("https://APP.example.com/cb", false),
            ("com.example.app:/oauth2", false), ("http://localhost:53111/callback", false),
        ] {
            let reply = try await oauth.authorize(
                app.clientID, session: session, redirectURI: uri, pkce: PKCE())
            #expect(reply.status == (allowed ? 200 : 400), "\(uri): \(reply.text)")
        }
    }

    @Test func anAppsSessionsDoNotReplaceEachOtherNorTheUsersV1Sessions() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let (_, session) = try await oauth.signedInUser("ivy")
        // Two browsers of one web app, and a /v1 login whose client_id is the app's id.
        var accessTokens: [String] = []
        for _ in 0..<2 {
            let pkce = PKCE()
            let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
            let tokens = try JSON.parse(
                try await oauth.exchange(code, clientID: app.clientID, pkce: pkce).body)
            accessTokens.append(try #require(tokens[string: "access_token"]))
        }
        _ = try await oauth.client.login("ivy", clientID: app.clientID)
        for token in accessTokens { #expect(try await oauth.userinfo(token).status == 200) }
        #expect(try await oauth.client.send(API.me, token: session).status == 200)
    }

    @Test func theAuthorizationEndpointTakesAFormToo() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let pkce = PKCE()
        let parameters = [
            ("client_id", app.clientID), ("redirect_uri", "http://127.0.0.1/callback"),
            ("response_type", "code"),
            ("scope", "openid"), ("state", "s1"), ("code_challenge", pkce.challenge),
            ("code_challenge_method", "S256"),
            ("ui_locales", ""),  // without a value: as if left out
        ]
        let reply = try await oauth.post(OAuthPaths.authorize, parameters)
        #expect(reply.status == 303)
        let location = try #require(reply.header("location"))
        #expect(location == OAuthPaths.authorize + "?" + OAuthParameters.encode(Array(parameters.dropLast())))
        #expect(try await oauth.client.send("GET", location).status == 200)
        let misdirected = try await oauth.post(
            OAuthPaths.authorize, parameters.map { $0.0 == "client_id" ? ($0.0, "cli_unknown") : $0 })
        #expect(misdirected.status == 400)
        #expect(misdirected.header("location") == nil)
    }

    @Test func theCodeNeedsARecentSignIn() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let (_, session) = try await oauth.signedInUser("hal")
        oauth.test.clock.advance(by: 301)
        let reply = try await oauth.authorize(app.clientID, session: session, pkce: PKCE())
        #expect(reply.status == 403)
        #expect(reply.problem?.code == .stepUpRequired)
    }
}
