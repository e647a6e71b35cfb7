import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Events (docs/webhooks.md): each change's event is posted per Standard Webhooks, checked by
/// the PyPI `standardwebhooks` library in scripts/webhooks/receiver.py, retried on the schedule,
/// sent once at a time by N instances, and never to a private address unless allowed.
@Suite("Webhooks")
struct WebhookTests {
    /// A live server that may deliver to loopback, and an endpoint for `events` on it.
    static func server(
        engine: Engine = .sqlite, instances: Int = 1, events: [WebhookEventType] = WebhookEventType.known,
        _ adjust: (inout Configuration) -> Void = { _ in }
    ) throws -> (TestServer, WebhookEndpointInfo, UInt16) {
        let live = try TestServer(engine: engine, instances: instances) { configuration in
            configuration.allowPrivateWebhooks = true
            adjust(&configuration)
        }
        let port = try WebhookReceiver.freePort()
        let endpoint = try administration(live).add(
            url: WebhookReceiver.url(port), events: events.map(\.rawValue))
        return (live, endpoint, port)
    }

    static func administration(_ live: TestServer) throws -> WebhookAdministration {
        try WebhookAdministration(configuration: live.server.configuration)
    }

    @Test("every event of the design arrives, signed as standardwebhooks verifies", arguments: Engine.all)
    func everyEventArrivesVerified(engine: Engine) async throws {
        let (live, endpoint, port) = try Self.server(engine: engine) {
            $0.accountFailureLimit = 2
            $0.issuer = testIssuer  // approved approvals get receipts
        }
        let receiver = try await WebhookReceiver(port: port, secret: try #require(endpoint.secret))
        let client = live.client

        let userID = try await client.createAccount("alice")
        let first = try await client.login("alice")
        let (key, deviceID) = try await client.bindDevice(first.accessToken)
        // An approval approved, one whose signature does not verify.
        let approved = try await client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: first.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let confirmed = try await client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: sign(approved.payload, with: key)),
            parameters: [approved.approvalID], token: first.accessToken)
        #expect(confirmed.status == 200, "\(confirmed.text)")
        let refused = try await client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer("2")),
            token: first.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let bad = try await client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: sign(Data("other".utf8), with: key)),
            parameters: [refused.approvalID], token: first.accessToken)
        #expect(bad.status == 401 || bad.status == 403, "\(bad.text)")
        // One the user denies.
        let denied = try await client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: first.accessToken
        ).decode(ApprovalChallengeResponse.self)
        #expect(
            try await client.send(API.denyApproval, parameters: [denied.approvalID], token: first.accessToken)
                .status == 200)
        // Refresh-token reuse, a logout, a revoked device.
        let second = try await client.login("alice", clientID: "app-2")
        let rotated = try await client.send(API.refresh, RefreshRequest(refreshToken: second.refreshToken))
        #expect(rotated.status == 200)
        #expect(
            try await client.send(API.refresh, RefreshRequest(refreshToken: second.refreshToken)).status
                == 401)
        #expect(try await client.send(API.logout, token: first.accessToken).status == 204)
        let third = try await client.login("alice", clientID: "app-3")
        #expect(
            try await client.send(API.revokeDevice, parameters: [deviceID], token: third.accessToken).status
                == 204)
        // Passkeys: a sign-up, one more, one removed.
        let authenticator = try PasskeyTests.authenticator(for: live)
        let signUp = try await client.passkeySignUp("bob", authenticator)
        let bob = try #require(signUp.tokens)
        let more = try PasskeyTests.authenticator(for: live)
        let options = try await client.registrationOptions(
            PasskeyRegistrationOptionsRequest(username: nil), token: bob.accessToken)
        let added = try await client.send(
            API.passkeyRegistrationVerify, raw: more.registration(challenge: options.challenge),
            token: bob.accessToken)
        #expect(added.status == 200, "\(added.text)")
        let passkeys = try await client.send(API.listPasskeys, token: bob.accessToken).decode(
            PasskeyListResponse.self
        ).passkeys
        #expect(
            try await client.send(
                API.removePasskey, parameters: [passkeys[1].passkeyID], token: bob.accessToken
            )
            .status == 204)
        // Wrong passwords until the account is locked for this address.
        for _ in 0..<3 {
            _ = try await client.send(
                API.passwordLogin,
                PasswordLoginRequest(
                    username: Username("alice"), password: "wrong password!", clientID: "app-1"))
        }

        let expected: [(WebhookEventType, (ReceivedDelivery) -> Bool)] = [
            (.accountCreated, { $0.string("user_id") == userID && $0.string("username") == "alice" }),
            (.accountCreated, { $0.string("username") == "bob" && $0.string("method") == "passkey" }),
            (.deviceBound, { $0.string("device_id") == deviceID && $0.string("name") == "Test phone" }),
            (.approvalRequested, { $0.string("approval_id") == approved.approvalID }),
            (
                .approvalDecided,
                { $0.string("approval_id") == approved.approvalID && $0.string("status") == "approved" }
            ),
            (
                .approvalDecided,
                { $0.string("approval_id") == refused.approvalID && $0.string("status") == "failed" }
            ),
            (
                .approvalDecided,
                { $0.string("approval_id") == denied.approvalID && $0.string("status") == "denied" }
            ),
            (
                .sessionRevoked,
                { $0.string("session_id") == second.sessionID && $0.string("reason") == "refresh_reuse" }
            ),
            (
                .sessionRevoked,
                { $0.string("session_id") == first.sessionID && $0.string("reason") == "logout" }
            ),
            (.deviceRevoked, { $0.string("device_id") == deviceID && $0.string("user_id") == userID }),
            (.passkeyAdded, { $0.string("user_id") == bob.userID }),
            (.passkeyRemoved, { $0.string("passkey_id") == passkeys[1].passkeyID }),
            (.accountLocked, { $0.string("user_id") == userID && $0.string("scope") == "address" }),
        ]
        func missing(_ received: [ReceivedDelivery]) -> [String] {
            expected.filter { type, matches in !received.contains { $0.type == type.rawValue && matches($0) }
            }
            .map { "\($0.0)" }
        }
        let received = try await receiver.wait { missing($0).isEmpty }
        #expect(missing(received) == [], "received: \(received.map(\.type))")
        #expect(
            received.allSatisfy { $0.verified && $0.status == 200 }, "\(received.filter { !$0.verified })")
        // Every event type of the design was among them.
        #expect(Set(received.map(\.type)) == Set(WebhookEventType.known.map(\.rawValue)))
        let action = try transfer().json
        #expect(
            received.first { $0.type == "approval.decided" }.flatMap { OpenAPISpec.member($0.data, "action") }
                == action)
        // approval.decided carries the approved one's receipt, the very JWS GET /v1/approvals/{id}
        // returns; the failed one has none.
        let decided = received.filter { $0.type == "approval.decided" }
        let receipt = try await client.send(
            API.approvalStatus, parameters: [approved.approvalID], token: third.accessToken
        ).decode(ApprovalResponse.self).receipt
        #expect(receipt != nil)
        #expect(
            decided.first { $0.string("approval_id") == approved.approvalID }?.string("receipt") == receipt)
        #expect(decided.first { $0.string("approval_id") == refused.approvalID }?.string("receipt") == nil)
        // Each delivered once, its attempt recorded.
        #expect(Set(received.map(\.id)).count == received.count)
        let deliveries = try Self.administration(live).deliveries(url: receiver.url)
        #expect(deliveries.allSatisfy { $0.status == "delivered" && $0.attempts.map(\.result) == ["200"] })
    }

    @Test("an endpoint gets only the events it registered for, and a tampered body fails verification")
    func onlyRegisteredEventsAndTampering() async throws {
        let (live, endpoint, port) = try Self.server(events: [.deviceBound])
        let secret = try #require(endpoint.secret)
        let receiver = try await WebhookReceiver(port: port, secret: secret)
        let (_, _, deviceID) = try await live.client.userWithDevice("alice")
        let received = try await receiver.wait { !$0.isEmpty }
        #expect(received.map(\.type) == ["device.bound"] && received.first?.string("device_id") == deviceID)

        // The signature is over id.timestamp.body under the secret: a changed body is refused
        // by the library, a resigned one accepted (the receiver logs both).
        let body = Data(#"{"type":"device.bound","timestamp":"2026-01-01T00:00:00Z","data":{}}"#.utf8)
        let timestamp = Int64(Date().timeIntervalSince1970)
        let key = String(secret.dropFirst(WebhookSignature.secretPrefix.count))
        let signature = try WebhookSignature.sign(
            id: "msg_test", timestamp: timestamp, body: body, secret: key)
        let connection = try HTTPConnection(port: port, keepsHeaders: true)
        for (sent, status) in [(body, 200), (Data(body.dropLast()) + Data("x".utf8), 400)] {
            let answer = try connection.send(
                "POST", "/hook", body: sent,
                headers: [
                    "webhook-id": "msg_test",
                    "webhook-timestamp": String(timestamp), "webhook-signature": signature,
                ])
            #expect(answer.status == status)
        }
    }

    @Test("a receiver that fails is retried on the schedule with the same webhook-id, then given up")
    func retriesOnTheScheduleThenFails() async throws {
        let (live, endpoint, port) = try Self.server(events: [.accountCreated])
        let receiver = try await WebhookReceiver(
            port: port, secret: try #require(endpoint.secret), failFirst: 1000, anyTime: true)
        let administration = try Self.administration(live)
        _ = try await live.client.createAccount("alice")

        // Each failed attempt schedules the next per Standard Webhooks: 5 s, 5 min, 30 min, 2 h,
        // 5 h, then every 10 h, until 3 days after the event.
        var delays: [Int] = []
        var last: WebhookDeliveryInfo?
        for attempt in 1...20 {
            let delivery = try await Self.waitForAttempts(attempt, administration, url: receiver.url)
            last = delivery
            guard let next = delivery.nextAttemptAt, let at = delivery.attempts.last?.at else { break }
            let delay = Int(next.timeIntervalSince(at).rounded())
            delays.append(delay)
            live.clock.advance(by: TimeInterval(delay))
        }
        #expect(delays == [5, 300, 1800, 7200, 18_000, 36_000, 36_000, 36_000, 36_000, 36_000, 36_000])
        let delivery = try #require(last)
        #expect(delivery.status == "failed" && delivery.attempts.count == 12)
        #expect(delivery.attempts.allSatisfy { $0.result == "500" })
        let received = try receiver.deliveries()
        #expect(received.count == 12 && Set(received.map(\.id)) == [delivery.messageID])
        #expect(received.allSatisfy { $0.verified })

        // `keybound webhook retry` sends it again, with the same id; a receiver that now
        // answers 200 acknowledges it.
        receiver.stop()
        let healthy = try await WebhookReceiver(
            port: port, secret: try #require(endpoint.secret), anyTime: true)
        try administration.retry(deliveryID: delivery.id)
        let again = try await healthy.wait { !$0.isEmpty }
        #expect(again.map(\.id) == [delivery.messageID] && again.first?.status == 200)
        let done = try await Self.waitForAttempts(13, administration, url: healthy.url)
        #expect(done.status == "delivered")
    }

    @Test("a receiver that fails once gets the event again 5 s later, verified")
    func failsOnceThenDelivered() async throws {
        let (live, endpoint, port) = try Self.server(events: [.accountCreated])
        let receiver = try await WebhookReceiver(
            port: port, secret: try #require(endpoint.secret), failFirst: 1)
        _ = try await live.client.createAccount("alice")
        let administration = try Self.administration(live)
        _ = try await Self.waitForAttempts(1, administration, url: receiver.url)
        live.clock.advance(by: 5)
        let delivery = try await Self.waitForAttempts(2, administration, url: receiver.url)
        #expect(delivery.status == "delivered" && delivery.attempts.map(\.result) == ["500", "200"])
        let received = try receiver.deliveries()
        #expect(received.map(\.status) == [500, 200] && Set(received.map(\.id)).count == 1)
        #expect(received.allSatisfy { $0.verified })
    }

    /// The only delivery to `url`, once it has `attempts` attempts (up to 20 s).
    static func waitForAttempts(_ attempts: Int, _ administration: WebhookAdministration, url: String)
        async throws
        -> WebhookDeliveryInfo
    {
        for _ in 0..<400 {
            if let delivery = try administration.deliveries(url: url).first,
                delivery.attempts.count >= attempts
            {
                return delivery
            }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw TestFailure("no attempt \(attempts) to \(url)")
    }

    @Test(
        "two instances on one PostgreSQL database send each event once", PostgresRequirement(),
        .enabled(if: PostgresCluster.isAvailable))
    func twoInstancesSendEachEventOnce() async throws {
        let (live, endpoint, port) = try Self.server(
            engine: .postgres, instances: 2, events: [.accountCreated])
        let receiver = try await WebhookReceiver(port: port, secret: try #require(endpoint.secret))
        let count = 40
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask { _ = try await live.clients[index % 2].createAccount("user\(index)") }
            }
            try await group.waitForAll()
        }
        let received = try await receiver.wait { $0.count >= count }
        // A little longer: a second copy would arrive now.
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let all = try receiver.deliveries()
        #expect(all.count == count && Set(all.map(\.id)).count == count && all.allSatisfy { $0.verified })
        #expect(received.count == count)
        let deliveries = try Self.administration(live).deliveries(url: receiver.url)
        #expect(deliveries.count == count && deliveries.allSatisfy { $0.attempts.count == 1 })
    }

    @Test("private and loopback targets are refused when added and when delivered to")
    func ssrfGuard() async throws {
        let directory = try TemporaryDirectory()
        var configuration = Configuration.testing(databasePath: directory.path("keybound.sqlite"))
        let guarded = try WebhookAdministration(configuration: configuration)
        for url in [
            "http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/hook", "http://172.20.0.1/",
            "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data", "http://[::1]/hook",
            "http://[fe80::1]/", "http://[fd00::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/",
            "http://100.64.0.1/",
        ] {
            #expect(throws: ServerError.self, "\(url)") {
                try guarded.add(url: url, events: ["device.bound"])
            }
        }
        for url in [
            "ftp://example.com/", "https://user:pw@example.com/", "not a url", "https://example.com/#x",
        ] {
            #expect(throws: ServerError.self, "\(url)") {
                try guarded.add(url: url, events: ["device.bound"])
            }
        }
        #expect(throws: ServerError.self) { try guarded.add(url: "https://93.184.215.14/", events: ["nope"]) }
        #expect(throws: ServerError.self) { try guarded.add(url: "https://93.184.215.14/", events: []) }
        // A public address literal needs no DNS.
        #expect(
            try guarded.add(url: "https://93.184.215.14/hook", events: ["device.bound"]).events == [
                "device.bound"
            ])
        #expect(WebhookTarget.isPublic(v4: [8, 8, 8, 8]) && !WebhookTarget.isPublic(v4: [198, 18, 0, 1]))

        // Added with --allow-private-webhooks, but the server runs without it: every attempt
        // is refused before a connection is made, and the receiver sees nothing.
        configuration.allowPrivateWebhooks = true
        let port = try WebhookReceiver.freePort()
        let endpoint = try WebhookAdministration(configuration: configuration).add(
            url: WebhookReceiver.url(port), events: ["account.created"])
        let receiver = try await WebhookReceiver(port: port, secret: try #require(endpoint.secret))
        configuration.allowPrivateWebhooks = false
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let client = Client(baseURL: try #require(server.baseURL))
        _ = try await client.createAccount("alice")
        let delivery = try await Self.waitForAttempts(1, guarded, url: receiver.url)
        #expect(
            delivery.attempts.first?.result.hasPrefix("refused: 127.0.0.1 is not a public address") == true)
        #expect(delivery.status == "pending")
        #expect(try receiver.deliveries().isEmpty)
    }

    @Test("an event is written with its change or not at all: a rolled-back write leaves no message")
    func rolledBackChangeLeavesNoEvent() async throws {
        let (live, _, _) = try Self.server(events: [.accountCreated])
        _ = try await live.client.createAccount("alice")
        // The same username again: the write is refused and rolled back, with its event.
        let again = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: Username("alice"), password: Client.password))
        #expect(again.status == 409)
        let database = try live.database.open()
        let messages = try database.read {
            try $0.query("SELECT type, body FROM webhook_messages", []).map { try $0.text(0) }
        }
        #expect(messages == ["account.created"])
        // And a write that throws after emitting leaves nothing.
        struct Undo: Error {}
        let application = try Application(configuration: live.server.configuration)
        #expect(throws: Undo.self) {
            try application.database.write { connection in
                try application.emit(connection, now: Date(), .accountCreated, [])
                throw Undo()
            }
        }
        #expect(try database.read { try $0.query("SELECT id FROM webhook_messages", []).count } == 1)
    }
    @Test("housekeeping deletes finished deliveries after the retention, and keeps pending ones")
    func housekeepingDeletesFinishedDeliveries() async throws {
        let (live, endpoint, port) = try Self.server(events: [.accountCreated])
        let receiver = try await WebhookReceiver(port: port, secret: try #require(endpoint.secret))
        _ = try await live.client.createAccount("alice")
        _ = try await Self.waitForAttempts(1, try Self.administration(live), url: receiver.url)
        receiver.stop()
        _ = try await live.client.createAccount("bob")  // pending: its receiver is down
        let application = try Application(configuration: live.server.configuration)
        let database = try live.database.open()
        func counts() throws -> [Int] {
            try database.read { connection in
                try ["webhook_messages", "webhook_deliveries", "webhook_attempts"].map { table in
                    Int(try connection.queryOne("SELECT COUNT(*) FROM \(table)", [])?.integer(0) ?? -1)
                }
            }
        }
        _ = try await Self.waitForAttempts(1, try Self.administration(live), url: receiver.url)
        application.purgeExpired()
        #expect(try counts() == [2, 2, 2])
        live.clock.advance(by: TimeInterval(live.server.configuration.retention + 1))
        application.purgeExpired()
        // Alice's delivery is gone with its attempt and event; Bob's waits for its receiver (the
        // deliverer may have tried it once more meanwhile).
        let left = try counts()
        #expect(left[0] == 1 && left[1] == 1 && left[2] >= 1, "\(left)")
    }
}
