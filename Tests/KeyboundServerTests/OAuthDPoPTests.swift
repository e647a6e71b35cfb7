import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// DPoP (RFC 9449) at the OAuth provider: a token request with a proof gets a token bound to the
/// proof's key (`cnf.jkt`), which userinfo accepts only with a fresh proof by that key; a public
/// client's refresh needs the same key; the server's nonce is asked for; proofs are single use.
@Suite("OAuth with DPoP")
struct OAuthDPoPTests {
    /// The server's current nonce (any answer to a request with a `DPoP` header carries it).
    private func nonce(_ oauth: OAuthFixture) async throws -> String {
        let reply = try await oauth.client.send("GET", OAuthPaths.jwks, headers: ["DPoP": "x"])
        return try #require(reply.header("DPoP-Nonce"))
    }

    private func tokenProof(_ oauth: OAuthFixture, _ key: DPoPTestKey, nonce: String? = nil) async throws
        -> String
    {
        let nonce = if let nonce { nonce } else { try await self.nonce(oauth) }
        return try key.proof("POST", testIssuer + OAuthPaths.token, at: oauth.test.clock.now, nonce: nonce)
    }

    /// `GET /oauth/userinfo` presenting `token` as `scheme`, with `proof`.
    private func userinfo(_ oauth: OAuthFixture, _ token: String, scheme: String = "DPoP", proof: String?)
        async throws -> Reply
    {
        var headers = ["Authorization": "\(scheme) \(token)"]
        headers["DPoP"] = proof
        return try await oauth.client.send("GET", OAuthPaths.userinfo, headers: headers)
    }

    private func userinfoProof(_ oauth: OAuthFixture, _ key: DPoPTestKey, _ token: String) async throws
        -> String
    {
        try key.proof(
            "GET", testIssuer + OAuthPaths.userinfo, at: oauth.test.clock.now, nonce: try await nonce(oauth),
            accessToken: token)
    }

    /// The form of a public client's code exchange.
    private func exchangeForm(_ code: String, _ pkce: PKCE, _ clientID: String) -> [(String, String)] {
        [
            ("grant_type", "authorization_code"), ("code", code),
            ("redirect_uri", "http://127.0.0.1/callback"),
            ("code_verifier", pkce.verifier), ("client_id", clientID),
        ]
    }

    /// A code exchange by a public client with `proof`.
    private func boundTokens(_ oauth: OAuthFixture, _ clientID: String, _ key: DPoPTestKey, username: String)
        async throws -> JSONValue
    {
        let (_, session) = try await oauth.signedInUser(username)
        let pkce = PKCE()
        let code = try await oauth.code(clientID, session: session, pkce: pkce)
        let reply = try await oauth.token(
            exchangeForm(code, pkce, clientID), headers: ["DPoP": try await tokenProof(oauth, key)])
        #expect(reply.status == 200, "\(reply.text)")
        return try JSON.parse(reply.body)
    }

    @Test(arguments: Engine.all) func aBoundTokenWorksOnlyWithAFreshProofByItsKey(engine: Engine) async throws
    {
        let oauth = try OAuthFixture(.live, engine: engine)
        let app = try oauth.addClient()
        let gateway = try oauth.addClient(confidential: true)
        let key = try DPoPTestKey()
        let tokens = try await boundTokens(oauth, app.clientID, key, username: "alice")
        #expect(tokens[string: "token_type"] == "DPoP")
        let access = try #require(tokens[string: "access_token"])
        #expect(try await oauth.verify(access).boundKeyThumbprint == key.thumbprint)
        let introspected = try await oauth.introspect(access, by: gateway)
        #expect(introspected[string: "token_type"] == "DPoP")
        #expect(introspected[member: "cnf"]?[string: "jkt"] == key.thumbprint)

        // As Bearer, or as DPoP without a proof, with another key's proof, or a proof used before.
        let asBearer = try await userinfo(oauth, access, scheme: "Bearer", proof: nil)
        #expect(asBearer.status == 401)
        #expect(asBearer.header("www-authenticate")?.hasPrefix("DPoP") == true)
        #expect(try await userinfo(oauth, access, proof: nil).status == 401)
        let stranger = try DPoPTestKey()
        let foreign = try await userinfo(
            oauth, access, proof: try await userinfoProof(oauth, stranger, access))
        #expect(foreign.status == 401)
        #expect(try JSON.parse(foreign.body)[string: "error"] == "invalid_dpop_proof")
        let proof = try await userinfoProof(oauth, key, access)
        #expect(try await userinfo(oauth, access, proof: proof).status == 200)
        let replayed = try await userinfo(oauth, access, proof: proof)
        #expect(replayed.status == 401)
        #expect(try JSON.parse(replayed.body)[string: "error"] == "invalid_dpop_proof")
        // A proof for another token (ath) or another URI.
        let otherURI = try key.proof(
            "GET", testIssuer + OAuthPaths.jwks, at: oauth.test.clock.now, nonce: try await nonce(oauth),
            accessToken: access)
        #expect(try await userinfo(oauth, access, proof: otherURI).status == 401)
        let otherToken = try key.proof(
            "GET", testIssuer + OAuthPaths.userinfo, at: oauth.test.clock.now, nonce: try await nonce(oauth),
            accessToken: access + "x")
        #expect(try await userinfo(oauth, access, proof: otherToken).status == 401)
    }

