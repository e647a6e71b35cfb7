import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWebAuthn
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Passkey ceremonies through the server's endpoints, with KeyboundWebAuthn's software
/// authenticator playing the browser: every field can be chosen while the signature stays valid,
/// so each refusal is the server's check and not a broken signature. (The real browser is
/// `SignInPageBrowserTests`.)
@Suite("Passkeys")
struct PasskeyTests {
    /// A software authenticator for this server's default RP ID and origin.
    static func authenticator(for live: TestServer) throws -> TestAuthenticator {
        var authenticator = try TestAuthenticator()
        authenticator.rpId = "localhost"
        // The configured origin (several instances share one), else the server's own.
        authenticator.origin =
            live.server.configuration.origins.first ?? "http://localhost:\(live.server.port ?? 0)"
        return authenticator
    }

    static func userHandle(_ userID: String) -> Data { Data(userID.utf8) }

    @Test("sign up, sign in without a username, add a passkey, list and remove one", arguments: Engine.all)
    func signUpSignInAddAndRemove(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let first = try Self.authenticator(for: live)
        let signUp = try await live.client.passkeySignUp("alice", first)
        let signUpTokens = try #require(signUp.tokens)
        #expect(signUp.username == "alice" && signUp.format == "packed" && signUp.algorithm == -7)
        #expect(signUp.credentialID == first.credentialId)
        let me = try await live.client.send(API.me, token: signUpTokens.accessToken).decode(MeResponse.self)
        #expect(me.authMethod == .passkey && me.username == "alice" && me.userID == signUpTokens.userID)

        // A discoverable sign-in: no username; the passkey names its user by its user handle.
        let options = try await live.client.loginOptions()
        #expect(options.rpID == "localhost")
        #expect(options.userVerification == "required")
        let login = try await live.client.passkeyLogin(
            first.assertion(
                challenge: options.challenge, signCount: 0, userHandle: Self.userHandle(signUpTokens.userID)))
        #expect(login.status == 200, "\(login.text)")
        let session = try login.decode(PasskeyLoginResult.self)
        #expect(session.username == "alice" && session.credentialID == first.credentialId)

        // A second passkey, added from the fresh passkey session; the first is excluded.
        live.clock.advance(by: 1)  // the list is oldest first
        let second = try Self.authenticator(for: live)
        let creation = try await live.client.registrationOptions(
            PasskeyRegistrationOptionsRequest(username: nil), token: session.tokens.accessToken)
        #expect(creation.excludeCredentials.map(\.id) == [first.credentialId])
        #expect(creation.userID == Self.userHandle(signUpTokens.userID) && creation.userName == "alice")
        let added = try await live.client.send(
            API.passkeyRegistrationVerify, raw: second.registration(challenge: creation.challenge),
            token: session.tokens.accessToken)
        #expect(added.status == 200, "\(added.text)")
        #expect(try added.decode(PasskeyRegistrationResult.self).tokens == nil)

        let list = try await live.client.send(API.listPasskeys, token: session.tokens.accessToken)
            .decode(PasskeyListResponse.self).passkeys
        #expect(list.map(\.credentialID) == [first.credentialId, second.credentialId])
        #expect(list.allSatisfy { $0.algorithm == -7 && $0.attestationFormat == "packed" && !$0.attested })
        #expect(list[0].lastUsedAt != nil && list[1].lastUsedAt == nil)

        // Removing the first passkey ends the sessions it opened, and only those.
        let removed = try await live.client.send(
            API.removePasskey, parameters: [list[0].passkeyID], token: session.tokens.accessToken)
        #expect(removed.status == 204)
        #expect(try await live.client.send(API.me, token: session.tokens.accessToken).status == 401)
        #expect(try await live.client.send(API.me, token: signUpTokens.accessToken).status == 401)
        let secondLogin = try await live.client.passkeyLogin(
            second.assertion(
                challenge: try await live.client.loginOptions(username: "alice").challenge, signCount: 0))
        #expect(secondLogin.status == 200, "\(secondLogin.text)")
        let token = try secondLogin.decode(PasskeyLoginResult.self).tokens.accessToken
        let remaining = try await live.client.send(API.listPasskeys, token: token).decode(
            PasskeyListResponse.self)
        #expect(remaining.passkeys.map(\.credentialID) == [second.credentialId])
        // The removed passkey signs in no more.
        let gone = try await live.client.passkeyLogin(
            first.assertion(
                challenge: try await live.client.loginOptions().challenge, signCount: 0,
                userHandle: Self.userHandle(signUpTokens.userID)))
        #expect(gone.status == 401 && gone.problem?.code == .unknownCredential)

        // The account has no password: its last passkey stays, and no password signs in.
        let last = try await live.client.send(
            API.removePasskey, parameters: [remaining.passkeys[0].passkeyID], token: token)
        #expect(last.status == 409 && last.problem?.code == .lastPasskey)
        let password = try await live.client.send(
            API.passwordLogin, PasswordLoginRequest(username: "alice", password: "", clientID: "c"))
        #expect(password.status == 401 && password.problem?.code == .invalidCredentials)

        let audit = try await live.client.send(API.audit, token: token).decode(AuditListResponse.self).events
        #expect(audit.filter { $0.type == .passkeyRegistered }.count == 2)
        #expect(audit.contains { $0.type == .accountCreated && $0.method == .passkey })
        #expect(audit.contains { $0.type == .passkeyRemoved })
        #expect(audit.filter { $0.type == .login && $0.method == .passkey }.count == 3)
    }

