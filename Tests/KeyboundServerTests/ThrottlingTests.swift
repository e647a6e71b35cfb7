import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Who can block whom (docs/server.md, "Throttling: who can block whom, and for how long").
/// Addresses: the attacker is 203.0.113.x, the owner 198.51.100.x (RFC 5737 documentation ranges).
@Suite("Throttling, client addresses and audit folding")
struct ThrottlingTests {
    private static let attacker = "203.0.113.9"
    private static let owner = "198.51.100.7"

    // MARK: Passwords (item 3)

    @Test(arguments: Engine.all) func wrongPasswordsFromOneAddressNeverStopTheRightPasswordFromAnother(
        engine: Engine
    ) throws {
        let app = try InProcessApplication(engine)
        try app.createAccount("alice")
        var statuses: [Int] = []
        for _ in 1...30 { statuses.append(app.login("alice", "wrong password", from: Self.attacker).status) }
        #expect(statuses == Array(repeating: 401, count: 5) + Array(repeating: 429, count: 25))
        #expect(app.login("alice", Client.password, from: Self.attacker).status == 429)
        // The owner, elsewhere, is not held back at all.
        #expect(app.login("alice", Client.password, from: Self.owner).status == 200)
        #expect(app.login("alice", "wrong password", from: Self.owner).status == 401)
        #expect(app.login("alice", Client.password, from: Self.owner).status == 200)
    }

    /// The account-wide ceiling of 100 consecutive failures, spread over 25 addresses with 4 each
    /// (below the pair limit of 5, below the address limit of 20). It is not NIST SP 800-63B
    /// §5.2.2's cap: past it, every new address still gets one guess (docs/server.md says so).
    @Test(arguments: Engine.all) func accountCeilingHoldsBackOnlyAddressesThatFailedOnTheAccount(
        engine: Engine
    ) throws {
        let app = try InProcessApplication(engine)
        try app.createAccount("alice")
        let botnet = (1...25).map { "203.0.113.\($0)" }
        for address in botnet {
            for _ in 1...4 { #expect(app.login("alice", "wrong password", from: address).status == 401) }
        }
        #expect(
            try app.rows("SELECT count FROM audit_events WHERE type = 'account_ceiling'") == [[.integer(1)]])
        // Every address that has failed on the account now waits, even with the right password…
        let held = app.login("alice", Client.password, from: botnet[0])
        #expect(held.status == 429)
        #expect(held.headers["Retry-After"] == "60")
        // …a new address gets one guess, then waits too, for longer: each failure doubles the delay…
        #expect(app.login("alice", "wrong password", from: "203.0.113.200").status == 401)
        let next = app.login("alice", "wrong password", from: "203.0.113.200")
        #expect(next.status == 429)
        #expect(next.headers["Retry-After"] == "120")
        // …and so does every other new address: the ceiling does not cap guessing at 100.
        for index in 1...10 {
            #expect(app.login("alice", "wrong password", from: "198.51.100.\(100 + index)").status == 401)
        }
        // …and the owner, who has not failed, logs in. That ends the run of failures.
        #expect(app.login("alice", Client.password, from: Self.owner).status == 200)
        #expect(app.login("alice", Client.password, from: botnet[0]).status == 200)
    }

    @Test(arguments: Engine.all) func failuresFromManyAddressesDoNotBlockTheAccountBelowTheCeiling(
        engine: Engine
    ) throws {
        let app = try InProcessApplication(engine)
        try app.createAccount("alice")
        for index in 1...10 {
            for _ in 1...5 { _ = app.login("alice", "wrong password", from: "203.0.113.\(index)") }
        }
        #expect(app.login("alice", Client.password, from: Self.owner).status == 200)
    }

    // MARK: Client addresses (item 4)

