import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("PostgreSQL URLs and placeholders")
struct PostgresURLTests {
    @Test func parsesEveryPart() throws {
        let url = try PostgresURL(
            "postgres://keybound@db.internal:6432/auth?sslmode=verify-full&application_name=kb")
        #expect(url.user == "keybound")
        #expect(url.endpoints == [.init(host: "db.internal", port: 6432)])
        #expect(url.database == "auth")
        #expect(
            url.options == [
                .init(key: "sslmode", value: "verify-full"), .init(key: "application_name", value: "kb"),
            ])
        #expect(
            url.description
                == "postgres://keybound@db.internal:6432/auth?sslmode=verify-full&application_name=kb")

        let defaults = try PostgresURL("postgresql://")
        #expect(defaults.user == nil && defaults.endpoints == [.init()] && defaults.database == nil)
        #expect(defaults.hostParameter == nil && defaults.portParameter == nil)
        let ipv6 = try PostgresURL("postgres://u@[::1]:5433/d")
        #expect(ipv6.endpoints == [.init(host: "::1", port: 5433)])
        #expect(ipv6.description == "postgres://u@[::1]:5433/d")
        let socket = try PostgresURL("postgres://u@%2Fvar%2Frun%2Fpostgresql/d")
        #expect(socket.host == "/var/run/postgresql")
        #expect(url.targetSessionAttributes == "read-write", "a standby is passed over unless the URL says")
    }

    /// libpq's multi-host URLs (a Patroni pair): each host with its port, in order, as libpq's
    /// `host` and `port` lists; `target_session_attrs` as given, or read-write.
    @Test func parsesMultiHostURLs() throws {
        let url = try PostgresURL(
            "postgres://keybound@10.0.0.1:5432,[fd00::2]:5433,db3/kb?target_session_attrs=primary&sslmode=verify-full"
        )
        #expect(
            url.endpoints == [
                .init(host: "10.0.0.1", port: 5432), .init(host: "fd00::2", port: 5433), .init(host: "db3"),
            ])
        #expect(url.hostParameter == "10.0.0.1,fd00::2,db3")
        #expect(url.portParameter == "5432,5433,5432")
        #expect(url.targetSessionAttributes == "primary")
        #expect(
            url.description
                == "postgres://keybound@10.0.0.1:5432,[fd00::2]:5433,db3/kb?target_session_attrs=primary&sslmode=verify-full"
        )
        #expect(try PostgresURL("postgres://u@a,b/d").portParameter == nil)
        #expect(try PostgresURL("postgres://u@a,b/d").hostParameter == "a,b")
    }

    @Test(arguments: [
        "postgres://alice:hunter2@db/auth", "postgres://alice@db/auth?password=hunter2",
        "postgres://alice:hunter2@db:5432/auth?sslmode=require",
    ])
    func aPasswordInTheURLIsRefusedWithoutRepeatingIt(_ text: String) {
        #expect(Configuration.databaseURLProblem(text)?.contains("KEYBOUND_DB_PASSWORD") == true)
        #expect(Configuration.databaseURLProblem(text)?.contains("hunter2") == false)
    }

    @Test(arguments: [
        "postgres://u@db:0/d", "postgres://u@db:99999/d", "postgres://u@db:x/d", "postgres://u@db/d?foo=1",
        "postgres://u@[::1/d", "postgres://u@a,,b/d", "postgres://u@a,:5432/d", "postgres://u@db/d/e",
        "mysql://u@db/d", "sqlite:", "postgres://u@a,b/d?target_session_attrs=standby",
        "postgres://u@a,b/d?target_session_attrs=read-only", "postgres://u@a b/d",
    ])
    func malformedURLsAreRefused(_ text: String) {
        #expect(Configuration.databaseURLProblem(text) != nil)
    }

    @Test func acceptsWhatServeAccepts() {
        #expect(Configuration.databaseURLProblem("sqlite:/var/lib/keybound/keybound.sqlite") == nil)
        #expect(Configuration.databaseURLProblem("postgres://keybound@127.0.0.1:5432/keybound") == nil)
        #expect(Configuration.databaseURLProblem("postgresql://keybound@localhost/keybound") == nil)
        #expect(
            Configuration.databaseURLProblem(
                "postgres://keybound@127.0.0.1:5433,127.0.0.1:5434/keybound?target_session_attrs=read-write")
                == nil)
    }

    /// libpq's default `sslmode=prefer` checks no certificate and may fall back to plain text:
    /// for a server that is not on this machine the server warns unless the URL asks for a
    /// verified one (`verify-full`, `verify-ca`).
    @Test func unverifiedConnectionsToOtherMachinesAreFound() throws {
        func unverified(_ text: String, _ environment: [String: String] = [:]) throws -> String? {
            try PostgresURL(text).unverifiedTransport(environment: environment).map {
                "\($0.host) \($0.sslmode)"
            }
        }
        #expect(try unverified("postgres://u@db.example:5432/x") == "db.example prefer")
        #expect(try unverified("postgres://u@10.0.0.5/x?sslmode=require") == "10.0.0.5 require")
        #expect(try unverified("postgres://u@[2001:db8::5]/x?sslmode=disable") == "2001:db8::5 disable")
        #expect(try unverified("postgres://u@db.example/x?sslmode=verify-full") == nil)
        #expect(
            try unverified("postgres://u@db.example/x?sslmode=verify-ca&sslrootcert=%2Fetc%2Fca.pem") == nil)
        for local in [
            "postgres://u@127.0.0.1:5432/x", "postgres://u@127.8.9.10/x", "postgres://u@[::1]/x",
            "postgres://u@localhost/x", "postgres://u@LocalHost/x",
            "postgres://u@%2Fvar%2Frun%2Fpostgresql/x",
            "postgres://u@/x", "postgresql://",
        ] {
            #expect(try unverified(local) == nil, "\(local)")
        }
        // What libpq takes from the environment when the URL does not say.
        #expect(try unverified("postgres://u@/x", ["PGHOST": "db.example"]) == "db.example prefer")
        #expect(try unverified("postgres://u@/x", ["PGHOST": "/tmp,db.example"]) == "db.example prefer")
        #expect(try unverified("postgres://u@db.example/x", ["PGSSLMODE": "verify-full"]) == nil)
        #expect(try unverified("postgres://u@db.example/x", ["PGSSLMODE": "require"]) == "db.example require")
        #expect(
            try unverified("postgres://u@db.example/x?sslmode=verify-full", ["PGSSLMODE": "disable"]) == nil)
    }

    /// The warning is one log line at start, on the sink `keybound serve` writes to standard error.
    @Test func theServerWarnsOnceAtStartAboutAnUnverifiedConnection() throws {
        let directory = try TemporaryDirectory()
        func warnings(_ url: String) throws -> [String] {
            let logs = LogCollector()
            var configuration = Configuration.testing(databasePath: "")
            configuration.databaseURL = url
            configuration.log = logs.sink
            // The server opens the given storage instead of the URL's: nothing connects anywhere.
            let storage = try openDatabase(
                url: "sqlite:" + directory.path("\(UUID().uuidString).sqlite"), connections: 2,
                synchronous: .normal)
            let server = try Server(configuration: configuration, database: storage)
            try server.start()
            server.stop(gracePeriod: 1)
            return logs.all.filter { $0.contains(#""msg":"postgresql server not verified""#) }
        }
        let remote = try warnings("postgres://u@db.example:5432/x")
        #expect(remote.count == 1, "\(remote)")
        #expect(
            remote.first.map {
                $0.contains(#""level":"warning""#) && $0.contains(#""host":"db.example""#)
                    && $0.contains(#""sslmode":"prefer""#)
            } == true, "\(remote)")
        #expect(try warnings("postgres://u@127.0.0.1:5432/x").isEmpty)
        #expect(try warnings("postgres://u@db.example:5432/x?sslmode=verify-full").isEmpty)
    }

    @Test func placeholdersAreNumberedOutsideLiteralsIdentifiersAndComments() {
        let (sql, count) = PostgresConnection.numberPlaceholders(
            """
            SELECT ?, '?', 'it''s ?', "odd?name" -- a ? comment
            FROM t /* ? */ WHERE a = ? AND b LIKE 'x%?'
            """)
        #expect(count == 2)
        #expect(
            sql == """
                SELECT $1, '?', 'it''s ?', "odd?name" -- a ? comment
                FROM t /* ? */ WHERE a = $2 AND b LIKE 'x%?'
                """)
    }
}

/// The tests that need a running PostgreSQL (see ``PostgresRequirement`` for a machine without).
@Suite("PostgreSQL", PostgresRequirement())
struct PostgresTests {
    // MARK: Storage

    /// The storage on a new database of the shared cluster.
    private func storage(_ limits: PostgresDatabase.Limits = .init()) throws -> (
        PostgresDatabase, TestDatabase
    ) {
        let directory = try TemporaryDirectory()
        let database = try TestDatabase(.postgres, in: directory)
        let storage = try PostgresDatabase(
            url: PostgresURL(database.url), password: database.password, maximumConnections: 8, limits: limits
        )
        try storage.createGroupLockTable()
        return (storage, database)
    }

    @Test func valuesRoundTripWithTheirTypes() throws {
        let (storage, database) = try storage()
        defer { withExtendedLifetime(database) {} }
        let row = try storage.read { connection in
            try connection.queryOne(
                "SELECT 1, CAST(? AS BIGINT), CAST(? AS TEXT), CAST(NULL AS TEXT), 'a?b', COUNT(*), true",
                [.integer(-9_007_199_254_740_993), .text("ünïcode ✓ '\"")])
        }
        #expect(
            row?.values == [
                .integer(1), .integer(-9_007_199_254_740_993), .text("ünïcode ✓ '\""), .null, .text("a?b"),
                .integer(1), .integer(1),
            ])
    }

    @Test func aTransactionWhoseStatementFailedNeverCommits() throws {
        let (storage, database) = try storage()
        defer { withExtendedLifetime(database) {} }
        try storage.write { try $0.execute("CREATE TABLE t (v BIGINT)", []) }
        // The work swallows a failed statement and returns normally: PostgreSQL answers the
        // COMMIT with ROLLBACK, and the caller must hear of it.
        #expect(throws: DatabaseError.self) {
            try storage.write { connection in
                try connection.execute("INSERT INTO t (v) VALUES (1)", [])
                _ = try? connection.execute("INSERT INTO missing (v) VALUES (1)", [])
            }
        }
        #expect(try storage.read { try $0.queryOne("SELECT COUNT(*) FROM t", [])?.integer(0) } == 0)
    }

    @Test func concurrentReadThenWriteTransactionsLoseNoUpdate() throws {
        let (storage, database) = try storage()
        defer { withExtendedLifetime(database) {} }
        try storage.write { connection in
            try connection.execute("CREATE TABLE counter (id BIGINT PRIMARY KEY, value BIGINT NOT NULL)", [])
            try connection.execute("INSERT INTO counter (id, value) VALUES (1, 0)", [])
        }
        // Each increment reads the value, then writes value + 1, as the throttles and the audit
        // folding do; a short pause between the two lets the threads overlap. Under READ
        // COMMITTED concurrent increments would overwrite each other; SERIALIZABLE rolls the
        // losers back (40001) and runs them again. Every increment that was acknowledged counts.
        let acknowledged = Locked(0)
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread {
                for _ in 0..<5 {
                    let succeeded: Void? = try? storage.write { connection in
                        let value =
                            try connection.queryOne("SELECT value FROM counter WHERE id = 1", [])?.integer(0)
                            ?? 0
                        _ = try connection.query("SELECT pg_sleep(0.002)", [])
                        try connection.execute(
                            "UPDATE counter SET value = ? WHERE id = 1", [.integer(value + 1)])
                    }
                    if succeeded != nil { acknowledged.withLock { $0 += 1 } }
                }
                done.leave()
            }.start()
        }
        done.wait()
        let value = try storage.read {
            try $0.queryOne("SELECT value FROM counter WHERE id = 1", [])?.integer(0)
        }
        #expect(acknowledged.withLock { $0 } > 0)
        #expect(value == Int64(acknowledged.withLock { $0 }))
    }

    @Test func aPipelinedBulkLoadCommitsAllOrNothing() throws {
        let (storage, database) = try storage()
        defer { withExtendedLifetime(database) {} }
        try storage.write { try $0.execute("CREATE TABLE t (v BIGINT PRIMARY KEY)", []) }
        // More rows than one batch of answers, so several batches are read.
        try storage.bulkWrite { connection in
            for value in 0..<1200 {
                try connection.execute("INSERT INTO t (v) VALUES (?)", [.integer(Int64(value))])
            }
        }
        #expect(try storage.read { try $0.queryOne("SELECT COUNT(*) FROM t", [])?.integer(0) } == 1200)
        // A duplicate key in the middle: the load fails and none of it stays.
        #expect(throws: DatabaseError.self) {
            try storage.bulkWrite { connection in
                for value in [5000, 5001, 7, 5002] {
                    try connection.execute("INSERT INTO t (v) VALUES (?)", [.integer(Int64(value))])
                }
            }
        }
        #expect(try storage.read { try $0.queryOne("SELECT COUNT(*) FROM t", [])?.integer(0) } == 1200)
    }

    @Test func slowStatementsEndInBusyOrUnavailableAndThePoolRecovers() throws {
        var limits = PostgresDatabase.Limits()
        limits.statementTimeout = 200
        limits.responseTimeout = 1
        let (storage, database) = try storage(limits)
        defer { withExtendedLifetime(database) {} }
        // The server cancels it (statement_timeout): busy, and the connection stays usable.
        let cancelled = #expect(throws: DatabaseError.self) {
            try storage.read { try $0.query("SELECT pg_sleep(0.5)", []) }
        }
        #expect(cancelled.map { if case .busy = $0 { true } else { false } } == true)
        // No answer within our own deadline (here the server's timeout is lifted): unavailable,
        // and the connection is dropped.
        let unanswered = #expect(throws: DatabaseError.self) {
            try storage.read { connection in
                try connection.execute("SET LOCAL statement_timeout = 0", [])
                return try connection.query("SELECT pg_sleep(3)", [])
            }
        }
        #expect(unanswered.map { if case .unavailable = $0 { true } else { false } } == true)
        #expect(try storage.read { try $0.queryOne("SELECT 2", [])?.integer(0) } == 2)
    }

    @Test func wrongPasswordFailsAtStartWithoutShowingThePassword() throws {
        let cluster = try PostgresCluster.shared.get()
        let name = try cluster.createDatabase()
        defer { cluster.dropDatabase(name) }
        var configuration = Configuration.testing(databasePath: "")
        configuration.databaseURL = cluster.url(database: name)
        configuration.databasePassword = "not-the-password-" + UUID().uuidString
        let error = #expect(throws: ServerError.self) { try Server(configuration: configuration) }
        #expect(error?.description.contains("password authentication failed") == true)
        #expect(error?.description.contains(configuration.databasePassword ?? "") == false)
    }

    @Test func thePasswordIsNeverLogged() async throws {
        let live = try TestServer(engine: .postgres)
        try await live.client.createAccount("alice")
        _ = try await live.client.login("alice")
        live.server.stop()
        let password = try #require(live.database.password)
        #expect(!live.logs.all.isEmpty)
        #expect(!live.logs.all.contains { $0.contains(password) })
    }

    // MARK: Several servers on one database

    @Test func threeServersStartingAtOnceMigrateOnce() async throws {
        let shared = try SharedDatabase()
        async let first = shared.serve()
        async let second = shared.serve()
        async let third = shared.serve()
        let servers = try await [first, second, third]
        for server in servers { #expect(try await server.client.send(API.health).status == 200) }
        let recorded = try shared.sql(
            "SELECT COUNT(*), COUNT(DISTINCT version), MAX(version) FROM schema_migrations")
        #expect(recorded == "\(Migrations.all.count)|\(Migrations.all.count)|\(Migrations.newest)")
        // One challenge key for all of them: migration 4 wrote its random row once.
        #expect(try shared.sql("SELECT COUNT(*) FROM server_secrets") == "1")
    }

    @Test func aChallengeIssuedByInstanceAIsAcceptedOnceOnBAndRefusedAfter() async throws {
        let shared = try SharedDatabase()
        let (a, b, c) = try await (shared.serve(), shared.serve(), shared.serve())
        let (_, key, deviceID) = try await a.client.userWithDevice("alice")

        // Issued on A, which stores nothing; B verifies it with the key they share through the
        // database, and records its use there.
        let challenge = try await a.client.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        #expect(
            try await b.client.deviceLogin(challengeID: challenge.challengeID, signature: signature).status
                == 200)
        for server in [a, b, c] {
            let again = try await server.client.deviceLogin(
                challengeID: challenge.challengeID, signature: signature)
            #expect(again.status == 409)
            #expect(again.problem?.code == .challengeUsed)
        }

        // 32 uses of one challenge at once, spread over the three: exactly one session.
        let contested = try await b.client.challenge(deviceID)
        let contestedSignature = try sign(contested.payload, with: key)
        let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
            for index in 0..<32 {
                let client = [a, b, c][index % 3].client
                group.addTask {
                    try await client.deviceLogin(
                        challengeID: contested.challengeID, signature: contestedSignature)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(replies.filter { $0.status == 200 }.count == 1)
        #expect(replies.filter { $0.status == 409 && $0.problem?.code == .challengeUsed }.count == 31)
        let sessions = try shared.sql("SELECT COUNT(*) FROM sessions WHERE auth_method = 'device'")
        #expect(sessions == "2")
    }

    @Test func aRotatedRefreshTokenIsDeadEverywhereAndItsReuseEndsTheFamily() async throws {
        let shared = try SharedDatabase()
        let (a, b, c) = try await (shared.serve(), shared.serve(), shared.serve())
        try await a.client.createAccount("alice")
        let first = try await b.client.login("alice")

        let rotated = try await a.client.send(
            API.refresh, RefreshRequest(refreshToken: first.refreshToken))
        #expect(rotated.status == 200)
        let second = try rotated.decode(TokenResponse.self)
        #expect(try await c.client.send(API.me, token: second.accessToken).status == 200)

        // The old token on B: dead, and presenting it is reuse, which ends the whole family.
        let reused = try await b.client.send(
            API.refresh, RefreshRequest(refreshToken: first.refreshToken))
        #expect(reused.status == 401)
        #expect(reused.problem?.code == .tokenInvalid)
        // On C, the newest tokens of the family are dead too.
        let newest = try await c.client.send(
            API.refresh, RefreshRequest(refreshToken: second.refreshToken))
        #expect(newest.status == 401)
        #expect(try await c.client.send(API.me, token: second.accessToken).status == 401)
        #expect(
            try shared.sql("SELECT revoke_reason FROM sessions WHERE id = '\(first.sessionID)'")
                == "refresh_reuse")
    }

    @Test func failedLoginsAreCountedAcrossServers() async throws {
        let shared = try SharedDatabase()
        let (a, b, c) = try await (shared.serve(), shared.serve(), shared.serve())
        try await a.client.createAccount("alice")
        let wrong = PasswordLoginRequest(username: "alice", password: "wrong password", clientID: "c")
        // Five failures (the default limit for one account from one address), spread over A, B, C.
        for server in [a, b, c, a, b] {
            #expect(try await server.client.send(API.passwordLogin, wrong).status == 401)
        }
        // Every server now refuses this address on the account, even the right password.
        let right = PasswordLoginRequest(username: "alice", password: Client.password, clientID: "c")
        for server in [c, a, b] {
            let refused = try await server.client.send(API.passwordLogin, right)
            #expect(refused.status == 429)
            #expect(refused.header("Retry-After") != nil)
        }
    }

    @Test func anApprovalIsDecidedOnceAcrossServers() async throws {
        let shared = try SharedDatabase()
        let (a, b, c) = try await (shared.serve(), shared.serve(), shared.serve())
        let (tokens, key, deviceID) = try await a.client.userWithDevice("alice")
        let created = try await b.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken)
        let approval = try created.decode(ApprovalChallengeResponse.self)
        let confirm = ConfirmApprovalRequest(signature: try sign(approval.payload, with: key))
        let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
            for index in 0..<12 {
                let client = [a, b, c][index % 3].client
                group.addTask {
                    try await client.send(
                        API.confirmApproval, confirm, parameters: [approval.approvalID],
                        token: tokens.accessToken)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(replies.filter { $0.status == 200 }.count == 1)
        #expect(replies.filter { $0.status == 409 && $0.problem?.code == .challengeUsed }.count == 11)
        let status = try await c.client.send(
            API.approvalStatus, parameters: [approval.approvalID], token: tokens.accessToken)
        #expect(try status.decode(ApprovalResponse.self).status == .approved)
    }

    // MARK: Faults

    /// PostgreSQL crashes (an immediate stop) while clients create accounts, and comes back: the
    /// server answers 503 `unavailable` with Retry-After meanwhile (never a 500, never a hang),
    /// `/healthz` says so, it recovers without a restart, and every account it acknowledged exists.
    @Test func databaseStoppedAndRestartedMidLoad() async throws {
        let cluster = try PostgresCluster()  // its own: stopping the shared one would hit other tests
        let name = try cluster.createDatabase()
        var configuration = Configuration.testing(databasePath: "")
        configuration.databaseURL = cluster.url(database: name)
        configuration.databasePassword = cluster.password
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop(gracePeriod: 1) }
        let client = Client(baseURL: try #require(server.baseURL))
        let load = AccountLoad(client: client)
        let workers = Task { try await load.run(workers: 4) }

        try await load.waitFor("successes before the stop") { $0.acknowledged.count >= 10 }
        try cluster.stop(immediate: true)
        let stopped = await load.snapshot().replies.count
        try await load.waitFor("503s while stopped") { state in
            state.replies.dropFirst(stopped).filter { $0.status == 503 }.count >= 8
        }
        let health = try await client.send(API.health)
        #expect(health.status == 503)
        #expect(health.problem?.code == .unavailable)

        try cluster.start()
        let restarted = await load.snapshot().acknowledged.count
        try await load.waitFor("successes after the restart") { $0.acknowledged.count >= restarted + 10 }
        #expect(try await client.send(API.health).status == 200)
        await load.stop()
        try await workers.value

        let state = await load.snapshot()
        let unexpected = state.replies.filter { $0.status != 201 && $0.status != 503 }
        #expect(unexpected.isEmpty, "\(unexpected.prefix(3).map { "\($0.status) \($0.text)" })")
        let unavailable = state.replies.filter { $0.status == 503 }
        #expect(
            unavailable.allSatisfy { $0.problem?.code == .unavailable && $0.header("Retry-After") != nil })
        let stored = Set(
            try cluster.sql("SELECT username FROM users", database: name).split(separator: "\n").map(
                String.init))
        let lost = Set(state.acknowledged).subtracting(stored)
        #expect(lost.isEmpty, "acknowledged but lost: \(lost.sorted())")
    }
}

