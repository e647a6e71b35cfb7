import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Accounts and password login")
struct AccountTests {
    @Test(arguments: Engine.all) func createAccountThenTakenUsername(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let userID = try await live.client.createAccount("alice")
        #expect(userID.hasPrefix("usr_"))
        let again = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: "ALICE", password: "another password"))
        #expect(again.status == 409)
        #expect(again.problem?.code == .usernameTaken)
    }

    @Test(arguments: Engine.all) func passwordLengthRules(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        for password in ["short", String(repeating: "x", count: 1025)] {
            let reply = try await live.client.send(
                API.createAccount, CreateAccountRequest(username: "bob", password: password))
            #expect(reply.status == 400)
            #expect(reply.problem?.code == .invalidRequest)
        }
        try await live.client.createAccount("bob", password: String(repeating: "é", count: 1024))
    }

    /// Lengths are Unicode code points, as docs/openapi.yaml's minLength/maxLength count them,
    /// not grapheme clusters: a letter with seven combining accents is 8 characters, and 1025
    /// code points are too many even when they make fewer clusters.
    @Test func passwordLengthsCountCodePoints() async throws {
        let live = try TestServer()
        let accented = "e" + String(repeating: "\u{301}", count: 7)
        #expect(accented.count == 1 && accented.unicodeScalars.count == 8)
        try await live.client.createAccount("carol", password: accented)
        let tooLong = String(repeating: "e\u{301}", count: 512) + "e"
        #expect(tooLong.count == 513 && tooLong.unicodeScalars.count == 1025)
        let reply = try await live.client.send(
            API.createAccount, CreateAccountRequest(username: "dave", password: tooLong))
        #expect(reply.status == 400)
        #expect(reply.problem?.code == .invalidRequest)
    }

    @Test(arguments: Engine.all) func loginMeLogout(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let userID = try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        #expect(tokens.userID == userID)
        #expect(tokens.tokenType == "Bearer")
        #expect(tokens.expiresIn == 900)
        let me = try await live.client.send(API.me, token: tokens.accessToken)
        #expect(me.status == 200)
        let body = try me.decode(MeResponse.self)
        #expect(body.username == "alice")
        #expect(body.authMethod == .password)
        #expect(body.sessionID == tokens.sessionID)
        #expect(abs(body.authTime.timeIntervalSince(live.clock.now)) < 2)

        let logout = try await live.client.send(API.logout, token: tokens.accessToken)
        #expect(logout.status == 204)
        let after = try await live.client.send(API.me, token: tokens.accessToken)
        #expect(after.status == 401)
        #expect(after.problem?.code == .tokenInvalid)
        #expect(after.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        let refresh = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: tokens.refreshToken))
        #expect(refresh.status == 401)
    }

    @Test(arguments: Engine.all) func unknownUserAndWrongPasswordAreByteIdentical(engine: Engine) async throws
    {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let wrong = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: "wrong password", clientID: "c"))
        let unknown = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "mallory", password: "wrong password", clientID: "c"))
        #expect(wrong.status == 401)
        #expect(unknown.status == 401)
        #expect(wrong.body == unknown.body)
        #expect(wrong.problem?.code == .invalidCredentials)
        #expect(wrong.header("Content-Type") == unknown.header("Content-Type"))
    }

    /// From one client address (all of these requests come from loopback): the pair (account,
    /// address) is blocked. ThrottlingTests shows that other addresses are not.
    @Test(arguments: Engine.all) func sixthWrongPasswordIsThrottledWithGrowingDelay(engine: Engine)
        async throws
    {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let wrong = PasswordLoginRequest(username: "alice", password: "wrong password", clientID: "c")
        for _ in 1...5 {
            #expect(try await live.client.send(API.passwordLogin, wrong).status == 401)
        }
        let sixth = try await live.client.send(API.passwordLogin, wrong)
        #expect(sixth.status == 429)
        #expect(sixth.problem?.code == .throttled)
        #expect(sixth.header("Retry-After") == "60")
        // The right password from this address is refused too while blocked, and the answer does
        // not say which factor failed.
        let right = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: Client.password, clientID: "c"))
        #expect(right.status == 429)
        #expect(right.body == sixth.body)

        // After the block, one more failure blocks again for twice as long.
        live.clock.advance(by: 61)
        #expect(try await live.client.send(API.passwordLogin, wrong).status == 401)
        let blocked = try await live.client.send(API.passwordLogin, wrong)
        #expect(blocked.status == 429)
        #expect(blocked.header("Retry-After") == "120")

        // A successful login resets the count.
        live.clock.advance(by: 121)
        _ = try await live.client.login("alice", clientID: "c")
        #expect(try await live.client.send(API.passwordLogin, wrong).status == 401)

        let events = try await live.client.send(
            API.audit, token: try await live.client.login("alice").accessToken)
        let list = try events.decode(AuditListResponse.self).events
        let types = list.map(\.type)
        // One lockout per block, folded into one row; the refused requests in between are not audited.
        #expect(list.filter { $0.type == .lockout }.map(\.count) == [2])
        #expect(!types.contains(AuditEventType(rawValue: "throttled")))
        #expect(list.filter { $0.type == .loginFailed }.map(\.count) == [7])
    }

    @Test(arguments: Engine.all) func unknownUsernamesAreThrottledAlike(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let wrong = PasswordLoginRequest(username: "nobody", password: "wrong password", clientID: "c")
        for _ in 1...5 { _ = try await live.client.send(API.passwordLogin, wrong) }
        let sixth = try await live.client.send(API.passwordLogin, wrong)
        #expect(sixth.status == 429)
    }

    @Test(arguments: Engine.all) func clientAddressIsThrottled(engine: Engine) async throws {
        let live = try TestServer(engine: engine) { $0.addressFailureLimit = 3 }
        for name in ["a1", "a2", "a3"] {
            let reply = try await live.client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: try Username(name), password: "wrong password", clientID: "c"))
            #expect(reply.status == 401)
        }
        let next = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "a4", password: "wrong password", clientID: "c"))
        #expect(next.status == 429)
        #expect(next.header("Retry-After") != nil)
    }

    /// A server where many logins are in flight at once: 16 worker threads, as many hashes at a
    /// time, and a hash that costs a few milliseconds.
    private func concurrentServer(
        _ engine: Engine, _ adjust: @escaping (inout Configuration) -> Void = { _ in }
    ) throws -> TestServer {
        try TestServer(engine: engine) { configuration in
            configuration.workerThreads = 16
            configuration.hashingConcurrency = 16
            configuration.argon2 = Argon2Parameters(memoryKiB: 2048, iterations: 1)
            adjust(&configuration)
        }
    }

    /// Sends the requests all at once and returns the replies.
    private func sendInParallel(_ live: TestServer, _ requests: [PasswordLoginRequest]) async throws
        -> [Reply]
    {
        try await withThrowingTaskGroup(of: Reply.self) { group in
            for request in requests {
                group.addTask { try await live.client.send(API.passwordLogin, request) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test(arguments: Engine.all) func parallelWrongPasswordsGetNoMoreGuessesThanTheAccountLimit(
        engine: Engine
    ) async throws {
        let live = try concurrentServer(engine)
        try await live.client.createAccount("alice")
        let wrong = PasswordLoginRequest(username: "alice", password: "wrong password", clientID: "c")
        let replies = try await sendInParallel(live, Array(repeating: wrong, count: 40))
        let checked = replies.filter { $0.status == 401 }
        let throttled = replies.filter { $0.status == 429 }
        // Every attempt is claimed before its hash, so exactly the limit get their password checked.
        #expect(checked.count == 5)
        #expect(checked.allSatisfy { $0.problem?.code == .invalidCredentials })
        #expect(throttled.count == 35)
        #expect(throttled.allSatisfy { $0.problem?.code == .throttled && $0.header("Retry-After") == "60" })

        // The right password from this address is refused too until the block ends, then it works.
        let right = PasswordLoginRequest(username: "alice", password: Client.password, clientID: "c")
        #expect(try await live.client.send(API.passwordLogin, right).status == 429)
        live.clock.advance(by: 61)
        #expect(try await live.client.send(API.passwordLogin, right).status == 200)
    }

    @Test(arguments: Engine.all) func parallelWrongPasswordsGetNoMoreGuessesThanTheAddressLimit(
        engine: Engine
    ) async throws {
        let live = try concurrentServer(engine) { $0.addressFailureLimit = 3 }
        let requests = try (1...40).map {
            PasswordLoginRequest(
                username: try Username("user\($0)"), password: "wrong password", clientID: "c")
        }
        let replies = try await sendInParallel(live, requests)
        #expect(replies.filter { $0.status == 401 }.count == 3)
        #expect(replies.filter { $0.status == 429 && $0.header("Retry-After") != nil }.count == 37)
    }

    @Test(arguments: Engine.all) func successfulLoginsDoNotCountAgainstTheAddress(engine: Engine) async throws
    {
        let live = try TestServer(engine: engine) { $0.addressFailureLimit = 3 }
        try await live.client.createAccount("alice")
        let wrong = PasswordLoginRequest(username: "bob", password: "wrong password", clientID: "c")
        #expect(try await live.client.send(API.passwordLogin, wrong).status == 401)
        for _ in 1...5 { _ = try await live.client.login("alice") }
        // The successes were counted while in flight and taken back: two failures so far, not seven.
        #expect(try await live.client.send(API.passwordLogin, wrong).status == 401)
        #expect(try await live.client.send(API.passwordLogin, wrong).status == 401)
        #expect(try await live.client.send(API.passwordLogin, wrong).status == 429)
    }

    @Test(arguments: Engine.all) func throttledRequestsWriteNothing(engine: Engine) async throws {
        let app = try InProcessApplication(engine)
        try app.createAccount("alice")
        for _ in 1...5 { #expect(app.login("alice", "wrong password").status == 401) }
        let audited = try app.count("SELECT COUNT(*) FROM audit_events")
        let throttle = try app.rows("SELECT failures, blocked_until, updated_at FROM throttles")

        // 50 refused requests, 25 at once, some with the right password: no commit, no audit row.
        DispatchQueue.concurrentPerform(iterations: 50) { index in
            let reply = app.login("alice", index.isMultiple(of: 2) ? "wrong password" : Client.password)
            #expect(reply.status == 429)
        }
        #expect(try app.count("SELECT COUNT(*) FROM audit_events") == audited)
        #expect(try app.count("SELECT COUNT(*) FROM audit_events WHERE type = 'lockout'") == 1)
        #expect(try app.rows("SELECT failures, blocked_until, updated_at FROM throttles") == throttle)
        #expect(
            app.application.metrics.render().contains(
                #"keybound_logins_total{method="password",outcome="throttled"} 50"#))
    }

    @Test(arguments: Engine.all) func addressLockoutIsAuditedOnce(engine: Engine) throws {
        let app = try InProcessApplication(engine) { $0.addressFailureLimit = 3 }
        for index in 1...10 { _ = app.login(try Username("user\(index)"), "wrong password") }
        // Unknown usernames: the target is the address, so the failures fold into one row.
        #expect(try app.rows("SELECT count FROM audit_events WHERE type = 'login_failed'") == [[.integer(3)]])
        #expect(
            try app.rows("SELECT count FROM audit_events WHERE type = 'address_lockout'") == [[.integer(1)]])
    }

    /// The address block keeps doubling past the 15-minute failure window: the window counts
    /// from the end of the last block, so waiting out a long block does not reset the count.
    @Test(arguments: Engine.all) func addressBlocksKeepGrowingPastTheFailureWindow(engine: Engine) throws {
        let app = try InProcessApplication(engine) { $0.addressFailureLimit = 3 }
        var attempt = 0
        func failOnce() throws -> HTTPResponse {
            attempt += 1
            return app.login(try Username("user\(attempt)"), "wrong password")
        }
        var delays: [Int] = []
        for _ in 1...8 {
            // Fail until blocked, then wait the block out and note how long it was.
            var reply = try failOnce()
            while reply.status == 401 { reply = try failOnce() }
            #expect(reply.status == 429)
            let retryAfter = Int(reply.headers["Retry-After"] ?? "") ?? 0
            delays.append(retryAfter)
            app.clock.advance(by: TimeInterval(retryAfter + 1))
        }
        // 60 s doubling: the blocks outgrow the 15-minute window and keep growing to the cap.
        #expect(delays.count == 8)
        #expect(delays.last == 3600, "\(delays)")
        #expect(delays == delays.sorted(), "\(delays)")
    }

    @Test(arguments: Engine.all) func housekeepingPurgesStaleThrottleRows(engine: Engine) throws {
        let app = try InProcessApplication(engine)
        try app.createAccount("alice")
        // Made-up usernames from two addresses, and a real account blocked for one address.
        for index in 1...3 {
            _ = app.login(try Username("ghost\(index)"), "wrong password", from: "192.0.2.1")
        }
        for _ in 1...5 { _ = app.login("alice", "wrong password", from: "192.0.2.2") }
        // Per username: the account and the (account, address) pair; per address: the address.
        #expect(try app.count("SELECT COUNT(*) FROM throttles") == 4 + 4 + 2)

        // The address windows (15 minutes) have passed: those rows are gone, accounts stay a day.
        app.clock.advance(by: 16 * 60)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM throttles WHERE scope LIKE 'address:%'") == 0)
        #expect(try app.count("SELECT COUNT(*) FROM throttles WHERE scope LIKE 'account:%'") == 4)
        #expect(try app.count("SELECT COUNT(*) FROM throttles WHERE scope LIKE 'account-address:%'") == 4)
        // The count was kept: the sixth failure from that address blocks again.
        #expect(app.login("alice", "wrong password", from: "192.0.2.2").status == 401)
        #expect(app.login("alice", "wrong password", from: "192.0.2.2").status == 429)

        app.clock.advance(by: 86_400 + 1)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM throttles") == 0)
        #expect(app.login("alice", Client.password).status == 200)
    }

    @Test func defaultArgon2ParametersAreOWASPMinimum() throws {
        let configuration = Configuration()
        #expect(configuration.argon2 == .owaspMinimum)
        let hasher = try PasswordHasher(parameters: configuration.argon2, concurrency: 1)
        let encoded = try hasher.hash("correct horse battery")
        #expect(encoded.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        #expect(hasher.verify("correct horse battery", against: encoded))
        #expect(!hasher.verify("wrong", against: encoded))
        #expect(!hasher.verify("correct horse battery", against: nil))
    }

    @Test func passwordsWithNULAndUnicode() throws {
        let hasher = try PasswordHasher(parameters: .insecureTesting, concurrency: 1)
        let encoded = try hasher.hash("pass\u{0}word ✓")
        #expect(hasher.verify("pass\u{0}word ✓", against: encoded))
        #expect(!hasher.verify("pass", against: encoded))
    }
}

/// The application without sockets, with a manual clock and its database at hand.
final class InProcessApplication: InProcessApplicationHandle, Sendable {
    let directory: TemporaryDirectory
    let database: TestDatabase
    let clock = ManualClock()
    let application: Application

    /// - Parameter wrap: wraps the real database (tests count or hold its transactions).
    init(
        _ engine: Engine = .sqlite, _ adjust: (inout Configuration) -> Void = { _ in },
        wrapping wrap: ((any Database) -> any Database)? = nil
    ) throws {
        directory = try TemporaryDirectory()
        database = try TestDatabase(engine, in: directory)
        var configuration = database.configuration
        configuration.clock = clock.serverClock
        adjust(&configuration)
        let password = database.password
        let wrapped = try wrap.map {
            $0(
                try openDatabase(
                    url: configuration.databaseURL, connections: 4, synchronous: .normal, password: password))
        }
        application = try Application(configuration: configuration, database: wrapped)
    }

    func createAccount(_ username: String) throws {
        let reply = send(
            API.createAccount,
            CreateAccountRequest(username: try Username(username), password: Client.password))
        guard reply.status == 201 else { throw TestFailure("account: \(reply.status)") }
    }

    func login(_ username: Username, _ password: String, from address: String = "127.0.0.1") -> HTTPResponse {
        send(
            API.passwordLogin,
            PasswordLoginRequest(username: username, password: password, clientID: "c"),
            from: address)
    }

    func rows(_ sql: String) throws -> [[SQLValue]] {
        try application.database.read { try $0.query(sql, []) }.map(\.values)
    }

    func count(_ sql: String) throws -> Int64 {
        try application.database.read { try $0.queryOne(sql, [])?.integer(0) ?? 0 }
    }
}