    @Test(arguments: Engine.all) func behindATrustedProxyOneForwardedClientDoesNotBlockAnother(engine: Engine)
        async throws
    {
        let loopback = try #require(CIDR("127.0.0.0/8"))
        let live = try TestServer(engine: engine) { $0.trustedProxies = [loopback] }
        try await live.client.createAccount("alice")
        func attempt(_ username: String, _ password: String, from address: String) async throws -> Reply {
            try await live.client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: try Username(username), password: password, clientID: "c"),
                headers: ["X-Forwarded-For": "10.9.9.9, \(address)"])
        }
        // 20 failures with made-up usernames block that forwarded client…
        for index in 1...20 {
            #expect(try await attempt("ghost\(index)", "wrong password", from: Self.attacker).status == 401)
        }
        #expect(try await attempt("ghost21", "wrong password", from: Self.attacker).status == 429)
        #expect(try await attempt("alice", Client.password, from: Self.attacker).status == 429)
        // …not the proxy, and not another forwarded client.
        #expect(try await attempt("ghost22", "wrong password", from: Self.owner).status == 401)
        #expect(try await attempt("alice", Client.password, from: Self.owner).status == 200)
        let token = try await live.client.login("alice", clientID: "audit").accessToken
        let events = try await live.client.send(API.audit, token: token).decode(AuditListResponse.self)
            .events
        #expect(events.contains { $0.type == .login && $0.clientAddress == Self.owner })
    }

    @Test(arguments: Engine.all) func fromAnUntrustedPeerForwardedHeadersAreIgnored(engine: Engine)
        async throws
    {
        let proxies = try #require(CIDR("10.0.0.0/8"))
        let live = try TestServer(engine: engine) { $0.trustedProxies = [proxies] }
        try await live.client.createAccount("alice")
        for index in 1...20 {
            let reply = try await live.client.send(
                API.passwordLogin,
                PasswordLoginRequest(
                    username: try Username("ghost\(index)"), password: "wrong password", clientID: "c"),
                headers: ["X-Forwarded-For": "192.0.2.\(index)", "Forwarded": "for=192.0.2.\(index)"])
            #expect(reply.status == 401)
        }
        // Every made-up client was loopback all along: it is blocked, whatever it claims.
        let blocked = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: Client.password, clientID: "c"),
            headers: ["X-Forwarded-For": "192.0.2.200"])
        #expect(blocked.status == 429)
    }

    @Test(arguments: Engine.all) func twoIPv6AddressesInOne64ShareABudget(engine: Engine) throws {
        let app = try InProcessApplication(engine) { $0.addressFailureLimit = 3 }
        for index in 1...3 {
            #expect(
                app.login(try Username("ghost\(index)"), "wrong password", from: "2001:db8:1:2::\(index)")
                    .status
                    == 401)
        }
        #expect(app.login("ghost4", "wrong password", from: "2001:db8:1:2:ffff:ffff:ffff:ffff").status == 429)
        #expect(app.login("ghost5", "wrong password", from: "2001:db8:1:3::1").status == 401)
        // The audit keeps the whole address, the throttle the /64.
        #expect(
            try app.rows("SELECT client_address FROM audit_events WHERE type = 'address_lockout'") == [
                ["2001:db8:1:2::3"]
            ])
        #expect(
            try app.count("SELECT COUNT(*) FROM throttles WHERE scope = 'address:2001:db8:1:2::/64'") == 1)
    }

    // MARK: Device signatures (item 5)

    @Test(arguments: Engine.all) func replayingAUsedChallengeSixtyTimesAddsAtMostOneAuditRow(engine: Engine)
        throws
    {
        let app = try InProcessApplication(engine)
        let (key, deviceID) = try app.userWithDevice("alice")
        let challenge = try app.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        #expect(app.deviceLogin(challenge.challengeID, signature, from: Self.owner).status == 200)
        let rows = try app.count("SELECT COUNT(*) FROM audit_events")
        for index in 0..<60 {
            let replayed = index.isMultiple(of: 2) ? signature : Data("garbage".utf8)
            let reply = app.deviceLogin(challenge.challengeID, replayed, from: Self.attacker)
            #expect(reply.status == 409)
        }
        #expect(try app.count("SELECT COUNT(*) FROM audit_events") <= rows + 1)
        // A used challenge proves nothing new: it did not count against the device either.
        #expect(try app.count("SELECT COUNT(*) FROM throttles WHERE scope LIKE 'device:%'") == 0)
    }

    @Test(arguments: Engine.all) func garbageSignaturesAreThrottledAndNeverSuspendTheDevice(engine: Engine)
        throws
    {
        let app = try InProcessApplication(engine)
        let (key, deviceID) = try app.userWithDevice("alice")
        var statuses: [Int] = []
        var retryAfter: [String] = []
        for _ in 1...20 {
            let challenge = try app.challenge(deviceID, from: Self.attacker)
            let reply = app.deviceLogin(challenge.challengeID, Data("garbage".utf8), from: Self.attacker)
            statuses.append(reply.status)
            if reply.status == 429 { retryAfter.append(reply.headers["Retry-After"] ?? "none") }
        }
        #expect(statuses == Array(repeating: 401, count: 5) + Array(repeating: 429, count: 15))
        #expect(Set(retryAfter) == ["60"])
        // Refused bad signatures wrote nothing: one folded row each.
        #expect(
            try app.rows(
                "SELECT type, count FROM audit_events WHERE device_id IS NOT NULL AND type <> 'device_bound' ORDER BY type"
            )
                == [["device_throttled", .integer(1)], ["login_failed", .integer(5)]])

        // The owner's real signature on a fresh challenge, from another address, logs in.
        let challenge = try app.challenge(deviceID, from: Self.owner)
        let login = app.deviceLogin(
            challenge.challengeID, try sign(challenge.payload, with: key), from: Self.owner)
        #expect(login.status == 200)
        // Even from the attacker's address a valid signature wins: nobody else can make one.
        let again = try app.challenge(deviceID, from: Self.attacker)
        #expect(
            app.deviceLogin(again.challengeID, try sign(again.payload, with: key), from: Self.attacker).status
                == 200)
        #expect(try app.rows("SELECT suspended_at FROM devices") == [[.null]])
    }

    @Test(arguments: Engine.all) func badSignaturesCountAgainstTheAddressLikeWrongPasswords(engine: Engine)
        throws
    {
        let app = try InProcessApplication(engine) { $0.addressFailureLimit = 3 }
        try app.createAccount("bob")
        let (_, deviceID) = try app.userWithDevice("alice")
        for _ in 1...3 {
            let challenge = try app.challenge(deviceID, from: Self.attacker)
            #expect(
                app.deviceLogin(challenge.challengeID, Data("garbage".utf8), from: Self.attacker).status
                    == 401)
        }
        #expect(app.login("bob", Client.password, from: Self.attacker).status == 429)
        #expect(app.login("bob", Client.password, from: Self.owner).status == 200)
    }

    /// A folded row keeps where its run of refusals started and where it is now: the first client
    /// address and the last.
    @Test(arguments: Engine.all) func foldedRefusalsShowTheirCountInTheUsersAudit(engine: Engine) async throws
    {
        let loopback = try #require(CIDR("127.0.0.0/8"))
        let live = try TestServer(engine: engine) { $0.trustedProxies = [loopback] }
        let (tokens, _, deviceID) = try await live.client.userWithDevice("alice")
        for address in ["192.0.2.1", "198.51.100.2", "203.0.113.3"] {
            let challenge = try await live.client.challenge(deviceID)
            #expect(
                try await live.client.send(
                    API.deviceLogin,
                    DeviceLoginRequest(challengeID: challenge.challengeID, signature: Data([1])),
                    headers: ["X-Forwarded-For": address]
                ).status == 401)
            live.clock.advance(by: 10)
        }
        let events = try await live.client.send(API.audit, token: tokens.accessToken).decode(
            AuditListResponse.self
        )
        .events
        let failed = try #require(events.first)
        // Newest activity first: the folded row that grew last is on top.
        #expect(failed.type == .loginFailed)
        #expect(failed.count == 3)
        #expect(failed.lastTime.timeIntervalSince(failed.time) == 20)
        #expect(failed.clientAddress == "192.0.2.1")
        #expect(failed.lastClientAddress == "203.0.113.3")
        #expect(events.dropFirst().allSatisfy { $0.count == 1 && $0.lastClientAddress == $0.clientAddress })
    }

    /// Migration 8 gives rows written before it their one address as the last one too.
    @Test(arguments: Engine.all) func migrationGivesOlderAuditRowsTheirLastClientAddress(engine: Engine)
        throws
    {
        let old = try InProcessApplication(engine)
        try old.createAccount("alice")
        #expect(old.login("alice", "wrong password", from: Self.attacker).status == 401)
        #expect(old.login("alice", "wrong password", from: Self.owner).status == 401)
        // The database as a server before migration 8 left it.
        try old.application.database.write { connection in
            try connection.execute("ALTER TABLE audit_events DROP COLUMN last_client_address", [])
            try connection.execute(
                "UPDATE audit_events SET client_address = ? WHERE type = 'login_failed'",
                [
                    .text(Self.owner)
                ])
            try connection.execute("DELETE FROM schema_migrations WHERE version = 8", [])
        }
        let upgraded = try Application(configuration: old.database.configuration)
        let stored = try upgraded.database.read {
            try $0.query(
                "SELECT type, count, client_address, last_client_address FROM audit_events ORDER BY time", [])
        }
        #expect(
            stored.map(\.values) == [
                [.text("account_created"), .integer(1), .text("127.0.0.1"), .text("127.0.0.1")],
                [.text("login_failed"), .integer(2), .text(Self.owner), .text(Self.owner)],
            ])
    }

    // MARK: Sign-up (items 3 and 6)

    @Test(arguments: Engine.all) func signUpIsLimitedPerAddressAndTakenNamesCountToo(engine: Engine) throws {
        let app = try InProcessApplication(engine) { $0.signupLimit = 3 }
        #expect(app.signUp("a1", from: Self.attacker).status == 201)
        #expect(app.signUp("a1", from: Self.attacker).status == 409)
        #expect(app.signUp("a2", from: Self.attacker).status == 201)
        // The limit bounds how many names one address can probe: free or taken, 3 an hour.
        let refused = app.signUp("a3", from: Self.attacker)
        #expect(refused.status == 429)
        #expect(refused.headers["Retry-After"] == "3600")
        #expect(app.signUp("a1", from: Self.attacker).status == 429)
        #expect(app.signUp("b1", from: Self.owner).status == 201)
        app.clock.advance(by: 3600)
        #expect(app.signUp("a3", from: Self.attacker).status == 201)
    }

    @Test(arguments: Engine.all) func parallelSignUpsGetNoMoreThanTheLimit(engine: Engine) async throws {
        let live = try TestServer(engine: engine) { $0.signupLimit = 3 }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 1...12 {
                group.addTask {
                    try await live.client.send(
                        API.createAccount,
                        CreateAccountRequest(
                            username: try Username("user\(index)"), password: Client.password)
                    ).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 201 }.count == 3)
        #expect(statuses.filter { $0 == 429 }.count == 9)
    }

    @Test(arguments: Engine.all) func closedRegistrationAnswers403(engine: Engine) async throws {
        let live = try TestServer(engine: engine) { $0.registration = .closed }
        let reply = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: "alice", password: Client.password))
        #expect(reply.status == 403)
        #expect(reply.problem?.code == .registrationClosed)
        #expect(reply.header("Content-Type") == "application/problem+json")
    }

    @Test func defaultsAreSafe() {
        let defaults = Configuration()
        #expect(defaults.registration == .open)
        #expect(defaults.signupLimit == 10)
        #expect(defaults.addressFailureLimit == 20)
        #expect(defaults.accountFailureLimit == 5)
        #expect(defaults.accountFailureCeiling == 100)
        #expect(defaults.deviceFailureLimit == 5)
        #expect(defaults.trustedProxies.isEmpty)
    }

    @Test func serveTakesTheThrottlingFlags() async throws {
        let directory = try TemporaryDirectory()
        let serve = try await ServeProcess(arguments: [
            "--db", "sqlite:" + directory.path("flags.sqlite"), "--registration", "closed",
            "--address-failure-limit", "2", "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "::1",
        ])
        let signUp = try await serve.client.send(
            API.createAccount, CreateAccountRequest(username: "alice", password: Client.password))
        #expect(signUp.problem?.code == .registrationClosed)
        func attempt(from address: String) async throws -> Int {
            try await serve.client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "ghost", password: "wrong password", clientID: "c"),
                headers: ["X-Forwarded-For": address]
            ).status
        }
        #expect(try await attempt(from: Self.attacker) == 401)
        #expect(try await attempt(from: Self.attacker) == 401)
        #expect(try await attempt(from: Self.attacker) == 429)
        #expect(try await attempt(from: Self.owner) == 401)
        #expect(serve.kill(SIGTERM) == 0)

        // With --forwarded-header forwarded only Forwarded names the client; X-Forwarded-For,
        // which such a proxy passes on as the client wrote it, is never read.
        let forwarded = try await ServeProcess(
            arguments: [
                "--db", "sqlite:" + directory.path("forwarded.sqlite"), "--address-failure-limit", "1",
                "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "::1",
            ], environment: ["KEYBOUND_FORWARDED_HEADER": "forwarded"])
        func forwardedAttempt(_ headers: [String: String]) async throws -> Int {
            try await forwarded.client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "ghost", password: "wrong password", clientID: "c"),
                headers: headers
            ).status
        }
        #expect(try await forwardedAttempt(["Forwarded": "for=\(Self.attacker)"]) == 401)
        #expect(
            try await forwardedAttempt(["Forwarded": "for=\(Self.attacker)", "X-Forwarded-For": Self.owner])
                == 429)
        #expect(try await forwardedAttempt(["Forwarded": "for=\(Self.owner)"]) == 401)
        // The proxy itself (no Forwarded), whatever X-Forwarded-For says.
        #expect(try await forwardedAttempt(["X-Forwarded-For": "192.0.2.200"]) == 401)
        #expect(try await forwardedAttempt(["X-Forwarded-For": "192.0.2.201"]) == 429)
        #expect(forwarded.kill(SIGTERM) == 0)

        for bad in [
            ["--trusted-proxy", "10.0.0.1/8"], ["--trusted-proxy", "proxy.example"],
            ["--forwarded-header", "both"], ["--forwarded-header", "x-real-ip"],
            ["--signup-limit", "-1"],
            ["--address-failure-limit", "many"], ["--registration", "maybe"],
        ] {
            #expect(try runTool(ServeProcess.executable.path, ["serve"] + bad).0 == 2, "\(bad)")
        }
    }

    @Test(arguments: Engine.all) func userAddCreatesAccountsForOperators(engine: Engine) async throws {
        let directory = try TemporaryDirectory()
        let testDatabase = try TestDatabase(engine, in: directory)
        func userAdd(_ arguments: [String], password: String) throws -> (
            status: Int32, stdout: String, stderr: String
        ) {
            try runKeybound(
                ["user"] + arguments, input: password, in: directory,
                environment: testDatabase.password.map { ["KEYBOUND_DB_PASSWORD": $0] } ?? [:])
        }
        let url = testDatabase.url
        let created = try userAdd(
            ["add", "Alice", "--db", url], password: Client.password + "\n")
        #expect(created.status == 0, "\(created.stderr)")
        let userID = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(userID.hasPrefix("usr_"))
        let taken = try userAdd(["add", "alice", "--db", url], password: "another password")
        #expect(taken.status == 1)
        #expect(taken.stderr.contains("taken"))
        #expect(try userAdd(["add", "bob", "--db", url], password: "short").status == 1)
        #expect(try userAdd(["add", "--db", url], password: Client.password).status == 2)
        #expect(try userAdd(["remove", "alice", "--db", url], password: "").status == 2)

        // The account logs in on a server where nobody can sign up.
        var configuration = testDatabase.configuration
        configuration.registration = .closed
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop(gracePeriod: 1) }
        let client = Client(baseURL: try #require(server.baseURL))
        let tokens = try await client.login("alice")
        #expect(tokens.userID == userID)
        let events = try await client.send(API.audit, token: tokens.accessToken).decode(
            AuditListResponse.self
        ).events
        #expect(
            events.contains {
                $0.type == .accountCreated && $0.method == .operator && $0.clientAddress == nil
            })
    }
}

