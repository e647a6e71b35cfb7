import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The operator console's API (docs/console.md) as an attacker and an administrator meet it: only
/// on its own listener, only for administrators, every change audited with the administrator's
/// id, and the overview's counts equal to the traffic.
@Suite("Operator console")
struct ConsoleTests {
    /// A live server with the console on a free port of its own, and a client of that port.
    static func consoleServer(
        engine: Engine = .sqlite, instances: Int = 1, _ adjust: (inout Configuration) -> Void = { _ in }
    ) throws -> (TestServer, [Client]) {
        let live = try TestServer(engine: engine, instances: instances) {
            $0.adminListen = ListenAddress(host: "127.0.0.1", port: 0)
            adjust(&$0)
        }
        let consoles = try live.servers.map { server in Client(baseURL: try #require(server.adminURL)) }
        return (live, consoles)
    }

    /// An account with the admin role, signed in on the console with its password: its token.
    static func admin(_ live: TestServer, _ console: Client, name: String = "root") async throws -> String {
        try await live.client.createAccount(name)
        try AccountAdministration(configuration: live.server.configuration).grant(.admin, to: name)
        let reply = try await console.send(
            ConsoleAPI.passwordLogin,
            raw: PasswordLoginRequest(
                username: try Username(name), password: Client.password, clientID: ClientID("console:test")
            ).jsonData, checkSpec: false)
        #expect(reply.status == 200, "\(reply.text)")
        return try reply.decode(TokenResponse.self).accessToken
    }

    static func json(_ reply: Reply) throws -> JSONValue { try JSON.parse(reply.body) }

    @Test("no console route answers on the API's listener, and there is no console without --admin-listen")
    func consoleOnlyOnItsListener() async throws {
        let (live, consoles) = try Self.consoleServer()
        let token = try await Self.admin(live, consoles[0])
        for route in Application.adminRoutes where route.pattern != "/" {
            let path = route.pattern.replacingOccurrences(of: "{id}", with: "x")
            let reply = try await live.client.send(route.method, path, token: token, checkSpec: false)
            #expect(reply.status == 404 || reply.status == 405, "\(route.method) \(path) on the API port")
        }
        let plain = try TestServer()
        #expect(plain.server.adminPort == nil && plain.server.adminURL == nil)
    }

    @Test("a non-administrator is refused on every console route, and cannot sign in to it")
    func nonAdminsAreRefusedEverywhere() async throws {
        let (live, consoles) = try Self.consoleServer()
        let console = consoles[0]
        _ = try await Self.admin(live, console)
        try await live.client.createAccount("bob")
        let bob = try await live.client.login("bob")
        #expect(!ConsoleAPI.adminOnly.isEmpty)
        for (method, pattern) in ConsoleAPI.adminOnly {
            let path = pattern.replacingOccurrences(of: "{id}", with: "usr_x")
            let body = method == "POST" ? Data("{}".utf8) : nil
            let refused = try await console.send(
                method, path, body: body, token: bob.accessToken, checkSpec: false)
            #expect(refused.status == 403, "\(method) \(path): \(refused.text)")
            #expect(refused.problem?.code == .adminRequired, "\(method) \(path)")
            let anonymous = try await console.send(method, path, body: body, checkSpec: false)
            #expect(anonymous.status == 401, "\(method) \(path) without a token")
        }
        // Bob's right password on the console opens no session there.
        let sessionsBefore = try Self.liveSessions(live, username: "bob")
        let signIn = try await console.send(
            ConsoleAPI.passwordLogin,
            raw: PasswordLoginRequest(
                username: Username("bob"), password: Client.password, clientID: ClientID("console:bob")
            ).jsonData, checkSpec: false)
        #expect(signIn.status == 403)
        #expect(signIn.problem?.code == .adminRequired)
        #expect(try Self.liveSessions(live, username: "bob") == sessionsBefore)
        // Garbage in every console input: a clear 4xx, never a 5xx.
        let token = try await Self.admin(live, console, name: "root2")
        for path in [
            "/admin/v1/users?query=" + String(repeating: "a", count: 65), "/admin/v1/audit?since=yesterday",
            "/admin/v1/audit?limit=0", "/admin/v1/users/%00", "/admin/v1/webhooks/none/deliveries",
        ] {
            let reply = try await console.send("GET", path, token: token, checkSpec: false)
            #expect((400..<500).contains(reply.status), "GET \(path): \(reply.status)")
        }
        for body in ["", "[]", "{\"url\": 1}", "{\"url\": \"ftp://x\", \"events\": [\"nope\"]}"] {
            let reply = try await console.send(
                "POST", "/admin/v1/webhooks", body: Data(body.utf8), token: token, checkSpec: false)
            #expect(reply.status == 400, "POST webhooks \(body): \(reply.text)")
        }
    }

    static func liveSessions(_ live: TestServer, username: String) throws -> Int64 {
        try live.database.open().read { connection in
            try connection.queryOne(
                """
                SELECT COUNT(*) FROM sessions s JOIN users u ON u.id = s.user_id
                WHERE u.username = ? AND s.revoked_at IS NULL
                """, [.text(username)])?.integer(0) ?? -1
        }
    }

    @Test(
        "an administrator revokes a device, locks and unlocks an account; the audit log names them",
        arguments: Engine.all)
    func administratorActions(engine: Engine) async throws {
        let (live, consoles) = try Self.consoleServer(engine: engine)
        let console = consoles[0]
        let token = try await Self.admin(live, console)
        let me = try Self.json(try await console.send("GET", "/admin/v1/me", token: token, checkSpec: false))
        let adminID = try #require(me.field("user_id")?.text)
        let (alice, key, deviceID) = try await live.client.userWithDevice("alice")

        // Found by a part of the name.
        let found = try Self.json(
            try await console.send("GET", "/admin/v1/users?query=lic", token: token, checkSpec: false))
        guard case .array(let users)? = found.field("users") else { throw TestFailure("no users") }
        #expect(users.compactMap { $0.field("username")?.text } == ["alice"])
        let detail = try Self.json(
            try await console.send("GET", "/admin/v1/users/\(alice.userID)", token: token, checkSpec: false))
        guard case .array(let devices)? = detail.field("devices") else { throw TestFailure("no devices") }
        #expect(devices.compactMap { $0.field("device_id")?.text } == [deviceID])

        // Revoked: the device's next login is refused, and the session it opened ended.
        let first = try await live.client.challenge(deviceID)
        let deviceSession = try await live.client.deviceLogin(
            challengeID: first.challengeID, signature: try sign(first.payload, with: key)
        ).decode(TokenResponse.self)
        let revoke = try await console.send(
            "DELETE", "/admin/v1/devices/\(deviceID)", token: token, checkSpec: false)
        #expect(revoke.status == 204, "\(revoke.text)")
        let challenge = try await live.client.send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
        if challenge.status == 201 {
            let payload = try challenge.decode(ChallengeResponse.self)
            let refused = try await live.client.deviceLogin(
                challengeID: payload.challengeID, signature: try sign(payload.payload, with: key))
            #expect(refused.problem?.code == .deviceRevoked, "\(refused.text)")
        } else {
            #expect(challenge.problem?.code == .deviceRevoked, "\(challenge.text)")
        }
        #expect(try await live.client.send(API.me, token: deviceSession.accessToken).status == 401)

        // Locked: the right password opens no session, and nothing else does; unlocked, it does.
        let fresh = try await live.client.login("alice")
        #expect(
            try await console.send(
                "POST", "/admin/v1/users/\(alice.userID)/lock", token: token, checkSpec: false
            )
            .status == 204)
        #expect(try await live.client.send(API.me, token: fresh.accessToken).status == 401)
        let locked = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(
                username: Username("alice"), password: Client.password, clientID: ClientID("app-1")))
        #expect(locked.status == 403)
        #expect(locked.problem?.code == .accountLocked)
        #expect(
            try await console.send(
                "POST", "/admin/v1/users/\(alice.userID)/unlock", token: token, checkSpec: false
            )
            .status == 204)
        _ = try await live.client.login("alice")