    @Test func aPublicClientsRefreshNeedsTheSameKeyAndARefusalBurnsNothing() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let key = try DPoPTestKey()
        let tokens = try await boundTokens(oauth, app.clientID, key, username: "bob")
        let refresh = try #require(tokens[string: "refresh_token"])
        let grant = [
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", app.clientID),
        ]
        // A thief with the refresh token and without the key: refused, and the session goes on.
        let noProof = try await oauth.token(grant)
        #expect(noProof.status == 400)
        #expect(try JSON.parse(noProof.body)[string: "error"] == "invalid_dpop_proof")
        let otherKey = try await oauth.token(
            grant, headers: ["DPoP": try await tokenProof(oauth, try DPoPTestKey())])
        #expect(try JSON.parse(otherKey.body)[string: "error"] == "invalid_dpop_proof")
        let owner = try await oauth.token(grant, headers: ["DPoP": try await tokenProof(oauth, key)])
        #expect(owner.status == 200, "\(owner.text)")
        let refreshed = try JSON.parse(owner.body)
        #expect(refreshed[string: "token_type"] == "DPoP")
        #expect(
            try await oauth.verify(try #require(refreshed[string: "access_token"])).boundKeyThumbprint
                == key.thumbprint)
    }

    @Test func theServersNonceIsAskedFor() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let key = try DPoPTestKey()
        let (_, session) = try await oauth.signedInUser("carol")
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
        let exchange = exchangeForm(code, pkce, app.clientID)
        // Without the nonce: use_dpop_nonce, with the nonce to use (RFC 9449 §8).
        let withoutNonce = try key.proof(
            "POST", testIssuer + OAuthPaths.token, at: oauth.test.clock.now, nonce: nil)
        let asked = try await oauth.token(exchange, headers: ["DPoP": withoutNonce])
        #expect(asked.status == 400)
        #expect(try JSON.parse(asked.body)[string: "error"] == "use_dpop_nonce")
        let nonce = try #require(asked.header("DPoP-Nonce"))
        let proof = try await tokenProof(oauth, key, nonce: nonce)
        let bound = try await oauth.token(exchange, headers: ["DPoP": proof])
        #expect(bound.status == 200, "\(bound.text)")
        #expect(try JSON.parse(bound.body)[string: "token_type"] == "DPoP")
    }

    @Test func aReplayedProofAtTheTokenEndpointLeavesTheCodeUnused() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let key = try DPoPTestKey()
        _ = try await boundTokens(oauth, app.clientID, key, username: "dana")
        let (_, session) = try await oauth.signedInUser("erin")
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
        let exchange = exchangeForm(code, pkce, app.clientID)
        let proof = try await tokenProof(oauth, key)
        let first = try await oauth.token(exchange, headers: ["DPoP": proof])
        #expect(first.status == 200)
        let secondCode = try await oauth.code(app.clientID, session: session, pkce: pkce)
        let replay = try await oauth.token(
            exchange.map { $0.0 == "code" ? ("code", secondCode) : $0 }, headers: ["DPoP": proof])
        #expect(replay.status == 400)
        #expect(try JSON.parse(replay.body)[string: "error"] == "invalid_dpop_proof")
        let fresh = try await oauth.token(
            exchange.map { $0.0 == "code" ? ("code", secondCode) : $0 },
            headers: ["DPoP": try await tokenProof(oauth, key)])
        #expect(fresh.status == 200, "\(fresh.text)")
    }

    @Test func confidentialClientsBindEachAccessTokenAndRequiredMeansRequired() async throws {
        let oauth = try OAuthFixture()
        let web = try oauth.addClient(confidential: true)
        let strict = try oauth.addClient(dpopRequired: true)
        let (_, session) = try await oauth.signedInUser("fay")
        let pkce = PKCE()
        let code = try await oauth.code(web.clientID, session: session, pkce: pkce)
        let exchanged = try await oauth.token(
            [
                ("grant_type", "authorization_code"), ("code", code),
                ("redirect_uri", "http://127.0.0.1/callback"),
                ("code_verifier", pkce.verifier),
            ], headers: basic(web))
        #expect(exchanged.status == 200, "\(exchanged.text)")
        let refresh = try #require(try JSON.parse(exchanged.body)[string: "refresh_token"])
        // Its refresh token is bound to its secret; a refresh with a proof binds that access token.
        let key = try DPoPTestKey()
        var headers = basic(web)
        headers["DPoP"] = try await tokenProof(oauth, key)
        let refreshed = try await oauth.token(
            [("grant_type", "refresh_token"), ("refresh_token", refresh)], headers: headers)
        #expect(refreshed.status == 200, "\(refreshed.text)")
        let access = try #require(try JSON.parse(refreshed.body)[string: "access_token"])
        #expect(try await oauth.verify(access).boundKeyThumbprint == key.thumbprint)
        // Introspection names the token's own key (its session is not bound), and the first
        // access token, made without a proof, stays a bearer token.
        let introspected = try await oauth.introspect(access, by: web)
        #expect(introspected[string: "token_type"] == "DPoP")
        #expect(introspected[member: "cnf"]?[string: "jkt"] == key.thumbprint)
        let first = try #require(try JSON.parse(exchanged.body)[string: "access_token"])
        let unbound = try await oauth.introspect(first, by: web)
        #expect(unbound[string: "token_type"] == "Bearer")
        #expect(unbound[member: "cnf"] == nil)

        // A client registered with --dpop-required gets nothing without a proof.
        let strictCode = try await oauth.code(strict.clientID, session: session, pkce: pkce)
        let refused = try await oauth.exchange(strictCode, clientID: strict.clientID, pkce: pkce)
        #expect(refused.status == 400)
        #expect(try JSON.parse(refused.body)[string: "error"] == "invalid_dpop_proof")
    }
}
