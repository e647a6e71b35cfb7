import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// DPoP (RFC 9449) on /v1 against a live server: logins bind their session to the proof's key,
/// a bound session's tokens work only with a fresh proof by that key, and a copy of them without
/// the key is worth nothing (docs/server.md, "DPoP"). The test servers set no `--issuer`, so a
/// proof's `htu` is the request's scheme and `Host`: the test client sends `Host: 127.0.0.1`.
@Suite("DPoP")
struct DPoPTests {
    /// The URI a proof names for `path` on a test server.
    static func uri(_ path: String) -> String { "http://127.0.0.1" + path }

    /// The server's current nonce, as the answer to any request with a `DPoP` header carries it.
    static func nonce(_ live: TestServer) async throws -> String {
        let reply = try await live.client.send(API.health, headers: ["DPoP": "x"])
        return try #require(reply.header("DPoP-Nonce"))
    }

    /// A password login with a proof by `key`: a session bound to it.
    static func boundLogin(
        _ live: TestServer, _ username: String, _ key: DPoPTestKey, clientID: String = "app-1",
        client: Client? = nil
    ) async throws -> TokenResponse {
        let proof = try key.proof(
            "POST", uri(API.passwordLogin.template), at: live.clock.now, nonce: try await nonce(live))
        let reply = try await (client ?? live.client).send(
            API.passwordLogin,
            PasswordLoginRequest(
                username: try Username(username), password: Client.password, clientID: try ClientID(clientID)),
            headers: ["DPoP": proof])
        #expect(reply.status == 200, "\(reply.text)")
        let tokens = try reply.decode(TokenResponse.self)
        #expect(tokens.tokenType == "DPoP")
        return tokens
    }

    /// `GET /v1/me` presenting `token` with the DPoP scheme and `proof`.
    static func me(_ client: Client, _ token: String, proof: String?) async throws -> Reply {
        var headers = ["Authorization": "DPoP \(token)"]
        headers["DPoP"] = proof
        return try await client.send(API.me, headers: headers)
    }

    /// A valid proof by `key` for `GET /v1/me` with `token`.
    static func meProof(_ live: TestServer, _ key: DPoPTestKey, _ token: String) async throws -> String {
        try key.proof(
            "GET", uri(API.me.template), at: live.clock.now, nonce: try await nonce(live), accessToken: token)
    }

    /// The DPoP key a session is bound to, as stored.
    static func binding(_ live: TestServer, _ sessionID: String) throws -> String? {
        try live.database.open().read {
            try $0.queryOne("SELECT dpop_jkt FROM sessions WHERE id = ?", [.text(sessionID)])?.optionalText(0)
        }
    }