        // The audit log shows what the administrator did, under their id.
        let audit = try Self.json(
            try await console.send(
                "GET", "/admin/v1/audit?user=alice&limit=50", token: token, checkSpec: false))
        guard case .array(let events)? = audit.field("events") else { throw TestFailure("no events") }
        let byAdmin = events.filter { $0.field("actor_id")?.text == adminID }.compactMap {
            $0.field("type")?.text
        }
        #expect(Set(byAdmin) == ["device_revoked", "account_locked", "account_unlocked"])
        // And the user sees it in their own history.
        let own = try await live.client.send(
            API.audit, token: try await live.client.login("alice").accessToken
        )
        .decode(AuditListResponse.self)
        #expect(own.events.contains { $0.type == .accountLocked && $0.actorID == adminID })
    }

    @Test("a change needs a sign-in within five minutes; reading does not")
    func changesNeedARecentSignIn() async throws {
        let (live, consoles) = try Self.consoleServer()
        let console = consoles[0]
        let token = try await Self.admin(live, console)
        let (alice, _, _) = try await live.client.userWithDevice("alice")
        live.clock.advance(by: 301)
        let stale = try await console.send(
            "POST", "/admin/v1/users/\(alice.userID)/lock", token: token, checkSpec: false)
        #expect(stale.status == 403)
        #expect(stale.problem?.code == .stepUpRequired)
        #expect(
            try await console.send("GET", "/admin/v1/users/\(alice.userID)", token: token, checkSpec: false)
                .status == 200)
        #expect(try Self.liveSessions(live, username: "alice") == 1)
        // Taking the role refuses the token at once, reads included.
        try AccountAdministration(configuration: live.server.configuration).revoke(.admin, from: "root")
        let gone = try await console.send("GET", "/admin/v1/me", token: token, checkSpec: false)
        #expect(gone.problem?.code == .adminRequired)
    }

    /// The overview's series by name, summed over the day.
    static func overviewTotals(_ console: Client, _ token: String) async throws -> [String: Int] {
        let overview = try Self.json(
            try await console.send("GET", "/admin/v1/overview", token: token, checkSpec: false))
        guard case .array(let series)? = overview.field("series") else { throw TestFailure("no series") }
        var totals: [String: Int] = [:]
        for item in series {
            guard let name = item.field("name")?.text, case .array(let counts)? = item.field("counts") else {
                continue
            }
            #expect(counts.count == 288)
            totals[name] = counts.reduce(0) { sum, value in
                guard case .number(let text) = value else { return sum }
                return sum + (Int(text) ?? 0)
            }
        }
        return totals
    }

    @Test("the overview counts every instance's traffic exactly", arguments: Engine.all)
    func overviewCountsTheTraffic(engine: Engine) async throws {
        let instances = engine == .postgres ? 2 : 1
        let (live, consoles) = try Self.consoleServer(engine: engine, instances: instances)
        let token = try await Self.admin(live, consoles[0])  // one password login
        for (index, client) in live.clients.enumerated() {
            try await client.createAccount("user\(index)")
            for _ in 0..<3 { _ = try await client.login("user\(index)") }
            for _ in 0..<2 {
                let wrong = try await client.send(
                    API.passwordLogin,
                    PasswordLoginRequest(
                        username: Username("user\(index)"), password: "wrong password",
                        clientID: ClientID("app-1")))
                #expect(wrong.status == 401)
            }
        }
        // Every instance's counts are in the database once it flushed (every 5 s, or when asked).
        for server in live.servers { server.flushTrafficCounts() }
        let totals = try await Self.overviewTotals(consoles[0], token)
        #expect(totals["login.password"] == 1 + 3 * instances)
        #expect(totals["failure.password"] == 2 * instances)
        #expect(totals["login.device"] == 0)
        // The other instance's console shows the same picture.
        if instances > 1 {
            let other = try await Self.admin(live, consoles[1], name: "root1")
            for server in live.servers { server.flushTrafficCounts() }
            let seen = try await Self.overviewTotals(consoles[1], other)
            #expect(seen["login.password"] == 2 + 3 * instances)
            #expect(seen["failure.password"] == 2 * instances)
        }
    }

    @Test("OAuth clients and webhooks are added, listed and removed, each change audited with the admin's id")
    func configurationChanges() async throws {
        let (live, consoles) = try Self.consoleServer { $0.allowPrivateWebhooks = true }
        let console = consoles[0]
        let token = try await Self.admin(live, console)
        let adminID = try #require(
            try Self.json(try await console.send("GET", "/admin/v1/me", token: token, checkSpec: false))
                .field("user_id")?.text)
        func send(_ method: String, _ path: String, _ body: String? = nil) async throws -> Reply {
            try await console.send(
                method, path, body: body.map { Data($0.utf8) }, token: token, checkSpec: false)
        }

        let added = try await send(
            "POST", "/admin/v1/oauth-clients",
            #"{"name": "Example web", "redirect_uris": ["https://app.example.com/callback"], "confidential": true}"#
        )
        #expect(added.status == 201, "\(added.text)")
        let client = try Self.json(added)
        let clientID = try #require(client.field("client_id")?.text)
        #expect(client.field("secret")?.text?.isEmpty == false)
        let refused = try await send(
            "POST", "/admin/v1/oauth-clients",
            #"{"name": "Bad", "redirect_uris": ["javascript:alert(1)"], "confidential": false}"#)
        #expect(refused.status == 400, "\(refused.text)")
        #expect(try await send("GET", "/admin/v1/oauth-clients").text.contains(clientID))
        #expect(try await send("DELETE", "/admin/v1/oauth-clients/\(clientID)").status == 204)
        #expect(try await send("DELETE", "/admin/v1/oauth-clients/\(clientID)").status == 404)
        #expect(!(try await send("GET", "/admin/v1/oauth-clients").text.contains(clientID)))

        // A webhook endpoint that never answers (the discard port): its delivery fails, and is
        // sent again on request.
        let hook = try await send(
            "POST", "/admin/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook", "events": ["device.revoked"]}"#
        )
        #expect(hook.status == 201, "\(hook.text)")
        let webhookID = try #require(try Self.json(hook).field("id")?.text)
        #expect(try Self.json(hook).field("secret")?.text?.hasPrefix("whsec_") == true)
        let (_, _, deviceID) = try await live.client.userWithDevice("alice")
        #expect(try await send("DELETE", "/admin/v1/devices/\(deviceID)").status == 204)
        let deliveries = try Self.json(try await send("GET", "/admin/v1/webhooks/\(webhookID)/deliveries"))
        guard case .array(let list)? = deliveries.field("deliveries"), let first = list.first else {
            throw TestFailure("no delivery")
        }
        #expect(first.field("type")?.text == "device.revoked")
        let deliveryID = try #require(first.field("id")?.text)
        #expect(try await send("POST", "/admin/v1/webhook-deliveries/\(deliveryID)/retry").status == 204)
        #expect(try await send("POST", "/admin/v1/webhook-deliveries/whd_none/retry").status == 404)
        #expect(try await send("DELETE", "/admin/v1/webhooks/\(webhookID)").status == 204)
        #expect(try await send("GET", "/admin/v1/webhooks/\(webhookID)/deliveries").status == 404)

        let audit = try Self.json(
            try await send("GET", "/admin/v1/audit?type=configuration_changed&actor=\(adminID)"))
        guard case .array(let events)? = audit.field("events") else { throw TestFailure("no events") }
        let details = Set(events.compactMap { $0.field("detail")?.text })
        #expect(
            details == [
                "OAuth client Example web added", "OAuth client \(clientID) removed",
                "webhook http://127.0.0.1:9/hook added", "webhook delivery \(deliveryID) sent again",
                "webhook http://127.0.0.1:9/hook removed",
            ])
    }

    @Test("the console's page is served under the strict policy, with no inline script")
    func thePageIsStrict() async throws {
        let (live, consoles) = try Self.consoleServer()
        defer { withExtendedLifetime(live) {} }
        let page = try await consoles[0].send("GET", "/", checkSpec: false)
        #expect(page.status == 200)
        #expect(page.header("Content-Security-Policy") == SignInPage.contentSecurityPolicy)
        #expect(!page.text.contains("<script>"))
        #expect(page.text.range(of: #" on[a-z]+="#, options: .regularExpression) == nil)
        let script = try await consoles[0].send("GET", "/console.js", checkSpec: false)
        #expect(script.text.hasPrefix("// The API routes this page calls"))
        #expect(script.text.contains("class Problem") && script.text.hasSuffix(ConsolePageFiles.script))
    }

    @Test("every series of the overview counts exactly its traffic", arguments: Engine.all)
    func everySeriesCounts(engine: Engine) async throws {
        let (live, consoles) = try Self.consoleServer(engine: engine) { $0.allowPrivateWebhooks = true }
        let console = consoles[0]
        _ = try await Self.admin(live, console)  // login.password 1
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")  // login.password 2
        let good = try await live.client.challenge(deviceID)
        let session = try await live.client.deviceLogin(
            challengeID: good.challengeID, signature: try sign(good.payload, with: key)
        ).decode(TokenResponse.self)  // login.device 1
        let bad = try await live.client.challenge(deviceID)
        let forged = try await live.client.deviceLogin(
            challengeID: bad.challengeID, signature: try sign(Data("something else".utf8), with: key))
        #expect(forged.status == 401)  // failure.device 1
        try await live.client.createAccount("bob")
        for attempt in 1...6 {
            let wrong = try await live.client.send(
                API.passwordLogin,
                PasswordLoginRequest(
                    username: Username("bob"), password: "wrong password", clientID: ClientID("app-1")))
            #expect(wrong.status == (attempt <= 5 ? 401 : 429))  // failure.password 5, throttled.password 1
        }
        var approvals: [ApprovalChallengeResponse] = []
        for _ in 0..<3 {
            let created = try await live.client.send(
                API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: try transfer()),
                token: session.accessToken)
            approvals.append(try created.decode(ApprovalChallengeResponse.self))
        }
        let confirmed = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: try sign(approvals[0].payload, with: key)),
            parameters: [approvals[0].approvalID], token: session.accessToken)
        #expect(confirmed.status == 200)  // approval.approved 1
        let denied = try await live.client.send(
            API.denyApproval, parameters: [approvals[1].approvalID], token: session.accessToken)
        #expect(denied.status == 200)  // approval.denied 1
        live.clock.advance(by: 301)  // the third expires: approval.expired 1
        // A webhook endpoint that never answers: one event, one failed attempt (the next one waits
        // for the manual clock, which stays).
        let token = try await Self.admin(live, console, name: "root2")  // login.password 3
        let hook = try await console.send(
            "POST", "/admin/v1/webhooks",
            body: Data(#"{"url": "http://127.0.0.1:9/hook", "events": ["device.revoked"]}"#.utf8),
            token: token,
            checkSpec: false)
        #expect(hook.status == 201)
        #expect(
            try await console.send("DELETE", "/admin/v1/devices/\(deviceID)", token: token, checkSpec: false)
                .status == 204)
        var totals: [String: Int] = [:]
        for _ in 0..<150 {
            totals = try await Self.overviewTotals(console, token)
            if totals["webhook.failed"] == 1 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        // The user's page shows the three approvals as they stand.
        let userID = try #require(
            try Self.json(
                try await console.send("GET", "/admin/v1/users?query=alice", token: token, checkSpec: false)
            )
            .field("users").flatMap { value -> String? in
                guard case .array(let users) = value else { return nil }
                return users.first?.field("user_id")?.text
            })
        let detail = try Self.json(
            try await console.send("GET", "/admin/v1/users/\(userID)", token: token, checkSpec: false))
        guard case .array(let shown)? = detail.field("approvals") else { throw TestFailure("no approvals") }
        #expect(
            Dictionary(
                uniqueKeysWithValues: shown.compactMap { approval in
                    approval.field("approval_id")?.text.map { ($0, approval.field("status")?.text ?? "") }
                })
                == [
                    approvals[0].approvalID: "approved", approvals[1].approvalID: "denied",
                    approvals[2].approvalID: "expired",
                ])
        #expect(
            totals == [
                "login.password": 3, "login.device": 1, "login.passkey": 0, "login.oauth": 0,
                "failure.password": 5, "failure.device": 1, "failure.passkey": 0, "throttled.password": 1,
                "throttled.device": 0, "throttled.passkey": 0, "approval.approved": 1, "approval.denied": 1,
                "approval.expired": 1, "webhook.failed": 1,
            ])
    }

    @Test("nothing an administrator sends to a console route gives a 5xx")
    func garbageGetsAClearRefusal() async throws {
        let (live, consoles) = try Self.consoleServer()
        let console = consoles[0]
        let token = try await Self.admin(live, console)
        let ids = [
            "x", "usr_" + String(repeating: "a", count: 120), "%00", "..", "a%2Fb", "%C3%A9", "%FF",
            String(repeating: "9", count: 128),
        ]
        let bodies = [
            "", "{", "[]", "null", #"{"url": null}"#,
            #"{"name": 1, "redirect_uris": {}, "confidential": "yes"}"#,
            #"{"url": "https://x.example", "events": [1, 2]}"#,
            "{\"name\": \"" + String(repeating: "n", count: 10_000) + "\"}",
        ]
        let queries = [
            "", "?query=%FF", "?query=%25_%5C", "?limit=-1", "?since=2026-13-40T00:00:00Z", "?until=%00",
            "?user=" + String(repeating: "u", count: 200), "?type=%00&address=::1",
        ]
        var sent = 0
        for route in Application.adminRoutes
        where route.pattern.hasPrefix("/admin/v1/") && route.pattern != "/admin/v1/sessions/current" {
            for id in route.pattern.contains("{id}") ? ids : [""] {
                let path = route.pattern.replacingOccurrences(of: "{id}", with: id)
                for body in route.method == "POST" ? bodies.map(Optional.some) : [nil] {
                    for query in route.method == "GET" ? queries : [""] {
                        let reply = try await console.send(
                            route.method, path + query, body: body.map { Data($0.utf8) }, token: token,
                            checkSpec: false)
                        sent += 1
                        #expect(
                            reply.status < 500, "\(route.method) \(path)\(query) \(body ?? ""): \(reply.text)"
                        )
                        if reply.status >= 400 { #expect(reply.problem != nil, "\(route.method) \(path)") }
                    }
                }
            }
        }
        #expect(sent > 400)
        #expect(try await console.send("GET", "/admin/v1/me", token: token, checkSpec: false).status == 200)
    }

    @Test(
        "traffic counts are kept as long as the retention, then housekeeping deletes them",
        arguments: Engine.all)
    func trafficCountsArePurged(engine: Engine) throws {
        let app = try InProcessApplication(engine) { $0.retention = 3600 }
        app.application.traffic.count(.login("password"), at: app.clock.now)
        app.application.flushTraffic()
        #expect(try app.count("SELECT COUNT(*) FROM traffic_counts") == 1)
        app.clock.advance(by: 3000)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM traffic_counts") == 1)
        app.clock.advance(by: 1000)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM traffic_counts") == 0)
    }

    @Test(
        "a locked account opens no session: not by password, device, passkey or OAuth code",
        arguments: Engine.all)
    func aLockedAccountOpensNoSession(engine: Engine) async throws {
        let oauth = try OAuthFixture(.live, engine: engine) {
            $0.adminListen = ListenAddress(host: "127.0.0.1", port: 0)
        }
        let live = oauth.test
        let console = Client(baseURL: try #require(live.server.adminURL))
        let token = try await Self.admin(live, console)
        let (alice, key, deviceID) = try await live.client.userWithDevice("alice")
        let carolKey = try PasskeyTests.authenticator(for: live)
        let carol = try await live.client.passkeySignUp("carol", carolKey)
        let app = try oauth.addClient()
        let pkce = PKCE()
        let code = try await oauth.code(app.clientID, session: alice.accessToken, pkce: pkce)
        for userID in [alice.userID, try #require(carol.tokens?.userID)] {
            let locked = try await console.send(
                "POST", "/admin/v1/users/\(userID)/lock", token: token, checkSpec: false)
            #expect(locked.status == 204, "\(locked.text)")
        }

        let challenge = try await live.client.challenge(deviceID)
        let device = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: try sign(challenge.payload, with: key))
        #expect(device.status == 403)
        #expect(device.problem?.code == .accountLocked)
        let options = try await live.client.loginOptions(username: "carol")
        let passkey = try await live.client.passkeyLogin(
            try carolKey.assertion(challenge: options.challenge, signCount: 1))
        #expect(passkey.status == 403)
        #expect(passkey.problem?.code == .accountLocked)
        let exchange = try await oauth.exchange(code, clientID: app.clientID, pkce: pkce)
        #expect(exchange.status == 400)
        #expect(try JSON.parse(exchange.body)[string: "error"] == "invalid_grant")
        // Unlocked, the same device logs in (its refused challenge was not used up).
        #expect(
            try await console.send(
                "POST", "/admin/v1/users/\(alice.userID)/unlock", token: token, checkSpec: false
            )
            .status == 204)
        let again = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: try sign(challenge.payload, with: key))
        #expect(again.status == 200, "\(again.text)")
    }
}