    @Test(
        "replay, foreign challenge, wrong origin, wrong RP ID, no UV, tampered client data, a cloned counter: 4xx",
        arguments: Engine.all
    )
    func negativeCeremonies(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let alice = try Self.authenticator(for: live)
        let userID = try #require(try await live.client.passkeySignUp("alice", alice).tokens).userID
        let handle = Self.userHandle(userID)
        let client = live.client

        // Replay: the same assertion a second time.
        let replayed = try alice.assertion(
            challenge: try await client.loginOptions().challenge, signCount: 5, userHandle: handle)
        #expect(try await client.passkeyLogin(replayed).status == 200)
        try await expectProblem(client.passkeyLogin(replayed), 409, .challengeUsed)

        // A challenge this server never issued.
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(challenge: SecureRandom.bytes(32), signCount: 6, userHandle: handle)),
            401, .challengeMismatch)
        // A registration challenge used for a login.
        let registration = try await client.registrationOptions(
            PasskeyRegistrationOptionsRequest(username: "zed"))
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(challenge: registration.challenge, signCount: 6, userHandle: handle)),
            401, .challengeMismatch)

        // Another origin, another RP ID.
        var phishing = alice
        phishing.origin = "http://localhost.evil.example:\(live.server.port ?? 0)"
        try await expectProblem(
            client.passkeyLogin(
                phishing.assertion(
                    challenge: try await client.loginOptions().challenge, signCount: 6, userHandle: handle)),
            401, .originNotAllowed)
        var otherRP = alice
        otherRP.rpId = "evil.example"
        try await expectProblem(
            client.passkeyLogin(
                otherRP.assertion(
                    challenge: try await client.loginOptions().challenge, signCount: 6, userHandle: handle)),
            401, .rpIDMismatch)

        // Presence without verification.
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(
                    challenge: try await client.loginOptions().challenge, flags: [.userPresent], signCount: 6,
                    userHandle: handle)),
            401, .userVerificationMissing)

        // Client data changed after signing: one member added, the rest as signed.
        let challenge = try await client.loginOptions().challenge
        let signed = try JSON.parse(alice.assertion(challenge: challenge, signCount: 6, userHandle: handle))
        let tampered = alice.clientDataJSON(
            type: "webauthn.get", challenge: challenge, extra: [JSONMember("injected", .bool(true))])
        try await expectProblem(
            client.passkeyLogin(replacing("clientDataJSON", in: signed, with: Base64URL.encode(tampered))),
            401, .signatureInvalid)

        // A counter that went backwards: refused and audited as a cloned authenticator; the
        // passkey is suspended until alice signs in another way (passkeySuspendedUntilAnotherFactor).
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(
                    challenge: try await client.loginOptions().challenge, signCount: 3, userHandle: handle)),
            401, .clonedAuthenticator)
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(
                    challenge: try await client.loginOptions().challenge, signCount: 6, userHandle: handle)),
            403, .passkeySuspended)
        // Every session alice had was opened by that passkey: her audit is read from the database.
        let events = try live.database.open().read { connection in
            try connection.query(
                "SELECT type, method FROM audit_events WHERE user_id = ?", [.text(userID)]
            ).map { (type: try $0.text(0), method: try $0.optionalText(1)) }
        }
        #expect(events.contains { $0.type == "passkey_cloned" && $0.method == "passkey" })
        #expect(events.contains { $0.type == "login_failed" && $0.method == "passkey" })
    }

    @Test(
        "registration refuses the wrong origin, RP ID, missing UV, another session, a reused challenge",
        arguments: Engine.all)
    func registrationRefusals(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let client = live.client
        let alice = try Self.authenticator(for: live)
        var phishing = alice
        phishing.origin = "https://evil.example"
        try await expectProblem(
            client.send(
                API.passkeyRegistrationVerify,
                raw: phishing.registration(
                    challenge: try await client.registrationOptions(.init(username: "alice")).challenge)),
            400, .originNotAllowed)
        var otherRP = alice
        otherRP.rpId = "evil.example"
        try await expectProblem(
            client.send(
                API.passkeyRegistrationVerify,
                raw: otherRP.registration(
                    challenge: try await client.registrationOptions(.init(username: "alice")).challenge)),
            400, .rpIDMismatch)
        try await expectProblem(
            client.send(
                API.passkeyRegistrationVerify,
                raw: alice.registration(
                    challenge: try await client.registrationOptions(.init(username: "alice")).challenge,
                    flags: [.userPresent])),
            400, .userVerificationMissing)
        // A refused attempt used its challenge up.
        let options = try await client.registrationOptions(.init(username: "alice"))
        try await expectProblem(
            client.send(
                API.passkeyRegistrationVerify,
                raw: alice.registration(challenge: options.challenge, flags: [.userPresent])),
            400, .userVerificationMissing)
        try await expectProblem(
            client.send(
                API.passkeyRegistrationVerify, raw: alice.registration(challenge: options.challenge)),
            409, .challengeUsed)
        // Nothing was created by the refusals.
        #expect(try await client.passkeySignUp("alice", alice).username == "alice")

        // Adding a passkey: only the session that asked may finish.
        let bob = try Self.authenticator(for: live)
        let bobTokens = try #require(try await client.passkeySignUp("bob", bob).tokens)
        let other = try Self.authenticator(for: live)
        let creation = try await client.registrationOptions(
            .init(username: nil), token: bobTokens.accessToken)
        try await expectProblem(
            client.send(
                API.passkeyRegistrationVerify,
                raw: other.registration(challenge: creation.challenge)),
            401, .tokenInvalid)
    }

    @Test("of 16 simultaneous uses of one login challenge exactly one opens a session", arguments: Engine.all)
    func oneOfSixteenWins(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let alice = try Self.authenticator(for: live)
        let userID = try #require(try await live.client.passkeySignUp("alice", alice).tokens).userID
        let body = try alice.assertion(
            challenge: try await live.client.loginOptions().challenge, signCount: 0,
            userHandle: Self.userHandle(userID))
        let client = live.client
        let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
            for _ in 0..<16 { group.addTask { try await client.passkeyLogin(body) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let winners = replies.filter { $0.status == 200 }
        #expect(winners.count == 1)
        #expect(replies.filter { $0.status == 409 && $0.problem?.code == .challengeUsed }.count == 15)
        let token = try #require(try winners.first?.decode(PasskeyLoginResult.self)).tokens.accessToken
        let logins = try await client.send(API.audit, token: token).decode(AuditListResponse.self).events
            .filter { $0.type == .login }
        #expect(logins.count == 2)  // the sign-up's session and the one winner
    }

    @Test("a credential id is registered to one user only", arguments: Engine.all)
    func credentialIDsAreUnique(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let shared = try Self.authenticator(for: live)
        _ = try await live.client.passkeySignUp("alice", shared)
        let options = try await live.client.registrationOptions(.init(username: "bob"))
        try await expectProblem(
            live.client.send(
                API.passkeyRegistrationVerify,
                raw: shared.registration(challenge: options.challenge)),
            409, .credentialExists)
        // Bob's sign-up was rolled back whole: the name is still free.
        #expect(
            try await live.client.passkeySignUp("bob", try Self.authenticator(for: live)).username == "bob")
    }

    @Test(
        "the user handle must be the owner's; a discoverable sign-in needs one; a named user only their passkeys",
        arguments: Engine.all
    )
    func userHandleAndNamedUser(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let client = live.client
        let alice = try Self.authenticator(for: live)
        let aliceID = try #require(try await client.passkeySignUp("alice", alice).tokens).userID
        let bob = try Self.authenticator(for: live)
        let bobID = try #require(try await client.passkeySignUp("bob", bob).tokens).userID

        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(
                    challenge: try await client.loginOptions().challenge, userHandle: Self.userHandle(bobID))),
            401, .userHandleMismatch)
        try await expectProblem(
            client.passkeyLogin(alice.assertion(challenge: try await client.loginOptions().challenge)),
            401, .userHandleMismatch)
        // Options for bob let only bob's passkey answer (they list none: all are discoverable).
        let forBob = try await client.loginOptions(username: "bob")
        #expect(try await client.passkeyLogin(bob.assertion(challenge: forBob.challenge)).status == 200)
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(
                    challenge: try await client.loginOptions(username: "bob").challenge,
                    userHandle: Self.userHandle(aliceID))),
            401, .credentialMismatch)
        // An unknown username gets options no passkey satisfies.
        let forNobody = try await client.loginOptions(username: "nobody")
        try await expectProblem(
            client.passkeyLogin(
                alice.assertion(challenge: forNobody.challenge, userHandle: Self.userHandle(aliceID))),
            401, .credentialMismatch)
        // An unknown credential.
        try await expectProblem(
            client.passkeyLogin(
                try Self.authenticator(for: live).assertion(
                    challenge: try await client.loginOptions().challenge)),
            401, .unknownCredential)
    }

    @Test(
        "passkey sign-up follows the sign-up rules: open registration, the address limit, a free name",
        arguments: Engine.all)
    func signUpRules(engine: Engine) async throws {
        let closed = try TestServer(.live, engine: engine) { $0.registration = .closed }
        try await expectProblem(
            closed.client.send(
                API.passkeyRegistrationOptions,
                PasskeyRegistrationOptionsRequest(username: "a")),
            403, .registrationClosed)

        let limited = try TestServer(.live, engine: engine) { $0.signupLimit = 2 }
        _ = try await limited.client.passkeySignUp("alice", try Self.authenticator(for: limited))
        try await expectProblem(
            limited.client.send(
                API.passkeyRegistrationOptions,
                PasskeyRegistrationOptionsRequest(username: "alice")),
            409, .usernameTaken)
        let third = try await limited.client.send(
            API.passkeyRegistrationOptions,
            PasskeyRegistrationOptionsRequest(username: "carol"))
        #expect(third.status == 429 && third.header("Retry-After") != nil)
        // Password sign-ups share the address's limit.
        let password = try await limited.client.send(
            API.createAccount, CreateAccountRequest(username: "dave", password: Client.password))
        #expect(password.status == 429)

        let open = try TestServer(engine: engine)
        try await expectProblem(
            open.client.send(API.passkeyRegistrationOptions, raw: Data("{}".utf8)), 400,
            .invalidRequest)
        try await expectProblem(
            open.client.send(
                API.passkeyRegistrationOptions,
                PasskeyRegistrationOptionsRequest(username: "eve", displayName: "")),
            400, .invalidRequest)
    }

    @Test(
        "adding a passkey needs a password or passkey login within the step-up window", arguments: Engine.all)
    func addingNeedsStepUp(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        let fresh = try await live.client.registrationOptions(
            .init(username: "alice"), token: tokens.accessToken)
        #expect(fresh.userName == "alice" && fresh.excludeCredentials.isEmpty)
        // Another account's username with this bearer token: well-formed, but not allowed (403,
        // not 400, so that a schema-valid body is never refused as malformed).
        try await expectProblem(
            live.client.send(
                API.passkeyRegistrationOptions,
                PasskeyRegistrationOptionsRequest(username: "bob"),
                token: tokens.accessToken),
            403, .usernameMismatch)
        // A password account gains a passkey, then signs in with it.
        let passkey = try Self.authenticator(for: live)
        let added = try await live.client.send(
            API.passkeyRegistrationVerify, raw: passkey.registration(challenge: fresh.challenge),
            token: tokens.accessToken)
        #expect(added.status == 200, "\(added.text)")
        let login = try await live.client.passkeyLogin(
            passkey.assertion(challenge: try await live.client.loginOptions(username: "alice").challenge))
        #expect(login.status == 200, "\(login.text)")

        // Six minutes after that sign-in, its session may no longer add one.
        live.clock.advance(by: 6 * 60)
        try await expectProblem(
            live.client.send(
                API.passkeyRegistrationOptions,
                PasskeyRegistrationOptionsRequest(username: nil),
                token: try login.decode(PasskeyLoginResult.self).tokens.accessToken),
            403, .stepUpRequired)
    }

    @Test(
        "the step-up window is checked again when the passkey is stored, not only when adding it starts",
        arguments: Engine.all)
    func stepUpIsCheckedWhereThePasskeyIsStored(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        // Four minutes in: the window (5 minutes) is still open when the ceremony starts …
        live.clock.advance(by: 4 * 60)
        let options = try await live.client.registrationOptions(
            .init(username: nil), token: tokens.accessToken)
        // … and closed when the user is done at the authenticator.
        live.clock.advance(by: 2 * 60)
        let passkey = try Self.authenticator(for: live)
        try await expectProblem(
            live.client.send(
                API.passkeyRegistrationVerify,
                raw: passkey.registration(challenge: options.challenge),
                token: tokens.accessToken),
            403, .stepUpRequired)
        // Nothing was stored: the passkey signs nobody in.
        try await expectProblem(
            live.client.passkeyLogin(
                passkey.assertion(challenge: try await live.client.loginOptions(username: "alice").challenge)),
            401, .unknownCredential)
        let passkeys = try await live.client.send(API.listPasskeys, token: tokens.accessToken)
            .decode(PasskeyListResponse.self).passkeys
        #expect(passkeys.isEmpty)
    }

    @Test(
        "a cloned passkey ends the sessions it opened and signs in again only after another factor",
        arguments: Engine.all)
    func passkeySuspendedUntilAnotherFactor(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let client = live.client
        try await client.createAccount("alice")
        let password = try await client.login("alice", clientID: "web")
        let passkey = try Self.authenticator(for: live)
        let options = try await client.registrationOptions(.init(username: nil), token: password.accessToken)
        let added = try await client.send(
            API.passkeyRegistrationVerify, raw: passkey.registration(challenge: options.challenge),
            token: password.accessToken)
        #expect(added.status == 200, "\(added.text)")
        func signIn(_ count: UInt32) async throws -> Reply {
            try await client.passkeyLogin(
                passkey.assertion(
                    challenge: try await client.loginOptions(username: "alice").challenge, signCount: count))
        }
        let first = try await signIn(5)
        #expect(first.status == 200, "\(first.text)")
        let opened = try first.decode(PasskeyLoginResult.self).tokens

        // A copy of the passkey answers with a count that did not rise.
        try await expectProblem(signIn(5), 401, .clonedAuthenticator)
        // The session it opened has ended (either copy may have opened it); the password's lives.
        #expect(try await client.send(API.me, token: opened.accessToken).status == 401)
        let refreshed = try await client.send(
            API.refresh, RefreshRequest(refreshToken: opened.refreshToken))
        #expect(refreshed.status == 401)
        #expect(try await client.send(API.me, token: password.accessToken).status == 200)
        // Even with a count that rises, the passkey is suspended …
        try await expectProblem(signIn(6), 403, .passkeySuspended)
        // … until alice signs in another way (a sign-in from before the clone does not count).
        live.clock.advance(by: 1)
        _ = try await client.login("alice", clientID: "phone")
        let again = try await signIn(7)
        #expect(again.status == 200, "\(again.text)")
        // And it stays usable: the suspension ended with that sign-in.
        #expect(try await signIn(8).status == 200)
        let audit = try await client.send(API.audit, token: password.accessToken)
            .decode(AuditListResponse.self).events
        #expect(audit.contains { $0.type == .passkeyCloned })
    }

    @Test(
        "an expired challenge is refused, and failed sign-ins are throttled while a valid one still gets in",
        arguments: Engine.all)
    func expiryAndThrottling(engine: Engine) async throws {
        let live = try TestServer(.live, engine: engine) { $0.addressFailureLimit = 0 }
        let alice = try Self.authenticator(for: live)
        let userID = try #require(try await live.client.passkeySignUp("alice", alice).tokens).userID
        let handle = Self.userHandle(userID)
        let options = try await live.client.loginOptions()
        live.clock.advance(by: 301)
        try await expectProblem(
            live.client.passkeyLogin(alice.assertion(challenge: options.challenge, userHandle: handle)),
            410, .challengeExpired)

        // Five signatures by a key that is not the passkey's: then 429, without using the challenge.
        var impostor = try TestAuthenticator()
        impostor.credentialId = alice.credentialId
        impostor.rpId = alice.rpId
        impostor.origin = alice.origin
        for _ in 0..<5 {
            try await expectProblem(
                live.client.passkeyLogin(
                    impostor.assertion(
                        challenge: try await live.client.loginOptions().challenge, userHandle: handle)),
                401, .signatureInvalid)
        }
        let blockedChallenge = try await live.client.loginOptions().challenge
        let blocked = try await live.client.passkeyLogin(
            impostor.assertion(challenge: blockedChallenge, userHandle: handle))
        #expect(blocked.status == 429 && blocked.header("Retry-After") != nil)
        // The owner's passkey still signs in, even with the challenge the blocked attempt sent.
        let owner = try await live.client.passkeyLogin(
            alice.assertion(challenge: blockedChallenge, userHandle: handle))
        #expect(owner.status == 200, "\(owner.text)")
    }

    @Test(
        "whatever a client sends to the passkey routes, the answer is a 4xx problem, never a 5xx",
        arguments: Engine.all)
    func garbageNeverGives5xx(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let alice = try Self.authenticator(for: live)
        _ = try await live.client.passkeySignUp("alice", alice)
        let valid = try JSON.parse(
            alice.assertion(challenge: try await live.client.loginOptions().challenge, signCount: 9))
        let registration = try JSON.parse(
            alice.registration(
                challenge: try await live.client.registrationOptions(.init(username: "bob")).challenge))
        var bodies: [Data] = [
            Data(), Data("null".utf8), Data("[]".utf8), Data("{}".utf8), Data("{\"id\":1}".utf8),
            Data("{\"type\":\"public-key\",\"id\":\"AA\",\"rawId\":\"AA\",\"response\":{}}".utf8),
            Data(repeating: 0x7B, count: 2000),
        ]
        for member in ["clientDataJSON", "authenticatorData", "signature", "userHandle", "attestationObject"]
        {
            for value in [
                "", "!!", Base64URL.encode(Data(repeating: 0xFF, count: 64)), Base64URL.encode(Data([0xA1])),
            ] {
                bodies.append(try replacing(member, in: valid, with: value))
                bodies.append(try replacing(member, in: registration, with: value))
            }
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<40 {
            let noise = Data(
                (0..<Int.random(in: 1...300, using: &random)).map { _ in UInt8.random(in: 0...255) })
            bodies.append(try replacing("attestationObject", in: registration, with: Base64URL.encode(noise)))
            bodies.append(try replacing("authenticatorData", in: valid, with: Base64URL.encode(noise)))
            bodies.append(try replacing("clientDataJSON", in: valid, with: Base64URL.encode(noise)))
        }
        for body in bodies {
            for endpoint: any EndpointDescription in [API.passkeyRegistrationVerify, API.passkeyLoginVerify] {
                let path = endpoint.template
                let reply = try await live.client.send(endpoint, raw: body)
                #expect((400..<500).contains(reply.status), "\(path) \(reply.status) \(reply.text)")
                #expect(reply.problem != nil, "\(path) \(reply.text)")
            }
        }
    }

    @Test("GET / serves the sign-in page under a Content-Security-Policy without inline script")
    func signInPage() async throws {
        let live = try TestServer()
        let page = try await live.client.send("GET", "/")
        #expect(page.status == 200)
        #expect(page.header("Content-Type") == "text/html; charset=utf-8")
        let policy = try #require(page.header("Content-Security-Policy"))
        #expect(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"))
        #expect(!policy.contains("unsafe-inline"))
        #expect(page.header("X-Content-Type-Options") == "nosniff")
        // Every script of the page is a file of this server; no element has an inline handler.
        let scripts = page.text.components(separatedBy: "<script").dropFirst()
        #expect(scripts.count == 1 && scripts.allSatisfy { $0.hasPrefix(" src=\"/sign-in.js\"") })
        #expect(page.text.range(of: #"\son[a-z]+="#, options: .regularExpression) == nil)
        let script = try await live.client.send("GET", "/sign-in.js")
        #expect(script.status == 200 && script.header("Content-Type") == "text/javascript; charset=utf-8")
        #expect(script.text.contains("parseCreationOptionsFromJSON") && script.text.contains("toJSON"))
        let style = try await live.client.send("GET", "/sign-in.css")
        #expect(style.status == 200 && style.header("Content-Type") == "text/css; charset=utf-8")
        // What is served is the page's sources as they are now: the EmbedFiles plugin compiled
        // them in at build time. The script comes after the routes it calls, from their
        // declarations.
        for (reply, file) in [(page, "index.html"), (script, "sign-in.js"), (style, "sign-in.css")] {
            let source = Repository.file("Sources/KeyboundServer/Resources/sign-in/" + file)
            let text = try String(contentsOf: source, encoding: .utf8)
            #expect(file == "sign-in.js" ? reply.text.hasSuffix(text) : reply.text == text, "\(file)")
        }
        let prelude = try #require(script.text.components(separatedBy: "\n").dropFirst().first)
        #expect(prelude.hasPrefix("const ROUTES = {") && prelude.hasSuffix("};"))
        let routes = try JSON.parse(Data(prelude.dropFirst("const ROUTES = ".count).dropLast().utf8))
        for (name, route) in SignInPage.routes {
            #expect(
                OpenAPISpec.member(routes, name)
                    == .object([
                        JSONMember("method", .string(route.method.rawValue)),
                        JSONMember("path", .string(route.template)),
                    ]), "\(name)")
        }
        // Every route the script calls is one it was given: no path of its own.
        let source = try String(
            contentsOf: Repository.file("Sources/KeyboundServer/Resources/sign-in/sign-in.js"),
            encoding: .utf8)
        #expect(!source.contains("\"/v1/"))
        for name in source.matches(of: /ROUTES\.([a-zA-Z]+)/).map({ String($0.output.1) }) {
            #expect(SignInPage.routes.contains { $0.name == name }, "ROUTES.\(name)")
        }
    }

    @Test("keybound serve takes --rp-id, --origin and the App Attest flags, and refuses unusable ones")
    func serveTakesThePasskeyFlags() async throws {
        let directory = try TemporaryDirectory()
        let serve = try await ServeProcess(arguments: [
            "--db", "sqlite:" + directory.path("passkeys.sqlite"), "--rp-id", "example.org",
            "--origin", "https://login.example.org", "--origin", "https://example.org",
            "--app-id", "ABCDE12345.com.example.app", "--app-attest-environment", "development",
            "--require-app-attest", "--signup-limit", "0",
        ])
        let options = try await serve.client.loginOptions()
        #expect(options.rpID == "example.org")
        var authenticator = try TestAuthenticator()
        authenticator.rpId = "example.org"
        authenticator.origin = "https://login.example.org"
        let result = try await serve.client.passkeySignUp("alice", authenticator)
        let tokens = try #require(result.tokens)
        // --require-app-attest: a binding without an attestation is refused.
        let bind = try await serve.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: try P256SigningKey().publicKey.spkiDER, name: "Phone", keyProtection: .emulator),
            token: tokens.accessToken)
        #expect(bind.status == 403 && bind.problem?.code == .appAttestRequired)
        #expect(serve.kill(SIGTERM) == 0)

        for (bad, status) in [
            (["--passkey-user-verification", "discouraged"], Int32(2)),
            (["--app-attest-environment", "staging"], 2), (["--app-id", "com.example.app"], 2),
            (["--require-app-attest"], 2),
            (["--origin", "https://example.org/"], 1), (["--origin", "HTTPS://Example.org"], 1),
            (["--origin", "https://example.org:443"], 1),
            (["--origin", "https://example.org", "--rp-id", "other.org"], 1),
        ] {
            let arguments =
                ["serve", "--listen", "127.0.0.1:0", "--db", "sqlite:" + directory.path("bad.sqlite")] + bad
            #expect(try runTool(ServeProcess.executable.path, arguments).0 == status, "\(bad)")
        }
    }
}