    static func expectRefusedProof(_ reply: Reply, sourceLocation: SourceLocation = #_sourceLocation) {
        expectProblem(reply, 401, .dpopProofInvalid, sourceLocation: sourceLocation)
        #expect(
            reply.header("WWW-Authenticate") == #"DPoP algs="ES256", error="invalid_dpop_proof""#,
            sourceLocation: sourceLocation)
    }

    @Test(
        "a login with a proof opens a bound session, which works with proofs and not as Bearer",
        arguments: Engine.all)
    func aLoginWithAProofBindsItsSession(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let key = try DPoPTestKey()
        // Without the server's nonce: 400 use_dpop_nonce, and the nonce to use.
        let request = PasswordLoginRequest(username: "alice", password: Client.password, clientID: "app-1")
        let first = try await live.client.send(
            API.passwordLogin, request,
            headers: [
                "DPoP": try key.proof(
                    "POST", Self.uri("/v1/sessions/password"), at: live.clock.now, nonce: nil)
            ])
        expectProblem(first, 400, .useDPoPNonce)
        let nonce = try #require(first.header("DPoP-Nonce"))
        let login = try await live.client.send(
            API.passwordLogin, request,
            headers: [
                "DPoP": try key.proof(
                    "POST", Self.uri("/v1/sessions/password"), at: live.clock.now, nonce: nonce)
            ])
        #expect(login.status == 200, "\(login.text)")
        #expect(login.header("DPoP-Nonce") != nil)
        let tokens = try login.decode(TokenResponse.self)
        #expect(tokens.tokenType == "DPoP")
        #expect(try Self.binding(live, tokens.sessionID) == key.thumbprint)

        let me = try await Self.me(
            live.client, tokens.accessToken, proof: try await Self.meProof(live, key, tokens.accessToken))
        #expect(me.status == 200, "\(me.text)")
        #expect(try me.decode(MeResponse.self).sessionID == tokens.sessionID)
        #expect(me.header("DPoP-Nonce") != nil)
        // A bound token sent as a bearer token is refused, and the answer says to use DPoP.
        let bearer = try await live.client.send(API.me, token: tokens.accessToken)
        expectProblem(bearer, 401, .tokenInvalid)
        #expect(bearer.header("WWW-Authenticate")?.hasPrefix("DPoP") == true)
        // Also on a route that writes: nothing happens.
        expectProblem(try await live.client.send(API.logout, token: tokens.accessToken), 401, .tokenInvalid)
        // Authorization: DPoP without a proof.
        Self.expectRefusedProof(try await Self.me(live.client, tokens.accessToken, proof: nil))
    }

    @Test("resource requests need the current nonce; an old one gets use_dpop_nonce and a new one")
    func resourceNonces() async throws {
        let live = try TestServer()
        try await live.client.createAccount("alice")
        let key = try DPoPTestKey()
        let tokens = try await Self.boundLogin(live, "alice", key)
        func proof(_ nonce: String?) throws -> String {
            try key.proof(
                "GET", Self.uri("/v1/me"), at: live.clock.now, nonce: nonce, accessToken: tokens.accessToken)
        }
        let without = try await Self.me(live.client, tokens.accessToken, proof: try proof(nil))
        expectProblem(without, 401, .useDPoPNonce)
        #expect(without.header("WWW-Authenticate") == #"DPoP algs="ES256", error="use_dpop_nonce""#)
        let nonce = try #require(without.header("DPoP-Nonce"))
        #expect(try await Self.me(live.client, tokens.accessToken, proof: try proof(nonce)).status == 200)
        expectProblem(
            try await Self.me(live.client, tokens.accessToken, proof: try proof("not-a-nonce")), 401,
            .useDPoPNonce)
        // A nonce works through the next period too, then no more.
        live.clock.advance(by: 300)
        #expect(try await Self.me(live.client, tokens.accessToken, proof: try proof(nonce)).status == 200)
        live.clock.advance(by: 300)
        let stale = try await Self.me(live.client, tokens.accessToken, proof: try proof(nonce))
        expectProblem(stale, 401, .useDPoPNonce)
        let fresh = try #require(stale.header("DPoP-Nonce"))
        #expect(fresh != nonce)
        #expect(try await Self.me(live.client, tokens.accessToken, proof: try proof(fresh)).status == 200)
    }

    /// What is wrong with a proof, one defect each.
    enum Defect: String, CaseIterable, CustomTestStringConvertible {
        case otherMethod, otherPath, otherHost, tooOld, tooNew, otherAccessToken, noAccessTokenHash
        case signedByAnotherKey, algNone, hs256WithThePublicKey, privateKeyInHeader, noType, otherType
        case noID, criticalHeader, twoProofs, notAJWS

        var testDescription: String { rawValue }
    }

    /// A proof for `GET /v1/me` with `token`, the server's `nonce` and `defect`.
    static func defective(_ defect: Defect, key: DPoPTestKey, token: String, nonce: String, now: Date) throws
        -> String
    {
        var (method, uri, time, accessToken) = ("GET", Self.uri("/v1/me"), now, token)
        switch defect {
        case .otherMethod: method = "POST"
        case .otherPath: uri = Self.uri("/v1/devices")
        case .otherHost: uri = "https://api.example.org/v1/me"
        case .tooOld: time = now.addingTimeInterval(-61)
        case .tooNew: time = now.addingTimeInterval(61)
        case .otherAccessToken: accessToken = Base64URL.encode(SecureRandom.bytes(32))
        case .twoProofs:
            let proof = try key.proof(method, uri, at: time, nonce: nonce, accessToken: accessToken)
            return proof + ", " + proof
        case .notAJWS: return "not-a-proof"
        default: break
        }
        if [.otherMethod, .otherPath, .otherHost, .tooOld, .tooNew, .otherAccessToken].contains(defect) {
            return try key.proof(method, uri, at: time, nonce: nonce, accessToken: accessToken)
        }
        // The rest: a header or claims made by hand, signed as the defect says.
        var jwk = key.jwk.json
        var header: [JSONMember] = [
            JSONMember("typ", .string("dpop+jwt")), JSONMember("alg", .string("ES256")),
        ]
        var claims: [JSONMember] = [
            JSONMember("jti", .string(Base64URL.encode(SecureRandom.bytes(16)))),
            JSONMember("htm", .string(method)),
            JSONMember("htu", .string(uri)), JSONMember("iat", .integer(Int(now.timeIntervalSince1970))),
            JSONMember("nonce", .string(nonce)), JSONMember("ath", .string(DPoP.accessTokenHash(token))),
        ]
        var signer = key.signingKey
        switch defect {
        case .noAccessTokenHash: claims.removeLast()
        case .signedByAnotherKey: signer = try P256SigningKey()
        case .algNone: header[1] = JSONMember("alg", .string("none"))
        case .hs256WithThePublicKey: header[1] = JSONMember("alg", .string("HS256"))
        case .privateKeyInHeader:
            guard case .object(var members) = jwk else { throw TestFailure("a JWK is an object") }
            members.append(JSONMember("d", .string(Base64URL.encode(signer.rawRepresentation))))
            jwk = .object(members)
        case .noType: header.removeFirst()
        case .otherType: header[0] = JSONMember("typ", .string("JWT"))
        case .noID: claims.removeFirst()
        case .criticalHeader: header.append(JSONMember("crit", .array([.string("exp")])))
        default: break
        }
        header.append(JSONMember("jwk", jwk))
        let input =
            Base64URL.encode(JSON.serialize(.object(header))) + "."
            + Base64URL.encode(JSON.serialize(.object(claims)))
        let signature: Data
        switch defect {
        case .algNone: signature = Data()
        case .hs256WithThePublicKey:
            signature = try HMACSHA256.authenticationCode(
                for: Data(input.utf8), key: JSON.serialize(key.jwk.json))
        default: signature = try signer.signature(for: Data(input.utf8)).rawRepresentation
        }
        return DPoP.proof(signingInput: input, signature: signature)
    }

    @Test(
        "each defect of a proof is refused with 401 invalid_dpop_proof, and changes nothing",
        arguments: Defect.allCases)
    func defectiveProofs(_ defect: Defect) async throws {
        let live = try TestServer()
        try await live.client.createAccount("alice")
        let key = try DPoPTestKey()
        let tokens = try await Self.boundLogin(live, "alice", key)
        let nonce = try await Self.nonce(live)
        let proof = try Self.defective(
            defect, key: key, token: tokens.accessToken, nonce: nonce, now: live.clock.now)
        let refused = try await Self.me(live.client, tokens.accessToken, proof: proof)
        Self.expectRefusedProof(refused)
        #expect(refused.header("DPoP-Nonce") != nil)
        // The session is untouched: a good proof works.
        let good = try await Self.me(
            live.client, tokens.accessToken, proof: try await Self.meProof(live, key, tokens.accessToken))
        #expect(good.status == 200, "\(good.text)")
    }

    @Test("a proof is used once, at a login and on a bearer route", arguments: Engine.all)
    func replayedProofs(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let key = try DPoPTestKey()
        let proof = try key.proof(
            "POST", Self.uri("/v1/sessions/password"), at: live.clock.now, nonce: try await Self.nonce(live))
        let request = PasswordLoginRequest(username: "alice", password: Client.password, clientID: "app-1")
        let login = try await live.client.send(API.passwordLogin, request, headers: ["DPoP": proof])
        #expect(login.status == 200, "\(login.text)")
        let again = try await live.client.send(API.passwordLogin, request, headers: ["DPoP": proof])
        expectProblem(again, 400, .dpopProofInvalid)
        let tokens = try login.decode(TokenResponse.self)

        let meProof = try await Self.meProof(live, key, tokens.accessToken)
        #expect(try await Self.me(live.client, tokens.accessToken, proof: meProof).status == 200)
        Self.expectRefusedProof(try await Self.me(live.client, tokens.accessToken, proof: meProof))
    }

    @Test("a proof by another key than the session's is refused")
    func anotherKeysProof() async throws {
        let live = try TestServer()
        try await live.client.createAccount("alice")
        let tokens = try await Self.boundLogin(live, "alice", try DPoPTestKey())
        let other = try DPoPTestKey()
        Self.expectRefusedProof(
            try await Self.me(
                live.client, tokens.accessToken,
                proof: try await Self.meProof(live, other, tokens.accessToken)))
    }

    @Test(
        "a copy of a bound session's tokens without its key can do nothing, not even end it",
        arguments: Engine.all)
    func copiedTokensAreUseless(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let owner = try DPoPTestKey()
        let tokens = try await Self.boundLogin(live, "alice", owner)
        let thief = try DPoPTestKey()
        let client = live.client
        // The access token: as Bearer, with the thief's own proof, on a read and on a write.
        expectProblem(try await client.send(API.me, token: tokens.accessToken), 401, .tokenInvalid)
        Self.expectRefusedProof(
            try await Self.me(
                client, tokens.accessToken, proof: try await Self.meProof(live, thief, tokens.accessToken)))
        let logout = try await client.send(
            API.logout,
            headers: [
                "Authorization": "DPoP \(tokens.accessToken)",
                "DPoP": try thief.proof(
                    "DELETE", Self.uri("/v1/sessions/current"), at: live.clock.now,
                    nonce: try await Self.nonce(live), accessToken: tokens.accessToken),
            ])
        Self.expectRefusedProof(logout)
        // The refresh token: without a proof, with the thief's; and a reuse would have ended the
        // family, had the thief's refresh been taken.
        let refresh = RefreshRequest(refreshToken: tokens.refreshToken)
        expectProblem(try await client.send(API.refresh, refresh), 400, .dpopProofInvalid)
        let thiefRefresh = try thief.proof(
            "POST", Self.uri("/v1/sessions/refresh"), at: live.clock.now, nonce: try await Self.nonce(live))
        expectProblem(
            try await client.send(API.refresh, refresh, headers: ["DPoP": thiefRefresh]), 400,
            .dpopProofInvalid)

        // The owner's session is whole: it reads, and its refresh rotates, bound to the same key.
        #expect(
            try await Self.me(
                client, tokens.accessToken, proof: try await Self.meProof(live, owner, tokens.accessToken)
            ).status
                == 200)
        let ownerRefresh = try owner.proof(
            "POST", Self.uri("/v1/sessions/refresh"), at: live.clock.now, nonce: try await Self.nonce(live))
        let rotated = try await client.send(API.refresh, refresh, headers: ["DPoP": ownerRefresh])
        #expect(rotated.status == 200, "\(rotated.text)")
        let pair = try rotated.decode(TokenResponse.self)
        #expect(pair.tokenType == "DPoP" && pair.sessionID == tokens.sessionID)
        #expect(
            try await Self.me(
                client, pair.accessToken, proof: try await Self.meProof(live, owner, pair.accessToken)
            ).status
                == 200)
    }

    @Test(
        "a bearer session stays one: its token is refused with the DPoP scheme, and a refresh with a proof binds nothing"
    )
    func bearerSessionsStayBearer() async throws {
        let live = try TestServer()
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        #expect(tokens.tokenType == "Bearer")
        let key = try DPoPTestKey()
        let dpop = try await Self.me(
            live.client, tokens.accessToken, proof: try await Self.meProof(live, key, tokens.accessToken))
        expectProblem(dpop, 401, .tokenInvalid)
        #expect(dpop.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        let proof = try key.proof(
            "POST", Self.uri("/v1/sessions/refresh"), at: live.clock.now, nonce: try await Self.nonce(live))
        let refreshed = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: tokens.refreshToken), headers: ["DPoP": proof])
        #expect(refreshed.status == 200, "\(refreshed.text)")
        let pair = try refreshed.decode(TokenResponse.self)
        #expect(pair.tokenType == "Bearer")
        #expect(try Self.binding(live, pair.sessionID) == nil)
        #expect(try await live.client.send(API.me, token: pair.accessToken).status == 200)
    }

    @Test(
        "of 16 simultaneous uses of one proof exactly one passes, on a read and on a write (two instances on PostgreSQL)",
        arguments: Engine.all)
    func oneProofAtOnce(engine: Engine) async throws {
        let live = try TestServer(engine: engine, instances: engine == .postgres ? 2 : 1)
        try await live.client.createAccount("alice")
        let key = try DPoPTestKey()
        let tokens = try await Self.boundLogin(live, "alice", key)
        let clients = live.clients
        func together(_ send: @escaping @Sendable (Client) async throws -> Reply) async throws -> [Reply] {
            try await withThrowingTaskGroup(of: Reply.self) { group in
                for index in 0..<16 {
                    group.addTask {
                        var reply = try await send(clients[index % clients.count])
                        // Busy (503) committed nothing: sent again, as the API tells clients to.
                        for _ in 0..<20 where reply.status == 503 {
                            try await Task.sleep(nanoseconds: 100_000_000)
                            reply = try await send(clients[index % clients.count])
                        }
                        return reply
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        let meProof = try await Self.meProof(live, key, tokens.accessToken)
        let reads = try await together { try await Self.me($0, tokens.accessToken, proof: meProof) }
        #expect(reads.filter { $0.status == 200 }.count == 1, "\(reads.map { "\($0.status) \($0.text)" })")
        #expect(reads.filter { $0.status == 401 && $0.problem?.code == .dpopProofInvalid }.count == 15)

        // A write (a fresh App Attest challenge, which any number of requests may ask for).
        let writeProof = try key.proof(
            "POST", Self.uri(API.createAppAttestChallenge.template), at: live.clock.now,
            nonce: try await Self.nonce(live), accessToken: tokens.accessToken)
        let writes = try await together {
            try await $0.send(
                API.createAppAttestChallenge,
                headers: ["Authorization": "DPoP \(tokens.accessToken)", "DPoP": writeProof])
        }
        #expect(writes.filter { $0.status == 201 }.count == 1, "\(writes.map { "\($0.status) \($0.text)" })")
        #expect(writes.filter { $0.status == 401 && $0.problem?.code == .dpopProofInvalid }.count == 15)
    }

    @Test(
        "device and passkey logins and a passkey sign-up with a proof open bound sessions",
        arguments: Engine.all)
    func everyLoginTakesAProof(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let key = try DPoPTestKey()
        func proof(_ endpoint: some EndpointDescription) async throws -> [String: String] {
            [
                "DPoP": try key.proof(
                    "POST", Self.uri(endpoint.template), at: live.clock.now, nonce: try await Self.nonce(live)
                )
            ]
        }
        // Device login.
        let (bearer, deviceKey, deviceID) = try await live.client.userWithDevice("alice")
        #expect(bearer.tokenType == "Bearer")
        let challenge = try await live.client.challenge(deviceID)
        let device = try await live.client.send(
            API.deviceLogin,
            DeviceLoginRequest(
                challengeID: challenge.challengeID, signature: try sign(challenge.payload, with: deviceKey)),
            headers: try await proof(API.deviceLogin))
        #expect(device.status == 200, "\(device.text)")
        let deviceTokens = try device.decode(TokenResponse.self)
        #expect(deviceTokens.tokenType == "DPoP")
        #expect(try Self.binding(live, deviceTokens.sessionID) == key.thumbprint)

        // Passkey sign-up, then a passkey login.
        let authenticator = try PasskeyTests.authenticator(for: live)
        let options = try await live.client.registrationOptions(
            PasskeyRegistrationOptionsRequest(username: "bob"))
        let signUp = try await live.client.send(
            API.passkeyRegistrationVerify, raw: authenticator.registration(challenge: options.challenge),
            headers: try await proof(API.passkeyRegistrationVerify))
        #expect(signUp.status == 200, "\(signUp.text)")
        let signUpTokens = try #require(try signUp.decode(PasskeyRegistrationResult.self).tokens)
        #expect(signUpTokens.tokenType == "DPoP")
        #expect(try Self.binding(live, signUpTokens.sessionID) == key.thumbprint)
        let loginOptions = try await live.client.loginOptions(username: "bob")
        let passkey = try await live.client.send(
            API.passkeyLoginVerify,
            raw: try authenticator.assertion(challenge: loginOptions.challenge, signCount: 1),
            headers: try await proof(API.passkeyLoginVerify))
        #expect(passkey.status == 200, "\(passkey.text)")
        let passkeyTokens = try passkey.decode(PasskeyLoginResult.self).tokens
        #expect(passkeyTokens.tokenType == "DPoP")
        #expect(try Self.binding(live, passkeyTokens.sessionID) == key.thumbprint)
        #expect(
            try await Self.me(
                live.client, passkeyTokens.accessToken,
                proof: try await Self.meProof(live, key, passkeyTokens.accessToken)
            )
            .status == 200)
    }

    @Test(
        "with --issuer, htu is the issuer's URI, compared with scheme and host in any case and the default port"
    )
    func theIssuerIsTheBase() async throws {
        let live = try TestServer { $0.issuer = "https://login.example.test" }
        try await live.client.createAccount("alice")
        let key = try DPoPTestKey()
        let request = PasswordLoginRequest(username: "alice", password: Client.password, clientID: "app-1")
        func login(_ uri: String) async throws -> Reply {
            try await live.client.send(
                API.passwordLogin, request,
                headers: [
                    "DPoP": try key.proof("POST", uri, at: live.clock.now, nonce: try await Self.nonce(live))
                ])
        }
        // The Host the request came with is not the server's public name.
        expectProblem(try await login(Self.uri("/v1/sessions/password")), 400, .dpopProofInvalid)
        expectProblem(
            try await login("https://login.example.test:8443/v1/sessions/password"), 400, .dpopProofInvalid)
        let tokens = try await login("HTTPS://Login.Example.TEST:443/v1/sessions/password?ignored#too")
        #expect(tokens.status == 200, "\(tokens.text)")
        #expect(try tokens.decode(TokenResponse.self).tokenType == "DPoP")
    }

    @Test(
        "random tokens with valid proofs, and a real token with another key's proof or as Bearer, write nothing"
    )
    func refusedTokensWriteNothing() throws {
        let counter = WriteCounter()
        let issuer = "https://login.example.test"
        let app = try InProcessApplication(.sqlite, { $0.issuer = issuer }, wrapping: counter.wrap)
        func send(_ method: String, _ path: String, _ headers: [String: String]) -> HTTPResponse {
            app.application.handle(HTTPRequest(method: method, path: path, headers: headers))
        }
        try app.createAccount("alice")
        let owner = try DPoPTestKey()
        let nonce = try #require(send("GET", "/healthz", ["DPoP": "x"]).header("DPoP-Nonce"))
        let login = app.application.handle(
            HTTPRequest(
                method: "POST", path: "/v1/sessions/password",
                headers: [
                    "Content-Type": "application/json",
                    "DPoP": try owner.proof(
                        "POST", issuer + "/v1/sessions/password", at: app.clock.now, nonce: nonce),
                ],
                body: PasswordLoginRequest(username: "alice", password: Client.password, clientID: "c")
                    .jsonData))
        let tokens = try TokenResponse(jsonData: login.body)
        #expect(tokens.tokenType == "DPoP")
        counter.reset()
        let routes = [
            ("GET", "/v1/me"), ("DELETE", "/v1/sessions/current"), ("POST", "/v1/app-attest/challenges"),
        ]
        for index in 0..<60 {
            let (method, path) = routes[index % routes.count]
            let key = try DPoPTestKey()
            let random = Base64URL.encode(SecureRandom.bytes(32))
            for (token, status, code) in [
                (random, 401, ProblemCode.tokenInvalid), (tokens.accessToken, 401, .dpopProofInvalid),
            ] {
                let proof = try key.proof(
                    method, issuer + path, at: app.clock.now, nonce: nonce, accessToken: token)
                let reply = send(method, path, ["Authorization": "DPoP \(token)", "DPoP": proof])
                #expect(reply.status == status && (try? Problem(jsonData: reply.body))?.code == code)
            }
            #expect(send(method, path, ["Authorization": "Bearer \(tokens.accessToken)"]).status == 401)
        }
        #expect(counter.changedRows.isEmpty, "\(counter.changedRows.count) write transactions")
    }

    /// Two proofs joserfc (PyPI, Authlib's JOSE library, 1.6.5) made on 2026-12-01 with the key
    /// whose public part is in them, for this suite's server without nonces at the time they
    /// name: a login and, one second later, a refresh. joserfc gave the key's thumbprint too.
    static let joserfcLoginProof =
        "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7ImNydiI6IlAtMjU2IiwieCI6ImhERGZsZmhKalFxNzZ5eXc1aGRZV1NzTV91RG9EckdGOXEwNW5nVkZQNUEiLCJ5IjoiSmpDOVkyMUlWX1JPOVFuc3pRT0dhMVFLWmJOUVV0czh4VnIwOEFWYTFqUSIsImt0eSI6IkVDIn19."
        + "eyJqdGkiOiJqb3NlcmZjLWxvZ2luLTEiLCJodG0iOiJQT1NUIiwiaHR1IjoiaHR0cDovLzEyNy4wLjAuMS92MS9zZXNzaW9ucy9wYXNzd29yZCIsImlhdCI6MTgwMDAwMDAwMH0."
        + "pGIzcHbTT5SOw3IcO2hlNO-72OxfBqVwZrlXrT60H-GIBNPPGyR_y8Yz_Y44z7ApnB8G2HFYExQeAqQ7QsxIAg"
    static let joserfcRefreshProof =
        "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7ImNydiI6IlAtMjU2IiwieCI6ImhERGZsZmhKalFxNzZ5eXc1aGRZV1NzTV91RG9EckdGOXEwNW5nVkZQNUEiLCJ5IjoiSmpDOVkyMUlWX1JPOVFuc3pRT0dhMVFLWmJOUVV0czh4VnIwOEFWYTFqUSIsImt0eSI6IkVDIn19."
        + "eyJqdGkiOiJqb3NlcmZjLXJlZnJlc2gtMSIsImh0bSI6IlBPU1QiLCJodHUiOiJodHRwOi8vMTI3LjAuMC4xL3YxL3Nlc3Npb25zL3JlZnJlc2giLCJpYXQiOjE4MDAwMDAwMDF9."
        + "jYhP5QSIQzohijxmcrvAVO_bLSZ3u-VHIH3QuimdLNHwXtxmN8jI03DCyAGfaUAW2CYJrBLNTXrjyK1ssP2m6Q"
    static let joserfcThumbprint = "bjvsPEnFLjwTFpzUqo-VX74j888oPl3bMgWwbqrXp0w"

    @Test("proofs joserfc made bind a session to its key, whose thumbprint joserfc computed alike")
    func joserfcProofs() async throws {
        let live = try TestServer { $0.dpopNonceLifetime = 0 }
        try await live.client.createAccount("alice")
        live.clock.advance(by: 1_800_000_000 - live.clock.now.timeIntervalSince1970)
        let login = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: Client.password, clientID: "app-1"),
            headers: ["DPoP": Self.joserfcLoginProof])
        #expect(login.status == 200, "\(login.text)")
        let tokens = try login.decode(TokenResponse.self)
        #expect(tokens.tokenType == "DPoP")
        #expect(try Self.binding(live, tokens.sessionID) == Self.joserfcThumbprint)
        live.clock.advance(by: 1)
        let refresh = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: tokens.refreshToken),
            headers: ["DPoP": Self.joserfcRefreshProof])
        #expect(refresh.status == 200, "\(refresh.text)")
        #expect(try refresh.decode(TokenResponse.self).tokenType == "DPoP")
        // Past its 60 s, the same kind of proof is refused (a fresh one: this one is used).
        live.clock.advance(by: 61)
        let late = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: Client.password, clientID: "app-2"),
            headers: ["DPoP": Self.joserfcLoginProof])
        expectProblem(late, 400, .dpopProofInvalid)
    }
}
