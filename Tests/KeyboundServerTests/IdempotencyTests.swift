import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// `Idempotency-Key` (docs/server.md, "Idempotent retries"): a POST sent again with its key gets
/// its first answer, byte for byte, and nothing happens twice; another request with the key is
/// 422, a second one while the first runs 409; answers carrying tokens are sealed at rest; keys
/// live a day; a key is the caller's own.
@Suite("Idempotent retries")
struct IdempotencyTests {
    /// The header of a new key.
    static func key() -> [String: String] { [IdempotencyKey.header: IdempotencyKey.fresh()] }

    /// What may differ between two answers of one request: the HTTP layer's and the DPoP nonce.
    static let transportHeaders: Set<String> = [
        "date", "connection", "keep-alive", "content-length", "dpop-nonce",
    ]

    /// Expects `replay` to be `first` again: status, headers, body.
    static func expectSame(
        _ replay: Reply, _ first: Reply, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            replay.status == first.status, "\(what): \(replay.status) \(replay.text)",
            sourceLocation: sourceLocation)
        #expect(
            replay.body == first.body, "\(what): \(replay.text) after \(first.text)",
            sourceLocation: sourceLocation)
        #expect(
            replay.headers.filter { !transportHeaders.contains($0.key) }
                == first.headers.filter { !transportHeaders.contains($0.key) },
            "\(what)", sourceLocation: sourceLocation)
    }

    /// Sends one request twice with one key (`send` gets the headers): the second answer must be
    /// the first. Returns the first.
    @discardableResult
    static func twice(
        _ what: String, expecting status: Int, sourceLocation: SourceLocation = #_sourceLocation,
        _ send: ([String: String]) async throws -> Reply
    ) async throws -> Reply {
        let headers = key()
        let first = try await send(headers)
        #expect(first.status == status, "\(what): \(first.text)", sourceLocation: sourceLocation)
        expectSame(try await send(headers), first, what, sourceLocation: sourceLocation)
        return first
    }

    static func count(_ live: TestServer, _ sql: String, _ parameters: [SQLValue] = []) throws -> Int64 {
        try live.database.open().read { try $0.queryOne(sql, parameters)?.integer(0) } ?? -1
    }

    /// A retried sign-up, login, refresh, device binding and device login: each once, and its
    /// retry answered as the first (without the key each retry fails: 409 `username_taken`, a
    /// second session, 401 for the used refresh token and the session ended, a second device,
    /// 409 `challenge_used`).
    @Test(arguments: Engine.all) func retriedLoginsAndBindingsHappenOnce(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let client = live.client
        let signUp = try await Self.twice("sign-up", expecting: 201) {
            try await client.send(
                API.createAccount, CreateAccountRequest(username: "ada", password: Client.password),
                headers: $0)
        }
        let userID = try signUp.decode(CreateAccountResponse.self).userID
        let login = try await Self.twice("password login", expecting: 200) {
            try await client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "ada", password: Client.password, clientID: "app-1"),
                headers: $0)
        }
        let tokens = try login.decode(TokenResponse.self)
        #expect(try Self.count(live, "SELECT COUNT(*) FROM sessions WHERE user_id = ?", [.text(userID)]) == 1)
        // A refusal is not kept: the same wrong login twice with one key is checked twice.
        let wrongHeaders = Self.key()
        for _ in 1...2 {
            let wrong = try await client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "ada", password: "wrong password", clientID: "app-1"),
                headers: wrongHeaders)
            #expect(wrong.status == 401)
        }
        #expect(try Self.count(live, "SELECT failures FROM throttles WHERE scope = 'account:ada'") == 2)

        let refreshed = try await Self.twice("refresh", expecting: 200) {
            try await client.send(API.refresh, RefreshRequest(refreshToken: tokens.refreshToken), headers: $0)
        }.decode(TokenResponse.self)
        #expect(try await client.send(API.me, token: refreshed.accessToken).status == 200)

        let key = try P256SigningKey()
        let binding = BindDeviceRequest(
            publicKey: key.publicKey.spkiDER, name: "Phone", keyProtection: .emulator)
        let deviceID = try await Self.twice("device binding", expecting: 201) {
            try await client.send(API.bindDevice, binding, token: refreshed.accessToken, headers: $0)
        }.decode(BindDeviceResponse.self).deviceID
        #expect(try Self.count(live, "SELECT COUNT(*) FROM devices WHERE user_id = ?", [.text(userID)]) == 1)

        let challenge = try await client.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        try await Self.twice("device login", expecting: 200) {
            try await client.send(
                API.deviceLogin, DeviceLoginRequest(challengeID: challenge.challengeID, signature: signature),
                headers: $0)
        }
        #expect(try Self.count(live, "SELECT COUNT(*) FROM sessions WHERE user_id = ?", [.text(userID)]) == 2)
        #expect(
            try Self.count(
                live, "SELECT COUNT(*) FROM audit_events WHERE type = 'login' AND user_id = ?",
                [.text(userID)])
                == 2)
    }

    /// A retried approval request, confirmation and refusal, and App Attest challenge.
    @Test(arguments: Engine.all) func retriedApprovalsHappenOnce(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let client = live.client
        let (tokens, key, deviceID) = try await client.userWithDevice("ada")
        let request = CreateApprovalRequest(deviceID: deviceID, action: try transfer())
        let approval = try await Self.twice("approval", expecting: 201) {
            try await client.send(API.createApproval, request, token: tokens.accessToken, headers: $0)
        }.decode(ApprovalChallengeResponse.self)
        #expect(try Self.count(live, "SELECT COUNT(*) FROM approvals") == 1)
        let signature = try sign(approval.payload, with: key)
        try await Self.twice("confirmation", expecting: 200) {
            try await client.send(
                API.confirmApproval, ConfirmApprovalRequest(signature: signature),
                parameters: [approval.approvalID],
                token: tokens.accessToken, headers: $0)
        }
        #expect(
            try Self.count(live, "SELECT COUNT(*) FROM audit_events WHERE type = 'approval_confirmed'") == 1)

        let refused = try await client.send(API.createApproval, request, token: tokens.accessToken)
            .decode(ApprovalChallengeResponse.self)
        try await Self.twice("refusal", expecting: 200) {
            try await client.send(
                API.denyApproval, parameters: [refused.approvalID], token: tokens.accessToken, headers: $0)
        }
        try await Self.twice("App Attest challenge", expecting: 201) {
            try await client.send(API.createAppAttestChallenge, token: tokens.accessToken, headers: $0)
        }
    }

    /// The OAuth provider: a retried authorization gives the same code, a retried code exchange
    /// the same tokens (without the key: `invalid_grant`, and the session the first one opened
    /// is ended as a leaked code's), a retried refresh and CIBA request likewise.
    @Test(arguments: Engine.all) func retriedOAuthRequestsHappenOnce(engine: Engine) async throws {
        let fixture = try OAuthFixture(.live, engine: engine)
        let app = try fixture.addClient()
        let (userID, session) = try await fixture.signedInUser("ada")
        let pkce = PKCE()
        let authorization = OAuthAuthorizeRequest(
            clientID: app.clientID, redirectURI: "http://127.0.0.1/callback", responseType: "code",
            scope: "openid offline_access", state: "s", nonce: "n", codeChallenge: pkce.challenge,
            codeChallengeMethod: "S256")
        let redirect = try await Self.twice("authorization", expecting: 200) {
            try await fixture.client.send(API.oauthAuthorize, authorization, token: session, headers: $0)
        }.decode(OAuthAuthorizeResponse.self).redirectTo
        let code = try #require(try queryItems(of: redirect)["code"])
        let exchange = [
            ("grant_type", "authorization_code"), ("code", code),
            ("redirect_uri", "http://127.0.0.1/callback"),
            ("code_verifier", pkce.verifier), ("client_id", app.clientID),
        ]
        let tokens = try JSON.parse(
            try await Self.twice("code exchange", expecting: 200) {
                try await fixture.token(exchange, headers: $0)
            }.body)
        let refreshToken = try #require(tokens[string: "refresh_token"])
        #expect(
            try Self.count(
                fixture.test, "SELECT COUNT(*) FROM sessions WHERE user_id = ? AND revoked_at IS NULL",
                [.text(userID)])
                == 2)
        try await Self.twice("OAuth refresh", expecting: 200) {
            try await fixture.token(
                [
                    ("grant_type", "refresh_token"), ("refresh_token", refreshToken),
                    ("client_id", app.clientID),
                ],
                headers: $0)
        }

        var registration = OAuthClientRegistration(name: "Wallet backend", redirectURIs: [])
        registration.confidential = true
        registration.ciba = true
        let service = try fixture.administration.addClient(registration)
        _ = try await fixture.client.bindDevice(session)
        try await Self.twice("CIBA request", expecting: 200) { headers in
            try await fixture.post(
                OAuthPaths.backchannelAuthentication,
                [
                    ("scope", "openid"), ("login_hint", "ada"), ("authorization_details", CIBATests.details),
                ], headers: basic(service).merging(headers) { $1 })
        }
        #expect(try Self.count(fixture.test, "SELECT COUNT(*) FROM ciba_requests") == 1)
    }

    /// A retried passkey sign-up and passkey login (without the key: `challenge_used`).
    @Test(arguments: Engine.all) func retriedPasskeyCeremoniesHappenOnce(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let authenticator = try PasskeyTests.authenticator(for: live)
        let creation = try await live.client.registrationOptions(
            PasskeyRegistrationOptionsRequest(username: "ada"))
        let registration = try authenticator.registration(challenge: creation.challenge)
        let signUp = try await Self.twice("passkey sign-up", expecting: 200) {
            try await live.client.send(API.passkeyRegistrationVerify, raw: registration, headers: $0)
        }.decode(PasskeyRegistrationResult.self)
        let userID = try #require(signUp.tokens?.userID)
        let options = try await live.client.loginOptions()
        let assertion = try authenticator.assertion(
            challenge: options.challenge, signCount: 1, userHandle: PasskeyTests.userHandle(userID))
        try await Self.twice("passkey login", expecting: 200) {
            try await live.client.send(API.passkeyLoginVerify, raw: assertion, headers: $0)
        }
        #expect(try Self.count(live, "SELECT COUNT(*) FROM sessions WHERE user_id = ?", [.text(userID)]) == 2)
    }

    /// The same key with another request, whatever differs (body, path, method's target), is 422
    /// and does nothing; the first request's answer stays the key's.
    @Test(arguments: Engine.all) func anotherRequestWithTheKeyIsRefused(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let headers = Self.key()
        let first = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: "ada", password: Client.password),
            headers: headers)
        #expect(first.status == 201)
        let otherBody = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: "bob", password: Client.password),
            headers: headers)
        #expect(otherBody.status == 422)
        #expect(otherBody.problem?.code == .idempotencyKeyReused, "\(otherBody.text)")
        #expect(try Self.count(live, "SELECT COUNT(*) FROM users WHERE username = 'bob'") == 0)
        let otherPath = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "ada", password: Client.password, clientID: "app-1"),
            headers: headers)
        #expect(otherPath.problem?.code == .idempotencyKeyReused, "\(otherPath.text)")
        #expect(try Self.count(live, "SELECT COUNT(*) FROM sessions") == 0)
        Self.expectSame(
            try await live.client.send(
                API.createAccount, CreateAccountRequest(username: "ada", password: Client.password),
                headers: headers),
            first, "the first request again")

        // At the provider's endpoints, in OAuth's format with the same code.
        let fixture = try OAuthFixture(.live, engine: engine)
        let oauthHeaders = Self.key()
        let created = try await fixture.client.send(
            API.createAccount, CreateAccountRequest(username: "ada", password: Client.password),
            headers: oauthHeaders)
        #expect(created.status == 201)
        let reused = try await fixture.token(
            [
                ("grant_type", "refresh_token"), ("refresh_token", String(repeating: "x", count: 43)),
                ("client_id", "c"),
            ],
            headers: oauthHeaders)
        #expect(reused.status == 422)
        #expect(try JSON.parse(reused.body)[string: "error"] == "idempotency_key_reused", "\(reused.text)")
    }

    @Test(arguments: [
        "8e03978e-40d5-43e8-bc93-6894a57f9324",  // a token, not a String
        "\"short\"",  // under 16 characters
        "\"" + String(repeating: "a", count: 256) + "\"",  // over 255
        "\"8e03978e-40d5-43e8-bc93-6894a57f9324\";a=1",  // parameters
        "\"8e03978e-40d5-43e8-bc93-6894a57f9324\", \"a2a2a2a2a2a2a2a2a2\"",  // a list
        "\"8e03978e-40d5-43e8-bc93\\n6894a57f9324\"",  // an escape RFC 8941 does not have
        "\"8e03978e-40d5-43e8-bc93-6894a57f9324",  // no closing quote
        "\"8e03978e-40d5-43e8-bc93-6894a57f932é\"",  // not ASCII
    ])
    func malformedKeysAreRefused(_ field: String) async throws {
        let live = try TestServer(.inProcess, engine: .sqlite) { $0.issuer = testIssuer }
        let reply = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: "ada", password: Client.password),
            headers: [IdempotencyKey.header: field])
        #expect(reply.status == 400)
        #expect(reply.problem?.code == .invalidRequest, "\(reply.text)")
        #expect(try Self.count(live, "SELECT COUNT(*) FROM users") == 0)
        let oauth = try await live.client.send(
            "POST", OAuthPaths.token, body: form([("grant_type", "refresh_token")]),
            contentType: "application/x-www-form-urlencoded", headers: [IdempotencyKey.header: field])
        #expect(oauth.status == 400)
        #expect(try JSON.parse(oauth.body)[string: "error"] == "invalid_request", "\(oauth.text)")
    }
}

