import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// CIBA (OpenID CIBA Core 1.0, poll mode here; ping mode in ``CIBAPingTests``) with RFC 9396
/// authorization details, through the server: a payment service asks, the user's device decides,
/// the service fetches its tokens once; every refusal the specifications name, and that a refused
/// request writes nothing.
@Suite("CIBA")
struct CIBATests {
    /// A full Ethereum address: the recipient is shown and signed whole.
    static let recipient = "0x52908400098527886E0F7030069857D2E4169EE7"
    static let details =
        #"[{"type":"keybound_transfer","amount":"0.5","asset":"ETH","recipient":"\#(recipient)"}]"#

    /// A provider with a CIBA client and alice, who has a bound device.
    struct Setup {
        let fixture: OAuthFixture
        let service: OAuthClientInfo
        let tokens: TokenResponse
        let deviceKey: P256SigningKey
        let deviceID: String

        init(
            _ transport: Transport = .inProcess, engine: Engine = .sqlite, ping: String? = nil,
            _ adjust: @escaping (inout Configuration) -> Void = { _ in }
        ) async throws {
            fixture = try OAuthFixture(transport, engine: engine, adjust)
            var registration = OAuthClientRegistration(name: "Wallet backend", redirectURIs: [])
            registration.confidential = true
            registration.ciba = true
            registration.backchannelNotificationEndpoint = ping
            registration.scopes = ["payments"]
            service = try fixture.administration.addClient(registration)
            (tokens, deviceKey, deviceID) = try await fixture.client.userWithDevice("alice")
        }

        /// `POST /oauth/bc-authorize` by the service (HTTP Basic) for alice, with `pairs`
        /// replacing or adding to the defaults (an empty value leaves a parameter out).
        func ask(_ pairs: [(String, String)] = [], by client: OAuthClientInfo? = nil) async throws -> Reply {
            var parameters: [(String, String)] = [
                ("scope", "openid"), ("login_hint", "alice"), ("binding_message", "Order 4711"),
                ("authorization_details", CIBATests.details),
            ]
            for (name, value) in pairs {
                parameters.removeAll { $0.0 == name }
                if !value.isEmpty { parameters.append((name, value)) }
            }
            return try await fixture.post(
                OAuthPaths.backchannelAuthentication, parameters, headers: basic(client ?? service))
        }

        /// A request that was accepted: its `auth_req_id`.
        func authReqID(_ pairs: [(String, String)] = []) async throws -> String {
            let reply = try await ask(pairs)
            #expect(reply.status == 200, "\(reply.text)")
            return try #require(try JSON.parse(reply.body)[string: "auth_req_id"])
        }

        /// The service's token request for `authReqID`.
        func poll(_ authReqID: String, by client: OAuthClientInfo? = nil) async throws -> Reply {
            try await fixture.token(
                [("grant_type", CIBAGrant.type), ("auth_req_id", authReqID)],
                headers: basic(client ?? service))
        }

        /// What alice's app lists as pending.
        func pending() async throws -> [PendingApprovalInfo] {
            try await fixture.client.send(
                API.listApprovals, query: "status=pending", token: tokens.accessToken
            )
            .decode(PendingApprovalListResponse.self).approvals
        }

        /// Alice's device signs `approval`'s payload (or `signature`) and confirms.
        func confirm(_ approval: PendingApprovalInfo, signature: Data? = nil) async throws -> Reply {
            try await fixture.client.send(
                API.confirmApproval,
                ConfirmApprovalRequest(signature: try signature ?? sign(approval.payload, with: deviceKey)),
                parameters: [approval.approvalID], token: tokens.accessToken)
        }

        /// The approvals and CIBA requests stored.
        func rows() throws -> Int64? {
            try fixture.test.database.open().read { connection in
                try connection.queryOne(
                    "SELECT (SELECT COUNT(*) FROM approvals) + (SELECT COUNT(*) FROM ciba_requests)", []
                )?.integer(0)
            }
        }
    }

    /// The OAuth error of `reply`.
    static func error(_ reply: Reply) -> String? { try? JSON.parse(reply.body)[string: "error"] }