/// Asserts that a reply is the problem `code` with `status`.
func expectProblem(
    _ reply: Reply, _ status: Int, _ code: ProblemCode, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(reply.status == status, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(reply.problem?.code == code, "\(reply.text)", sourceLocation: sourceLocation)
}

/// A credential JSON with one member of `response` set to the string `value`.
func replacing(_ member: String, in credential: JSONValue, with value: String) throws -> Data {
    guard case .object(var members) = credential,
        let index = members.firstIndex(where: { $0.name == "response" }),
        case .object(var inner) = members[index].value
    else { throw TestFailure("not a credential JSON") }
    if let slot = inner.firstIndex(where: { $0.name == member }) {
        inner[slot].value = .string(value)
    } else {
        inner.append(JSONMember(member, .string(value)))
    }
    members[index].value = .object(inner)
    return JSON.serialize(.object(members))
}

/// The passkey ceremonies, as the sign-in page runs them.
extension Client {
    func registrationOptions(_ request: PasskeyRegistrationOptionsRequest, token: String? = nil) async throws
        -> PasskeyCreationOptions
    {
        let reply = try await send(API.passkeyRegistrationOptions, request, token: token)
        #expect(reply.status == 200, "\(reply.text)")
        return try reply.decode(PasskeyCreationOptions.self)
    }

    func loginOptions(username: Username? = nil) async throws -> PasskeyRequestOptions {
        let reply = try await send(
            API.passkeyLoginOptions, PasskeyLoginOptionsRequest(username: username))
        #expect(reply.status == 200, "\(reply.text)")
        return try reply.decode(PasskeyRequestOptions.self)
    }

    /// Signs up `username` with `authenticator`'s passkey.
    func passkeySignUp(_ username: String, _ authenticator: TestAuthenticator) async throws
        -> PasskeyRegistrationResult
    {
        let options = try await registrationOptions(
            PasskeyRegistrationOptionsRequest(username: Username(username)))
        #expect(options.rpID == authenticator.rpId && options.userName == username)
        #expect(options.algorithms == [-7, -8, -257])
        let reply = try await send(
            API.passkeyRegistrationVerify,
            raw: authenticator.registration(challenge: options.challenge))
        #expect(reply.status == 200, "\(reply.text)")
        return try reply.decode(PasskeyRegistrationResult.self)
    }

    func passkeyLogin(_ body: Data) async throws -> Reply {
        try await send(API.passkeyLoginVerify, raw: body)
    }
}