/// One new database in the shared cluster, and `keybound serve` processes on it.
private final class SharedDatabase: Sendable {
    let cluster: PostgresCluster
    let name: String

    init() throws {
        cluster = try PostgresCluster.shared.get()
        name = try cluster.createDatabase()
    }

    /// Starts one more `keybound serve` on the database (the password through the environment).
    func serve() async throws -> ServeProcess {
        try await ServeProcess(
            arguments: ["--db", cluster.url(database: name), "--workers", "4"],
            environment: ["KEYBOUND_DB_PASSWORD": cluster.password])
    }

    /// Runs SQL on the database as the superuser (`psql -At`).
    func sql(_ statement: String) throws -> String { try cluster.sql(statement, database: name) }

    deinit { cluster.dropDatabase(name) }
}

/// Clients that keep creating accounts with fresh names, recording every reply and the names
/// that were acknowledged (201).
private actor AccountLoad {
    struct State: Sendable {
        var replies: [Reply] = []
        var acknowledged: [String] = []
    }

    private let client: Client
    private var state = State()
    private var running = true

    init(client: Client) { self.client = client }

    func run(workers: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask { try await self.work(worker) }
            }
            try await group.waitForAll()
        }
    }

    private func work(_ worker: Int) async throws {
        var index = 0
        while running {
            index += 1
            let username = "load-\(worker)-\(index)"
            let reply = try await client.send(
                API.createAccount,
                CreateAccountRequest(username: try Username(username), password: Client.password))
            state.replies.append(reply)
            if reply.status == 201 { state.acknowledged.append(username) }
            // While the database is down the answers come at once: do not spin.
            if reply.status == 503 { try await Task.sleep(nanoseconds: 20_000_000) }
        }
    }

    func snapshot() -> State { state }

    func stop() { running = false }

    /// Waits (at most a minute) until `condition` holds.
    func waitFor(_ what: String, _ condition: @Sendable (State) -> Bool) async throws {
        for _ in 0..<600 {
            if condition(state) { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw TestFailure("timed out waiting for \(what)")
    }
}

/// Runs a test only where PostgreSQL runs. Elsewhere each test is skipped without a word, and
/// the first one records one warning that says why: one visible line, not one per test.
struct PostgresRequirement: SuiteTrait, TestTrait, TestScoping {
    private static let warned = Locked(false)

    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !test.isSuite, case .failure(let error) = PostgresCluster.shared else {
            return try await function()
        }
        let first = Self.warned.withLock { warned in
            defer { warned = true }
            return !warned
        }
        if first {
            Issue.record(
                "PostgreSQL tests did not run, and the server suite ran on SQLite alone: \(error)",
                severity: .warning)
        }
        try Test.cancel()
    }
}