    @Test("poll mode end to end: asked, listed with its message, signed, tokens once", arguments: Engine.all)
    func pollEndToEnd(engine: Engine) async throws {
        let setup = try await Setup(.live, engine: engine)
        let asked = try await setup.ask([("scope", "openid offline_access payments")])
        #expect(asked.status == 200, "\(asked.text)")
        #expect(asked.header("Cache-Control") == "no-store")
        let answer = try JSON.parse(asked.body)
        let authReqID = try #require(answer[string: "auth_req_id"])
        #expect(answer[member: "expires_in"] == .integer(300))
        #expect(answer[member: "interval"] == .integer(5))

        let early = try await setup.poll(authReqID)
        #expect(early.status == 400 && Self.error(early) == "authorization_pending", "\(early.text)")

        // The phone: the approval, with the service's message and name; the payload names the
        // transfer exactly, with the recipient as `to`.
        let listed = try #require(try await setup.pending().first)
        #expect(listed.bindingMessage == "Order 4711")
        #expect(listed.clientName == "Wallet backend")
        #expect(listed.deviceID == setup.deviceID)
        let payload = try SigningPayload(parsing: listed.payload)
        #expect(payload.action == (try transfer("0.5", asset: "ETH", to: Self.recipient)))
        #expect(payload.server == "keybound-test" && payload.device == setup.deviceID)
        let confirmed = try await setup.confirm(listed)
        #expect(confirmed.status == 200, "\(confirmed.text)")

        setup.fixture.test.clock.advance(by: 5)
        let granted = try await setup.poll(authReqID)
        #expect(granted.status == 200, "\(granted.text)")
        let tokens = try JSON.parse(granted.body)
        #expect(tokens[member: "authorization_details"] == (try JSON.parse(Data(Self.details.utf8))))
        #expect(tokens[string: "scope"] == "openid offline_access payments")
        #expect(tokens[string: "token_type"] == "Bearer")
        #expect(tokens[string: "refresh_token"] != nil)
        let keys = try await setup.fixture.keys()
        let access = try await setup.fixture.verify(try #require(tokens[string: "access_token"]))
        #expect(access.approvedAction == (try transfer("0.5", asset: "ETH", to: Self.recipient)))
        #expect(access.authenticationMethods == ["hwk"] && access.clientID == setup.service.clientID)
        let idToken = try CompactJWS(try #require(tokens[string: "id_token"])).claims()
        #expect(idToken[string: "aud"] == setup.service.clientID && idToken[string: "sub"] == access.subject)
        // The receipt: the device's own signature, checked offline, with the message shown.
        let receipt = try #require(tokens[string: "keybound_receipt"])
        let verified = try ReceiptVerifier(issuer: testIssuer, serverID: "keybound-test", keys: keys)
            .verify(receipt)
        #expect(verified.action == (try transfer("0.5", asset: "ETH", to: Self.recipient)))
        #expect(verified.bindingMessage == "Order 4711" && verified.deviceID == setup.deviceID)

        // A gateway that introspects the access token sees what was approved (RFC 9396 §9.2).
        var gatewayRegistration = OAuthClientRegistration(
            name: "Gateway", redirectURIs: ["https://gw.example/cb"])
        gatewayRegistration.confidential = true
        let gateway = try setup.fixture.administration.addClient(gatewayRegistration)
        let introspected = try await setup.fixture.introspect(
            try #require(tokens[string: "access_token"]), by: gateway)
        #expect(introspected[member: "active"] == .bool(true))
        #expect(introspected[member: "authorization_details"] == (try JSON.parse(Data(Self.details.utf8))))

        // Once: a second redemption is refused, and the phone lists nothing.
        let again = try await setup.poll(authReqID)
        #expect(again.status == 400 && Self.error(again) == "invalid_grant", "\(again.text)")
        #expect(try await setup.pending().isEmpty)
    }

    @Test("an approved request whose user an administrator locked meanwhile is access_denied")
    func aLockedUserGetsNoTokens() async throws {
        let setup = try await Setup(.live) { $0.adminListen = ListenAddress(host: "127.0.0.1", port: 0) }
        let live = setup.fixture.test
        let console = Client(baseURL: try #require(live.server.adminURL))
        let admin = try await ConsoleTests.admin(live, console)
        let authReqID = try await setup.authReqID()
        let listed = try #require(try await setup.pending().first)
        #expect(try await setup.confirm(listed).status == 200)
        let locked = try await console.send(
            "POST", "/admin/v1/users/\(setup.tokens.userID)/lock", token: admin, checkSpec: false)
        #expect(locked.status == 204, "\(locked.text)")
        live.clock.advance(by: 5)
        let refused = try await setup.poll(authReqID)
        #expect(refused.status == 400 && Self.error(refused) == "access_denied", "\(refused.text)")
        // Nothing was redeemed: unlocked, the approved request gives its tokens.
        #expect(
            try await console.send(
                "POST", "/admin/v1/users/\(setup.tokens.userID)/unlock", token: admin, checkSpec: false
            ).status == 204)
        live.clock.advance(by: 5)
        let granted = try await setup.poll(authReqID)
        #expect(granted.status == 200, "\(granted.text)")
    }

    @Test("polling sooner than the interval is slow_down, and the interval grows by 5 s")
    func slowDown() async throws {
        let setup = try await Setup()
        let id = try await setup.authReqID()
        let first = try await setup.poll(id)
        #expect(Self.error(first) == "authorization_pending")
        setup.fixture.test.clock.advance(by: 4)
        let tooSoon = try await setup.poll(id)
        #expect(tooSoon.status == 400 && Self.error(tooSoon) == "slow_down", "\(tooSoon.text)")
        // The interval is 10 s now: 9 s later is still too soon, 10 s is not.
        setup.fixture.test.clock.advance(by: 9)
        #expect(Self.error(try await setup.poll(id)) == "slow_down")
        setup.fixture.test.clock.advance(by: 15)
        #expect(Self.error(try await setup.poll(id)) == "authorization_pending")
    }

    @Test("requested_expiry shortens the request; past it the client is told expired_token")
    func expiry() async throws {
        let setup = try await Setup { $0.cibaInterval = 2 }
        let asked = try await setup.ask([("requested_expiry", "30")])
        let answer = try JSON.parse(asked.body)
        #expect(answer[member: "expires_in"] == .integer(30) && answer[member: "interval"] == .integer(2))
        let id = try #require(answer[string: "auth_req_id"])
        let listed = try #require(try await setup.pending().first)
        setup.fixture.test.clock.advance(by: 31)
        let expired = try await setup.poll(id)
        #expect(expired.status == 400 && Self.error(expired) == "expired_token", "\(expired.text)")
        #expect(try await setup.pending().isEmpty)
        let late = try await setup.confirm(listed)
        #expect(late.status == 410, "\(late.text)")
        #expect(Self.error(try await setup.poll(id)) == "expired_token")
    }

    @Test("a denied request and one whose signature failed are access_denied, for good")
    func deniedAndFailed() async throws {
        let setup = try await Setup()
        let denied = try await setup.authReqID()
        let first = try #require(try await setup.pending().first)
        let deny = try await setup.fixture.client.send(
            API.denyApproval, parameters: [first.approvalID], token: setup.tokens.accessToken)
        #expect(deny.status == 200, "\(deny.text)")
        let answer = try await setup.poll(denied)
        #expect(answer.status == 400 && Self.error(answer) == "access_denied", "\(answer.text)")

        let failed = try await setup.authReqID()
        let second = try #require(try await setup.pending().first)
        let forged = try await setup.confirm(
            second, signature: try sign(Data("other".utf8), with: setup.deviceKey))
        #expect(forged.status == 401, "\(forged.text)")
        // The right signature afterwards cannot approve it.
        let honest = try await setup.confirm(second)
        #expect(honest.status == 409, "\(honest.text)")
        setup.fixture.test.clock.advance(by: 6)
        #expect(Self.error(try await setup.poll(failed)) == "access_denied")
    }

    @Test("another client's auth_req_id, a made-up one, a client without --ciba: refused, the owner unharmed")
    func otherClients() async throws {
        let setup = try await Setup()
        let id = try await setup.authReqID()
        var registration = OAuthClientRegistration(name: "Other service", redirectURIs: [])
        registration.confidential = true
        registration.ciba = true
        let other = try setup.fixture.administration.addClient(registration)
        let stolen = try await setup.poll(id, by: other)
        #expect(stolen.status == 400 && Self.error(stolen) == "invalid_grant", "\(stolen.text)")
        let madeUp = try await setup.poll(SecureRandomBytes.token())
        #expect(madeUp.status == 400 && Self.error(madeUp) == "invalid_grant")

        let plain = try setup.fixture.addClient(
            redirectURIs: ["https://app.example/cb"], confidential: true)
        let refused = try await setup.ask(by: plain)
        #expect(refused.status == 400 && Self.error(refused) == "unauthorized_client", "\(refused.text)")
        #expect(Self.error(try await setup.poll(id, by: plain)) == "unauthorized_client")
        let public_ = try setup.fixture.addClient()
        let anonymous = try await setup.fixture.post(
            OAuthPaths.backchannelAuthentication,
            [
                ("client_id", public_.clientID), ("scope", "openid"), ("login_hint", "alice"),
                ("authorization_details", Self.details),
            ])
        #expect(
            anonymous.status == 400 && Self.error(anonymous) == "unauthorized_client", "\(anonymous.text)")
        let wrongSecret = try await setup.ask(by: setup.service.with(secret: SecureRandomBytes.token()))
        #expect(wrongSecret.status == 401 && Self.error(wrongSecret) == "invalid_client")

        // The owner still gets its tokens.
        let listed = try #require(try await setup.pending().first)
        #expect(try await setup.confirm(listed).status == 200)
        #expect(try await setup.poll(id).status == 200)
    }

    @Test(
        "bad requests get the error CIBA and RFC 9396 name, and write nothing",
        arguments: [
            (
                "authorization_details",
                #"[{"type":"payment_initiation","amount":"0.5","asset":"ETH","recipient":"0xAb"}]"#,
                "invalid_authorization_details"
            ),
            (
                "authorization_details",
                #"[{"type":"keybound_transfer","amount":"0.5","asset":"ETH","recipient":"0xAb","fee":"1"}]"#,
                "invalid_authorization_details"
            ),
            (
                "authorization_details",
                #"[{"type":"keybound_transfer","amount":"0.5e1","asset":"ETH","recipient":"0xAb"}]"#,
                "invalid_authorization_details"
            ),
            (
                "authorization_details",
                #"[{"type":"keybound_transfer","amount":"0.5","asset":"ETH","recipient":"0x Ab"}]"#,
                "invalid_authorization_details"
            ),
            ("authorization_details", #"{"type":"keybound_transfer"}"#, "invalid_authorization_details"),
            ("authorization_details", "[]", "invalid_authorization_details"),
            ("authorization_details", "not json", "invalid_authorization_details"),
            ("authorization_details", "", "invalid_request"),
            ("binding_message", String(repeating: "x", count: 65), "invalid_binding_message"),
            ("binding_message", "Order\n4711", "invalid_binding_message"),
            ("binding_message", "Pay \u{202E}1174 redrO", "invalid_binding_message"),
            ("login_hint", "mallory", "unknown_user_id"),
            ("login_hint", "", "invalid_request"),
            ("scope", "profile", "invalid_scope"),
            ("scope", "openid admin", "invalid_scope"),
            ("requested_expiry", "301", "invalid_request"),
            ("requested_expiry", "0", "invalid_request"),
            ("requested_expiry", "+30", "invalid_request"),
            ("id_token_hint", "eyJ.eyJ.sig", "invalid_request"),
        ])
    func refusals(parameter: String, value: String, error: String) async throws {
        let setup = try await Setup()
        let before = try setup.rows()
        let reply = try await setup.ask([(parameter, value)])
        #expect(reply.status == 400 && Self.error(reply) == error, "\(reply.text)")
        #expect(reply.header("Content-Type") == "application/json")
        #expect(try setup.rows() == before)
    }

    @Test("a 64-character binding message with letters beyond ASCII is accepted, and shown as given")
    func longestBindingMessage() async throws {
        let setup = try await Setup()
        let message = String(repeating: "ü", count: 60) + " 4️⃣2 "
        #expect(message.count == 64)
        _ = try await setup.authReqID([("binding_message", message)])
        #expect(try await setup.pending().first?.bindingMessage == message)
    }

    @Test("a user without a usable device: access_denied, nothing written")
    func noDevice() async throws {
        let setup = try await Setup()
        _ = try await setup.fixture.client.createAccount("bob")
        let before = try setup.rows()
        let reply = try await setup.ask([("login_hint", "bob")])
        #expect(reply.status == 403 && Self.error(reply) == "access_denied", "\(reply.text)")
        #expect(try setup.rows() == before)
        // alice's device revoked: her requests are refused the same way.
        let revoked = try await setup.fixture.client.send(
            API.revokeDevice, parameters: [setup.deviceID], token: setup.tokens.accessToken)
        #expect(revoked.status == 204, "\(revoked.text)")
        #expect(Self.error(try await setup.ask()) == "access_denied")
    }

    @Test("the approval goes to the device bound last")
    func newestDevice() async throws {
        let setup = try await Setup()
        let second = try await setup.fixture.client.login("alice", clientID: "app-2")
        setup.fixture.test.clock.advance(by: 1)
        let (_, newest) = try await setup.fixture.client.bindDevice(second.accessToken)
        _ = try await setup.authReqID()
        #expect(try await setup.pending().map(\.deviceID) == [newest])
    }

    @Test(
        "eight token requests at once on an approved request: exactly one gets tokens", arguments: Engine.all)
    func concurrentRedemption(engine: Engine) async throws {
        let setup = try await Setup(.live, engine: engine)
        let id = try await setup.authReqID()
        let listed = try #require(try await setup.pending().first)
        #expect(try await setup.confirm(listed).status == 200)
        let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
            for _ in 0..<8 { group.addTask { try await setup.poll(id) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(replies.filter { $0.status == 200 }.count == 1, "\(replies.map(\.text))")
        #expect(replies.filter { Self.error($0) == "invalid_grant" }.count == 7)
        let sessions = try setup.fixture.test.database.open().read { connection in
            try connection.queryOne(
                "SELECT COUNT(*) FROM sessions WHERE client_id = ?", [.text(setup.service.clientID)])?
                .integer(0)
        }
        #expect(sessions == 1)
    }

    @Test("the metadata documents name the endpoint, both modes, the grant and the detail type")
    func discovery() async throws {
        let setup = try await Setup()
        for path in [OAuthPaths.openIDConfiguration, OAuthPaths.authorizationServer] {
            let metadata = try JSON.parse(try await setup.fixture.client.send("GET", path).body)
            #expect(
                metadata[string: "backchannel_authentication_endpoint"] == testIssuer + "/oauth/bc-authorize")
            #expect(
                metadata[member: "backchannel_token_delivery_modes_supported"]
                    == .array([.string("poll"), .string("ping")]))
            #expect(metadata[member: "backchannel_user_code_parameter_supported"] == .bool(false))
            #expect(
                metadata[member: "authorization_details_types_supported"]
                    == .array([.string("keybound_transfer")]))
            guard case .array(let grants)? = metadata[member: "grant_types_supported"] else {
                Issue.record("no grant_types_supported")
                continue
            }
            #expect(grants.contains(.string(CIBAGrant.type)))
        }
    }

    @Test("registration: --ciba needs a confidential client; a notification endpoint needs --ciba and https")
    func registration() throws {
        let fixture = try OAuthFixture()
        func refused(_ adjust: (inout OAuthClientRegistration) -> Void) -> String? {
            var registration = OAuthClientRegistration(name: "Service", redirectURIs: [])
            registration.ciba = true
            registration.confidential = true
            adjust(&registration)
            do {
                _ = try fixture.administration.addClient(registration)
                return nil
            } catch let error as OAuthError {
                return error.description
            } catch {
                return "\(error)"
            }
        }
        #expect(refused { $0.confidential = false }?.contains("--confidential or --jwks") == true)
        #expect(refused { $0.ciba = false }?.contains("--redirect-uri") == true)
        #expect(refused { $0.backchannelNotificationEndpoint = "http://pay.example/ping" } != nil)
        #expect(refused { $0.backchannelNotificationEndpoint = "https://user:pw@pay.example/ping" } != nil)
        #expect(refused { $0.backchannelNotificationEndpoint = "https://pay.example/ping#x" } != nil)
        #expect(refused { $0.backchannelNotificationEndpoint = "https://pay.example/ping" } == nil)
        #expect(refused { $0.backchannelNotificationEndpoint = "http://127.0.0.1:9/ping" } == nil)
        #expect(
            refused {
                $0.ciba = false
                $0.redirectURIs = ["https://a.example/cb"]
                $0.backchannelNotificationEndpoint = "https://pay.example/ping"
            }?.contains("for a --ciba client") == true)
        let clients = try fixture.administration.clients()
        #expect(clients.map(\.ciba) == [.ping, .ping])
    }
}

extension OAuthClientInfo {
    /// The same client with another secret (a wrong one).
    func with(secret: String) -> OAuthClientInfo {
        OAuthClientInfo(
            clientID: clientID, name: name, redirectURIs: redirectURIs, authentication: authentication,
            scopes: scopes, dpopRequired: dpopRequired, createdAt: createdAt, ciba: ciba,
            notificationEndpoint: notificationEndpoint, secret: secret)
    }
}