/// Runs `keybound ARGUMENTS` with `input` on standard input; a child that outlives 30 s is stopped.
func runKeybound(
    _ arguments: [String], input: String, in directory: TemporaryDirectory,
    environment: [String: String] = [:]
) throws -> (status: Int32, stdout: String, stderr: String) {
    let child = try ChildProcess(
        try KeyboundExecutable.url(), arguments, input: Data(input.utf8),
        environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
        workingDirectory: directory.url, files: directory.url, name: UUID().uuidString)
    let exited = DispatchSemaphore(value: 0)
    child.process.terminationHandler = { _ in exited.signal() }
    try child.process.run()
    if exited.wait(timeout: .now() + 30) == .timedOut {
        child.process.terminate()
        exited.wait()
        throw TestFailure("keybound \(arguments.joined(separator: " ")) did not finish")
    }
    let output = try child.output()
    return (
        child.process.terminationStatus, String(decoding: output.stdout, as: UTF8.self),
        String(decoding: output.stderr, as: UTF8.self)
    )
}

extension InProcessApplication {
    func signUp(_ username: Username, from address: String) -> HTTPResponse {
        send(
            API.createAccount,
            CreateAccountRequest(username: username, password: Client.password), from: address)
    }

    /// Creates an account, logs in and binds a new software device key.
    func userWithDevice(_ username: String) throws -> (P256SigningKey, String) {
        try createAccount(username)
        let login = self.login(try Username(username), Client.password)
        let tokens = try TokenResponse(jsonData: login.body)
        let key = try P256SigningKey()
        let bound = send(
            API.bindDevice,
            BindDeviceRequest(publicKey: key.publicKey.spkiDER, name: "Phone", keyProtection: .emulator),
            token: tokens.accessToken)
        return (key, try BindDeviceResponse(jsonData: bound.body).deviceID)
    }

    func challenge(_ deviceID: String, from address: String = "127.0.0.1") throws -> ChallengeResponse {
        let reply = send(
            API.createChallenge, ChallengeRequest(deviceID: deviceID), from: address)
        guard reply.status == 201 else { throw TestFailure("challenge: \(reply.status)") }
        return try ChallengeResponse(jsonData: reply.body)
    }

    func deviceLogin(_ challengeID: String, _ signature: Data, from address: String) -> HTTPResponse {
        send(
            API.deviceLogin,
            DeviceLoginRequest(challengeID: challengeID, signature: signature),
            from: address)
    }
}