extension IdempotencyTests {
    /// N requests with one key at once (on PostgreSQL across two instances): the work is done
    /// once, and every answer is its answer, or 409 `idempotency_key_in_flight` (or 503, which
    /// committed nothing). Without the key's handling the others get 409 `username_taken`, or
    /// open sessions of their own.
    @Test(arguments: Engine.all) func concurrentRequestsWithOneKeyDoTheWorkOnce(engine: Engine) async throws {
        let live = try TestServer(engine: engine, instances: engine == .postgres ? 2 : 1) {
            $0.signupLimit = 0
        }
        func race(_ headers: [String: String], _ send: @escaping @Sendable (Client) async throws -> Reply)
            async throws -> Reply
        {
            let clients = live.clients
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for index in 0..<8 { group.addTask { try await send(clients[index % clients.count]) } }
                return try await group.reduce(into: [Reply]()) { $0.append($1) }
            }
            for reply in replies {
                let expected =
                    reply.status == 201 || reply.status == 200
                    || (reply.status == 409 && reply.problem?.code == .idempotencyKeyInFlight
                        && reply.header("Retry-After") == "1")
                    || (reply.status == 503 && reply.problem?.code == .unavailable)
                #expect(expected, "\(reply.status) \(reply.text)")
            }
            let answered = Set(replies.filter { $0.status < 300 }.map(\.body))
            #expect(
                answered.count <= 1, "one answer: \(answered.map { String(decoding: $0, as: UTF8.self) })")
            // Sent once more when the race is over: the answer, whoever gave it.
            let after = try await send(clients[0])
            #expect(answered.isEmpty || answered == [after.body], "\(after.text)")
            return after
        }
        let signUpHeaders = Self.key()
        let signUp = try await race(signUpHeaders) {
            try await $0.send(
                API.createAccount, CreateAccountRequest(username: "ada", password: Client.password),
                headers: signUpHeaders)
        }
        #expect(signUp.status == 201, "\(signUp.text)")
        #expect(try Self.count(live, "SELECT COUNT(*) FROM users") == 1)
        let loginHeaders = Self.key()
        let login = try await race(loginHeaders) {
            try await $0.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "ada", password: Client.password, clientID: "a"),
                headers: loginHeaders)
        }
        #expect(login.status == 200, "\(login.text)")
        #expect(try Self.count(live, "SELECT COUNT(*) FROM sessions") == 1)
    }

    /// While the first request with a key runs (held in its first write here), the same request
    /// again is 409 `idempotency_key_in_flight` with `Retry-After`, and does nothing; once the
    /// first has answered, the same request gets its answer.
    @Test(arguments: Engine.all) func aKeyInFlightIsRefused(engine: Engine) async throws {
        let hold = WriteHold()
        let app = try InProcessApplication(engine, wrapping: hold.wrap)
        let request = Self.signUp(Self.key())
        hold.start()
        async let first = offThePool { app.application.handle(request) }
        try await hold.waitUntilHeld()
        let second = app.application.handle(request)
        hold.stop()
        let answered = try await first
        #expect(answered.status == 201, "\(String(decoding: answered.body, as: UTF8.self))")
        #expect(second.status == 409, "\(String(decoding: second.body, as: UTF8.self))")
        #expect((try? Problem(jsonData: second.body))?.code == .idempotencyKeyInFlight)
        #expect(second.header("Retry-After") == "1")
        #expect(try app.count("SELECT COUNT(*) FROM users") == 1)
        let third = app.application.handle(request)
        #expect(third.status == 201)
        #expect(third.body == answered.body)
    }

    /// Two instances on one database (on SQLite, two servers on one file): the first holds in its
    /// first write while the second does the whole request. The first's write then finds the
    /// second's answer in its own transaction, undoes its work, and answers with it: one account.
    @Test(arguments: Engine.all) func anotherInstanceAnsweringFirstIsReplayed(engine: Engine) async throws {
        let hold = WriteHold()
        let held = try InProcessApplication(engine, wrapping: hold.wrap)
        var configuration = held.database.configuration
        configuration.clock = held.clock.serverClock
        let other = try Application(configuration: configuration)
        let request = Self.signUp(Self.key())
        hold.start()
        async let first = offThePool { held.application.handle(request) }
        try await hold.waitUntilHeld()
        let answered = other.handle(request)
        #expect(answered.status == 201)
        hold.stop()
        let replayed = try await first
        #expect(replayed.status == 201, "\(String(decoding: replayed.body, as: UTF8.self))")
        #expect(replayed.body == answered.body)
        #expect(try held.count("SELECT COUNT(*) FROM users") == 1)
    }

    /// What the database holds of a kept answer with tokens: its fingerprint and a sealed box,
    /// neither the tokens nor the Idempotency-Key; the replay opens it and gives the same
    /// tokens, which work.
    @Test(arguments: Engine.all) func tokensAreSealedAtRest(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("ada")
        let field = IdempotencyKey.fresh()
        let key = try #require(IdempotencyKey.parse(field))
        let login = try await Self.twice("password login", expecting: 200) { _ in
            try await live.client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "ada", password: Client.password, clientID: "a"),
                headers: [IdempotencyKey.header: field])
        }
        let tokens = try login.decode(TokenResponse.self)
        #expect(try await live.client.send(API.me, token: tokens.accessToken).status == 200)
        let rows = try live.database.open().read {
            try $0.query("SELECT id, fingerprint, response, created_at, expires_at FROM idempotency_keys", [])
        }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        let stored = try [row.text(0), row.text(1), row.text(2)].joined(separator: " ")
        let sealed = try #require(Base64URL.decode(try row.text(2)))
        for secret in [tokens.accessToken, tokens.refreshToken, key] {
            #expect(!stored.contains(secret))
            #expect(sealed.range(of: Data(secret.utf8)) == nil)
        }
        #expect(sealed.range(of: login.body) == nil)
        #expect(try row.integer(4) - row.integer(3) == 86_400_000)
    }

    /// A key is kept a day: then it is forgotten (the same request is a new one: here a second
    /// sign-up of the name, 409), and housekeeping deletes its row.
    @Test(arguments: Engine.all) func keysArePurgedAfterADay(engine: Engine) throws {
        let app = try InProcessApplication(engine)
        let request = Self.signUp(Self.key())
        let first = app.application.handle(request)
        #expect(first.status == 201)
        app.clock.advance(by: 86_399)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM idempotency_keys") == 1)
        #expect(app.application.handle(request).body == first.body)
        app.clock.advance(by: 2)
        let afresh = app.application.handle(request)
        #expect(afresh.status == 409)
        #expect((try? Problem(jsonData: afresh.body))?.code == .usernameTaken)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM idempotency_keys") == 0)
    }

    /// A key is its caller's: another session that sends someone's key, with the same body or its
    /// own, is served as a new request and never gets the stored answer; without a credential,
    /// another body with the key is 422, without the stored tokens.
    @Test(arguments: Engine.all) func anotherCallerGetsNoStoredAnswer(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let client = live.client
        let (victim, _, victimDevice) = try await client.userWithDevice("ada")
        let (attacker, _, attackerDevice) = try await client.userWithDevice("eve")
        let headers = Self.key()
        let request = CreateApprovalRequest(deviceID: victimDevice, action: try transfer())
        let first = try await client.send(
            API.createApproval, request, token: victim.accessToken, headers: headers)
        #expect(first.status == 201)
        Self.expectSame(
            try await client.send(API.createApproval, request, token: victim.accessToken, headers: headers),
            first,
            "the victim's retry")
        let sameBody = try await client.send(
            API.createApproval, request, token: attacker.accessToken, headers: headers)
        #expect(sameBody.status == 404, "\(sameBody.text)")
        let own = try await client.send(
            API.createApproval, CreateApprovalRequest(deviceID: attackerDevice, action: try transfer()),
            token: attacker.accessToken, headers: headers)
        #expect(own.status == 201)
        #expect(own.body != first.body)
        #expect(try Self.count(live, "SELECT COUNT(*) FROM approvals") == 2)

        let loginHeaders = Self.key()
        let login = try await client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "ada", password: Client.password, clientID: "a"),
            headers: loginHeaders)
        #expect(login.status == 200)
        let guess = try await client.send(
            API.passwordLogin, PasswordLoginRequest(username: "ada", password: "a guess", clientID: "a"),
            headers: loginHeaders)
        #expect(guess.status == 422)
        #expect(!guess.text.contains(try login.decode(TokenResponse.self).accessToken))
    }

    /// A session bound to a DPoP key gets a kept answer again only with a proof by that key (a
    /// new one: each attempt's proof is new), as its first request did: its token and the
    /// Idempotency-Key without the key get a refusal, not the answer.
    @Test(arguments: Engine.all) func aBoundSessionsAnswerNeedsItsKey(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("ada")
        let owner = try DPoPTestKey()
        let tokens = try await DPoPTests.boundLogin(live, "ada", owner)
        let headers = Self.key()
        func send(_ key: DPoPTestKey) async throws -> Reply {
            let proof = try key.proof(
                "POST", DPoPTests.uri(API.createAppAttestChallenge.template), at: live.clock.now,
                nonce: try await DPoPTests.nonce(live), accessToken: tokens.accessToken)
            return try await live.client.send(
                API.createAppAttestChallenge,
                headers: headers.merging(["Authorization": "DPoP \(tokens.accessToken)", "DPoP": proof]) {
                    $1
                })
        }
        let first = try await send(owner)
        #expect(first.status == 201, "\(first.text)")
        Self.expectSame(try await send(owner), first, "the owner's retry, with a new proof")
        let thief = try await send(try DPoPTestKey())
        #expect(thief.status == 401)
        #expect(thief.problem?.code == .dpopProofInvalid, "\(thief.text)")
    }

    /// Any Structured Field String of 16 to 255 characters is a key, escapes and spaces around
    /// it included; the SDK's keys are random UUIDs.
    @Test func wellFormedKeysAreKeys() async throws {
        #expect(IdempotencyKey.parse(IdempotencyKey.fresh())?.count == 36)
        #expect(IdempotencyKey.parse(#"  "a \"quoted\" \\ key!"  "#) == #"a "quoted" \ key!"#)
        let app = try InProcessApplication()
        let request = Self.signUp([IdempotencyKey.header: #" "a \"quoted\" \\ key!" "#])
        let first = app.application.handle(request)
        #expect(first.status == 201)
        let replay = app.application.handle(request)
        #expect(replay.status == 201)
        #expect(replay.body == first.body)
    }

    /// A sign-up of "ada" with the key header `headers`.
    static func signUp(_ headers: [String: String]) -> HTTPRequest {
        HTTPRequest(
            method: "POST", path: API.createAccount.template,
            headers: headers.merging(["Content-Type": "application/json"]) { $1 },
            body: CreateAccountRequest(username: "ada", password: Client.password).jsonData)
    }
}

/// Holds the writes of an application's database while started, on the threads that make them,
/// before their transaction begins: a request stuck in its first write.
private final class WriteHold: Sendable {
    private let holding = Locked(false)
    private let waiting = Locked(0)

    private struct Held: DatabaseWrapper {
        let base: any Database
        let hold: WriteHold

        func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
            hold.pass()
            return try base.write(body)
        }

        func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }

        var readsInProcess: Bool { base.readsInProcess }
    }

    func wrap(_ base: any Database) -> any Database { Held(base: base, hold: self) }

    func start() { holding.withLock { $0 = true } }

    func stop() { holding.withLock { $0 = false } }

    /// Waits while holding; bounded, so that a test that never stops fails instead of hanging.
    private func pass() {
        guard holding.withLock({ $0 }) else { return }
        waiting.withLock { $0 += 1 }
        let deadline = Date().addingTimeInterval(60)
        while holding.withLock({ $0 }), Date() < deadline { usleep(1000) }
        waiting.withLock { $0 -= 1 }
    }

    /// Returns once a write is held.
    func waitUntilHeld() async throws {
        for _ in 0..<6000 where waiting.withLock({ $0 }) == 0 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        guard waiting.withLock({ $0 }) > 0 else { throw TestFailure("no write was held") }
    }
}
