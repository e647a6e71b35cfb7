import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The OAuth provider as an attacker tries it: leaked and replayed codes, guessed verifiers,
/// redirects to URIs nobody registered, forged tokens, another client's tokens and credentials.
@Suite("OAuth 2.0 and OpenID Connect attacks")
struct OAuthAttackTests {
    private func error(of reply: Reply) throws -> String? {
        #expect(reply.header("content-type") == "application/json", "\(reply.text)")
        let body = try JSON.parse(reply.body)
        #expect(body[string: "error_description"] != nil)
        return body[string: "error"]
    }

    @Test(arguments: Engine.all) func aCodeUsedTwiceFailsAndEndsWhatItsFirstUseOpened(engine: Engine)
        async throws
    {
        let oauth = try OAuthFixture(engine: engine)
        let app = try oauth.addClient()
        let (userID, session) = try await oauth.signedInUser("alice")
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
        let first = try JSON.parse(try await oauth.exchange(code, clientID: app.clientID, pkce: pkce).body)
        let access = try #require(first[string: "access_token"])
        #expect(try await oauth.userinfo(access).status == 200)

        let second = try await oauth.exchange(code, clientID: app.clientID, pkce: pkce)
        #expect(second.status == 400)
        #expect(try error(of: second) == "invalid_grant")
        #expect(try await oauth.userinfo(access).status == 401)
        let refresh = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", try #require(first[string: "refresh_token"])),
            ("client_id", app.clientID),
        ])
        #expect(try error(of: refresh) == "invalid_grant")
        let events = try await oauth.client.send(API.audit, token: session).decode(AuditListResponse.self)
            .events
        #expect(events.contains { $0.type == .oauthCodeReuse && $0.userID == userID })
    }

    @Test func codesArePurgedAnHourAfterTheyExpireNotBefore() throws {
        let app = try InProcessApplication(.sqlite) { $0.issuer = testIssuer }
        let client = try app.application.addClient(
            OAuthClientRegistration(name: "App", redirectURIs: ["http://127.0.0.1/callback"]))
        try app.createAccount("alice")
        let session = try TokenResponse(jsonData: app.login("alice", Client.password).body)
        let pkce = PKCE()
        let reply = app.send(
            API.oauthAuthorize,
            OAuthAuthorizeRequest(
                clientID: client.clientID, redirectURI: "http://127.0.0.1/callback", responseType: "code",
                scope: "openid", state: nil, nonce: nil, codeChallenge: pkce.challenge,
                codeChallengeMethod: "S256"),
            token: session.accessToken)
        #expect(reply.status == 200)
        // Until an hour after its minute is over, a second use can still be told from a first.
        app.clock.advance(by: 60 + 3600 - 1)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM oauth_codes") == 1)
        app.clock.advance(by: 2)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM oauth_codes") == 0)
    }

    @Test(arguments: Engine.all) func concurrentExchangesOfOneCodeIssueTokensOnce(engine: Engine) async throws
    {
        let oauth = try OAuthFixture(.live, engine: engine)
        let app = try oauth.addClient()
        let (_, session) = try await oauth.signedInUser("bob")
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try await oauth.exchange(code, clientID: app.clientID, pkce: pkce).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
        #expect(statuses.filter { $0 == 400 }.count == 7, "\(statuses)")
    }

    @Test func theCodeIsBoundToItsVerifierRedirectURIClientAndMinute() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient(redirectURIs: [
            "http://127.0.0.1/callback", "https://app.example.com/cb",
        ])
        let other = try oauth.addClient()
        let (_, session) = try await oauth.signedInUser("carol")
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
        // A guessed verifier, another redirect URI, another client: refused, the code still unused.
        #expect(
            try error(of: try await oauth.exchange(code, clientID: app.clientID, pkce: PKCE()))
                == "invalid_grant")
        let wrongURI = try await oauth.exchange(
            code, clientID: app.clientID, pkce: pkce, redirectURI: "https://app.example.com/cb")
        #expect(try error(of: wrongURI) == "invalid_grant")
        #expect(
            try error(of: try await oauth.exchange(code, clientID: other.clientID, pkce: pkce))
                == "invalid_grant")
        for verifier in ["short", String(repeating: "a", count: 129), String(repeating: "é", count: 43)] {
            let reply = try await oauth.token([
                ("grant_type", "authorization_code"), ("code", code),
                ("redirect_uri", "http://127.0.0.1/callback"),
                ("code_verifier", verifier), ("client_id", app.clientID),
            ])
            #expect(try error(of: reply) == "invalid_grant")
        }
        #expect(try await oauth.exchange(code, clientID: app.clientID, pkce: pkce).status == 200)

        // A code lives a minute.
        let late = try await oauth.code(app.clientID, session: session, pkce: pkce)
        oauth.test.clock.advance(by: 61)
        #expect(
            try error(of: try await oauth.exchange(late, clientID: app.clientID, pkce: pkce))
                == "invalid_grant")
    }

    @Test func anUnregisteredRedirectURIOrClientGetsAPageNeverARedirect() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let pkce = PKCE()
        func authorizeURL(_ parameters: [(String, String)]) -> String {
            OAuthPaths.authorize + "?" + OAuthParameters.encode(parameters)
        }
        let valid = [
            ("client_id", app.clientID), ("redirect_uri", "http://127.0.0.1/callback"),
            ("response_type", "code"),
            ("scope", "openid"), ("state", "s1"), ("code_challenge", pkce.challenge),
            ("code_challenge_method", "S256"),
        ]
        let page = try await oauth.client.send("GET", authorizeURL(valid))
        #expect(page.status == 200)
        #expect(page.header("content-type")?.hasPrefix("text/html") == true)

        for misdirected in [
            valid.map { $0.0 == "redirect_uri" ? ($0.0, "https://attacker.example/cb") : $0 },
            valid.map { $0.0 == "client_id" ? ($0.0, "cli_unknown") : $0 },
            valid + [("redirect_uri", "http://127.0.0.1/callback")],  // given twice
            valid.filter { $0.0 != "redirect_uri" },
        ] {
            let reply = try await oauth.client.send("GET", authorizeURL(misdirected))
            #expect(reply.status == 400, "\(misdirected)")
            #expect(reply.header("location") == nil)
            #expect(reply.header("content-type")?.hasPrefix("text/html") == true)
        }
        // The same through the API the page calls: 400, and no redirect_to.
        let (_, session) = try await oauth.signedInUser("dave")
        let api = try await oauth.authorize(
            app.clientID, session: session, redirectURI: "https://attacker.example/cb", pkce: pkce)
        #expect(api.status == 400)
        #expect(api.problem?.code == .unregisteredRedirectURI)
        let unknown = try await oauth.authorize("cli_unknown", session: session, pkce: pkce)
        #expect(unknown.problem?.code == .unknownClient)

        // Other errors go back to the client, with state and iss (RFC 6749 §4.1.2.1, RFC 9207).
        for (parameters, expected) in [
            (valid.filter { $0.0 != "code_challenge" }, "invalid_request"),
            (valid.map { $0.0 == "code_challenge_method" ? ($0.0, "plain") : $0 }, "invalid_request"),
            (valid.map { $0.0 == "response_type" ? ($0.0, "token") : $0 }, "unsupported_response_type"),
            (valid.map { $0.0 == "scope" ? ($0.0, "openid admin") : $0 }, "invalid_scope"),
            (valid + [("scope", "profile")], "invalid_request"),
            (valid + [("prompt", "none")], "login_required"),
        ] {
            let reply = try await oauth.client.send("GET", authorizeURL(parameters))
            #expect(reply.status == 302, "\(parameters)")
            let location = try #require(reply.header("location"))
            #expect(location.hasPrefix("http://127.0.0.1/callback?"))
            let answer = try queryItems(of: location)
            #expect(answer["error"] == expected, "\(parameters)")
            #expect(answer["state"] == "s1")
            #expect(answer["iss"] == testIssuer)
            #expect(answer["code"] == nil)
        }
    }

    @Test func forgedAccessTokensAreRefused() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let gateway = try oauth.addClient(confidential: true)
        let tokens = try await oauth.tokens(app.clientID, username: "erin")
        let genuine = try #require(tokens[string: "access_token"])
        let jws = try CompactJWS(genuine)
        let payload = Base64URL.encode(jws.payload)
        let kid = try #require(jws.keyID)
        let publicJWK = try #require(try await oauth.keys().keySet.key(id: kid))
        func header(_ members: [JSONMember]) -> String { Base64URL.encode(JSON.serialize(.object(members))) }

        // alg none, without a signature.
        let none =
            header([JSONMember("alg", .string("none")), JSONMember("typ", .string("at+jwt"))]) + "." + payload
            + "."
        // HS256, keyed with the public key as a verifier that trusts the header might use it.
        let hsHeader = header([
            JSONMember("alg", .string("HS256")), JSONMember("typ", .string("at+jwt")),
            JSONMember("kid", .string(kid)),
        ])
        var forgeries = [none]
        for secret in [JSON.serialize(publicJWK.json), publicJWK.x963] {
            let mac = try HMACSHA256.authenticationCode(
                for: Data((hsHeader + "." + payload).utf8), key: secret)
            forgeries.append(hsHeader + "." + payload + "." + Base64URL.encode(mac))
        }
        // ES256 with the real kid, signed by another key.
        let stranger = try P256SigningKey()
        forgeries.append(
            try ES256.sign(
                header: .object([
                    JSONMember("alg", .string("ES256")), JSONMember("typ", .string("at+jwt")),
                    JSONMember("kid", .string(kid)),
                ]), payload: jws.payload, with: stranger))
        // The genuine token with its claims changed (another user).
        var claims = try jws.claims()
        if case .object(var members) = claims {
            members = members.map { $0.name == "sub" ? JSONMember("sub", .string("usr_someoneelse")) : $0 }
            claims = .object(members)
        }
        let parts = genuine.split(separator: ".")
        forgeries.append("\(parts[0]).\(Base64URL.encode(JSON.serialize(claims))).\(parts[2])")
        // The ID token, which the same keys sign, is no access token (typ JWT, aud the client).
        forgeries.append(try #require(tokens[string: "id_token"]))

        for forgery in forgeries {
            let reply = try await oauth.userinfo(forgery)
            #expect(reply.status == 401, "\(forgery)")
            #expect(try error(of: reply) == "invalid_token")
            #expect(reply.header("www-authenticate")?.hasPrefix("Bearer") == true)
            #expect(try await oauth.introspect(forgery, by: gateway)[member: "active"] == .bool(false))
            #expect(throws: VerificationError.self) {
                _ = try AccessTokenVerifier(
                    issuer: testIssuer, audience: testIssuer, keys: JWKS(JWKSet(keys: [publicJWK])), leeway: 0
                ).verify(forgery, at: oauth.test.clock.now)
            }
        }
        #expect(try await oauth.userinfo(genuine).status == 200)
    }

    @Test func oneClientCannotUseAnothersTokensOrCredentials() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let rival = try oauth.addClient()
        let confidential = try oauth.addClient(confidential: true)
        let tokens = try await oauth.tokens(app.clientID, username: "fay")
        let refresh = try #require(tokens[string: "refresh_token"])
        let access = try #require(tokens[string: "access_token"])
        // The rival presents app's refresh token: refused, and app's session goes on.
        let stolen = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", rival.clientID),
        ])
        #expect(try error(of: stolen) == "invalid_grant")
        // ... and revokes it: nothing happens (RFC 7009 §2.1: the token was not issued to it).
        let revoked = try await oauth.post(
            OAuthPaths.revoke, [("token", access), ("client_id", rival.clientID)])
        #expect(revoked.status == 200)
        #expect(try await oauth.introspect(access, by: confidential)[member: "active"] == .bool(true))
        // /v1 takes neither the OAuth refresh token nor the JWT.
        let v1Refresh = try await oauth.client.send(API.refresh, RefreshRequest(refreshToken: refresh))
        #expect(v1Refresh.status == 401)
        #expect(try await oauth.client.send(API.me, token: access).status == 401)
        let refreshed = try await oauth.token([
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", app.clientID),
        ])
        #expect(refreshed.status == 200, "\(refreshed.text)")

        // A confidential client must authenticate: its bare id, a wrong secret, two methods.
        let bare = try await oauth.post(
            OAuthPaths.introspect, [("token", access), ("client_id", confidential.clientID)])
        #expect(bare.status == 401)
        #expect(try error(of: bare) == "invalid_client")
        let wrong = try await oauth.post(
            OAuthPaths.introspect, [("token", access)], headers: basic(confidential, secret: "not-the-secret")
        )
        #expect(wrong.status == 401)
        #expect(wrong.header("www-authenticate")?.hasPrefix("Basic") == true)
        let twice = try await oauth.post(
            OAuthPaths.introspect, [("token", access), ("client_secret", confidential.secret ?? "")],
            headers: basic(confidential))
        #expect(try error(of: twice) == "invalid_request")
        let post = try await oauth.post(
            OAuthPaths.introspect,
            [
                ("token", access), ("client_id", confidential.clientID),
                ("client_secret", confidential.secret ?? ""),
            ])
        #expect(post.status == 200, "\(post.text)")
        // Introspection is for confidential clients.
        let publicClient = try await oauth.post(
            OAuthPaths.introspect, [("token", access), ("client_id", app.clientID)])
        #expect(try error(of: publicClient) == "unauthorized_client")
    }

    @Test func privateKeyJWTAssertionsVerifyOnceAndOnlyWithTheClientsKey() async throws {
        let oauth = try OAuthFixture()
        let clientKey = try P256SigningKey()
        var jwk = try ECPublicJWK(x963: clientKey.publicKey.x963Representation, alg: "ES256", use: "sig")
        jwk.kid = "client-key-1"
        let client = try oauth.addClient(jwks: JSON.serialize(JWKSet(keys: [jwk]).json))
        #expect(client.authentication == "private_key_jwt")
        #expect(client.secret == nil)
        let now = Int(oauth.test.clock.now.timeIntervalSince1970)
        func assertion(
            key: P256SigningKey = clientKey, audience: String = testIssuer + OAuthPaths.token,
            expiresIn: Int = 60,
            jti: String = UUID().uuidString
        ) throws -> String {
            try ES256.sign(
                header: .object([
                    JSONMember("alg", .string("ES256")), JSONMember("kid", .string("client-key-1")),
                ]),
                payload: JSON.serialize(
                    .object([
                        JSONMember("iss", .string(client.clientID)),
                        JSONMember("sub", .string(client.clientID)),
                        JSONMember("aud", .string(audience)), JSONMember("exp", .integer(now + expiresIn)),
                        JSONMember("jti", .string(jti)),
                    ])), with: key)
        }
        func introspect(_ assertion: String) async throws -> Reply {
            try await oauth.post(
                OAuthPaths.introspect,
                [
                    ("token", "anything-anything-anything"),
                    ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    ("client_assertion", assertion),
                ])
        }
        let good = try assertion()
        #expect(try await introspect(good).status == 200)
        #expect(try error(of: try await introspect(good)) == "invalid_client")  // replayed jti
        for forged in [
            try assertion(key: try P256SigningKey()),
            try assertion(audience: "https://elsewhere.example/token"),
            try assertion(expiresIn: -1), try assertion(expiresIn: 7200),
        ] {
            let reply = try await introspect(forged)
            #expect(reply.status == 401)
            #expect(try error(of: reply) == "invalid_client")
        }
    }

    @Test func refusalsOfTheWholeRequestAreOAuthErrorsOnOAuthRoutes() async throws {
        let oauth = try OAuthFixture(.live) { $0.bodyLimit = 1024 }
        for path in [OAuthPaths.token, OAuthPaths.introspect, OAuthPaths.revoke] {
            let wrongMethod = try await oauth.client.send("GET", path, checkSpec: false)  // no such operation
            #expect(wrongMethod.status == 405)
            #expect(try error(of: wrongMethod) == "invalid_request")
            #expect(wrongMethod.header("allow") == "POST")
            let tooLarge = try await oauth.post(path, [("token", String(repeating: "a", count: 2000))])
            #expect(tooLarge.status == 413)
            #expect(try error(of: tooLarge) == "invalid_request")
        }
        // Without any credentials, the challenge names no error (RFC 6750 §3.1).
        let bare = try await oauth.client.send("GET", OAuthPaths.userinfo)
        #expect(bare.status == 401)
        #expect(bare.header("www-authenticate") == #"Bearer realm="keybound", DPoP algs="ES256""#)
    }

    @Test func parametersWithoutAValueCountAsLeftOutAndOnlyReadOnesMustBeSingle() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let (_, session) = try await oauth.signedInUser("gil")
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: session, pkce: pkce)
        let reply = try await oauth.token([
            ("grant_type", "authorization_code"), ("code", code),
            ("redirect_uri", "http://127.0.0.1/callback"),
            ("code_verifier", pkce.verifier), ("client_id", app.clientID), ("client_secret", ""),
            ("client_assertion_type", ""), ("resource", "https://a.example"),
            ("resource", "https://b.example"),
        ])
        #expect(reply.status == 200, "\(reply.text)")
    }

    @Test func malformedTokenRequestsGetOAuthErrorsNeverProblems() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let cases: [(Data, String?, String)] = [
            (
                form([
                    ("grant_type", "authorization_code"), ("grant_type", "refresh_token"),
                    ("client_id", app.clientID),
                ]),
                "application/x-www-form-urlencoded", "invalid_request"
            ),
            (Data(#"{"grant_type":"refresh_token"}"#.utf8), "application/json", "invalid_request"),
            (
                form([("grant_type", "password"), ("client_id", app.clientID)]),
                "application/x-www-form-urlencoded",
                "unsupported_grant_type"
            ),
            (form([("client_id", app.clientID)]), "application/x-www-form-urlencoded", "invalid_request"),
            (Data("grant_type=%ZZ".utf8), "application/x-www-form-urlencoded", "invalid_request"),
            (Data([0xFF, 0xFE]), "application/x-www-form-urlencoded", "invalid_request"),
            (form([("grant_type", "refresh_token")]), "application/x-www-form-urlencoded", "invalid_client"),
        ]
        for (body, type, expected) in cases {
            let reply = try await oauth.client.send("POST", OAuthPaths.token, body: body, contentType: type)
            #expect((400...401).contains(reply.status), "\(String(decoding: body, as: UTF8.self))")
            #expect(try error(of: reply) == expected, "\(String(decoding: body, as: UTF8.self))")
            #expect(reply.header("cache-control") == "no-store")
        }
    }

    /// A /v1 session's `client_id` is whatever the app named itself at login: naming a registered
    /// client's id makes it neither that client's at introspection nor that client's to end.
    @Test func aV1SessionNamedLikeAClientIsNotThatClients() async throws {
        let oauth = try OAuthFixture()
        let gateway = try oauth.addClient(confidential: true)
        let trusted = try oauth.addClient()
        _ = try await oauth.client.createAccount("mallory")
        let posing = try await oauth.client.login("mallory", clientID: trusted.clientID)
        let introspected = try await oauth.introspect(posing.accessToken, by: gateway)
        #expect(introspected[member: "active"] == .bool(true))
        #expect(introspected[member: "client_id"] == nil, "\(introspected)")
        // A real token of that client says so.
        let issued = try await oauth.tokens(trusted.clientID, username: "grace")
        let real = try await oauth.introspect(try #require(issued[string: "access_token"]), by: gateway)
        #expect(real[string: "client_id"] == trusted.clientID)
        // Removing the client ends its sessions, not the /v1 session that borrowed its name.
        try oauth.administration.removeClient(id: trusted.clientID)
        #expect(try await oauth.client.send(API.me, token: posing.accessToken).status == 200)
    }

    /// An OAuth client's session has opaque tokens too (its refresh token, and an access token
    /// nobody is given); /v1's bearer routes take only /v1 sessions' access tokens, so that such
    /// a token, were it ever handed out, would not open the whole /v1 API to an OAuth client.
    @Test func anOAuthSessionsOpaqueAccessTokenOpensNoV1Route() throws {
        let app = try InProcessApplication(.sqlite) { $0.issuer = testIssuer }
        try app.createAccount("grace")
        guard case .text(let userID)? = try app.rows("SELECT id FROM users").first?.first else {
            throw TestFailure("no user")
        }
        let loopback = try #require(IPAddress("127.0.0.1"))
        let context = RequestContext(
            request: HTTPRequest(method: "POST", path: "/oauth/token"), parameters: [:],
            now: app.clock.now, clientAddress: ClientAddress(loopback))
        func session(scope: String?) throws -> String {
            try app.application.database.write { connection in
                try app.application.openSession(
                    connection, context, userID: userID, clientID: "cli_web", method: .password,
                    deviceID: nil, scope: scope)
            }.accessToken
        }
        let oauth = try session(scope: "openid")
        let v1 = try session(scope: nil)
        func me(_ token: String) -> Int {
            app.application.handle(
                HTTPRequest(method: "GET", path: "/v1/me", headers: ["authorization": "Bearer " + token])
            )
            .status
        }
        #expect(me(v1) == 200)
        #expect(me(oauth) == 401)
    }

}
