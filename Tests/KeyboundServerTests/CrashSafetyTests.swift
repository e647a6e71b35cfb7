import CSQLite
import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// A small seeded generator (SplitMix64): a failing run is replayed from the seed it printed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What the clients of a crash run were told, and what they sent without learning the outcome.
/// A 2xx is a promise (docs/design.md, "Durability": "a 2xx means it is committed"); a request
/// cut off by the kill may or may not have happened, and only counts towards the upper bounds.
private struct Ledger {
    struct Session {
        let userID: String
        let method: String
        let deviceID: String?
    }
    struct UsedChallenge {
        let challengeID: String
        let signature: Data
    }
    struct Confirmed {
        let approvalID: String
        let username: String
        let signature: Data
    }
    var users: [String: String] = [:]  // username → user id
    var sessions: [String: Session] = [:]
    var loginsSent = 0
    var usedChallenges: [UsedChallenge] = []
    var rotatedRefreshTokens: [String] = []
    var devices: [String: String] = [:]  // device id → user id
    var bindsSent = 0
    var approvals: [String: String] = [:]  // approval id → user id
    var approvalsSent = 0
    var confirmed: [Confirmed] = []
    /// The webhook-ids the receiver verified once it was back, after the last kill.
    var receivedEvents: [String] = []

    /// Acknowledged writes: each a row (or a change of one) that must be there afterwards.
    var acknowledged: Int {
        users.count + sessions.count + rotatedRefreshTokens.count + devices.count + approvals.count
            + confirmed.count
    }
}

/// One simulated app: an account, its tokens and its device key, kept across server restarts.
private actor CrashClient {
    let username: String
    var random: SeededGenerator
    var signedUp = false
    var tokens: TokenResponse?
    var method = AuthMethod.password
    var device: (key: P256SigningKey, id: String)?

    init(username: String, seed: UInt64) {
        self.username = username
        random = SeededGenerator(seed: seed)
    }

    /// Runs operations until a request fails at the transport (the server was killed).
    func run(_ client: Client, _ ledger: Locked<Ledger>) async {
        do {
            while true { try await step(client, ledger) }
        } catch {
            // The outcome of the cut-off request is unknown: start over from a password login.
            tokens = nil
        }
    }

    private func step(_ client: Client, _ ledger: Locked<Ledger>) async throws {
        if !signedUp {
            let reply = try await client.send(
                API.createAccount,
                CreateAccountRequest(username: try Username(username), password: Client.password))
            if reply.status == 201 {
                let userID = try reply.decode(CreateAccountResponse.self).userID
                ledger.withLock { $0.users[username] = userID }
            }
            // 409: created by a request whose answer the kill cut off.
            #expect(reply.status == 201 || reply.status == 409, "\(reply.text)")
            signedUp = true
        }
        guard tokens != nil else { return try await passwordLogin(client, ledger) }
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3: try await refresh(client, ledger)
        case 3..<6: try await deviceLogin(client, ledger)
        case 6..<8: try await approve(client, ledger)
        case 8: try await bind(client, ledger)
        default: try await passwordLogin(client, ledger)
        }
    }

    private func passwordLogin(_ client: Client, _ ledger: Locked<Ledger>) async throws {
        ledger.withLock { $0.loginsSent += 1 }
        let reply = try await client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: try Username(username), password: Client.password, clientID: "app")
        )
        #expect(reply.status == 200, "\(reply.text)")
        let tokens = try reply.decode(TokenResponse.self)
        ledger.withLock {
            $0.sessions[tokens.sessionID] = .init(userID: tokens.userID, method: "password", deviceID: nil)
        }
        self.tokens = tokens
        method = .password
    }

    private func refresh(_ client: Client, _ ledger: Locked<Ledger>) async throws {
        guard let old = tokens else { return }
        tokens = nil  // unknown until answered
        let reply = try await client.send(
            API.refresh, RefreshRequest(refreshToken: old.refreshToken))
        #expect(reply.status == 200, "\(reply.text)")
        tokens = try reply.decode(TokenResponse.self)
        ledger.withLock { $0.rotatedRefreshTokens.append(old.refreshToken) }
    }

    private func bind(_ client: Client, _ ledger: Locked<Ledger>) async throws {
        // Binding needs a recent password login (step-up).
        if method != .password { try await passwordLogin(client, ledger) }
        guard let tokens else { return }
        let key = try P256SigningKey()
        device = nil  // the new key replaces the old one whether or not we learn the outcome
        ledger.withLock { $0.bindsSent += 1 }
        let reply = try await client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: key.publicKey.spkiDER, name: "Crash phone", keyProtection: .emulator),
            token: tokens.accessToken)
        #expect(reply.status == 201, "\(reply.text)")
        let deviceID = try reply.decode(BindDeviceResponse.self).deviceID
        ledger.withLock { $0.devices[deviceID] = tokens.userID }
        device = (key, deviceID)
    }

    private func deviceLogin(_ client: Client, _ ledger: Locked<Ledger>) async throws {
        guard let device else { return try await bind(client, ledger) }
        let challenge = try await client.challenge(device.id)
        let signature = try sign(challenge.payload, with: device.key)
        ledger.withLock { $0.loginsSent += 1 }
        tokens = nil
        let reply = try await client.deviceLogin(challengeID: challenge.challengeID, signature: signature)
        #expect(reply.status == 200, "\(reply.text)")
        let tokens = try reply.decode(TokenResponse.self)
        ledger.withLock {
            $0.sessions[tokens.sessionID] = .init(
                userID: tokens.userID, method: "device", deviceID: device.id)
            $0.usedChallenges.append(.init(challengeID: challenge.challengeID, signature: signature))
        }
        self.tokens = tokens
        method = .device
    }

    private func approve(_ client: Client, _ ledger: Locked<Ledger>) async throws {
        guard let device, let tokens else { return try await bind(client, ledger) }
        ledger.withLock { $0.approvalsSent += 1 }
        let created = try await client.send(
            API.createApproval, CreateApprovalRequest(deviceID: device.id, action: transfer()),
            token: tokens.accessToken)
        #expect(created.status == 201, "\(created.text)")
        let approval = try created.decode(ApprovalChallengeResponse.self)
        ledger.withLock { $0.approvals[approval.approvalID] = tokens.userID }
        let signature = try sign(approval.payload, with: device.key)
        let confirmed = try await client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [approval.approvalID],
            token: tokens.accessToken)
        #expect(confirmed.status == 200, "\(confirmed.text)")
        ledger.withLock {
            $0.confirmed.append(
                .init(approvalID: approval.approvalID, username: username, signature: signature))
        }
    }
}

/// What ``CrashSafetyTests`` reads a stopped server's database through: rows as text, and the
/// engine's own verdict on its files.
private protocol CheckedDatabase {
    /// Every row of `sql` (no parameters), each column as text or nil.
    func rows(_ sql: String) throws -> [[String?]]
    /// What the engine's integrity check found wrong with the stored data and indexes (empty
    /// when sound).
    func integrityProblems() throws -> [String]
    /// Rows whose foreign key names no row (empty when none).
    func foreignKeyProblems() throws -> [String]
}

extension CheckedDatabase {
    /// The integer in the first column of the first row, or -1.
    func count(_ sql: String) throws -> Int {
        let value = try rows(sql).first?.first ?? nil
        return value.flatMap { Int($0) } ?? -1
    }
}

/// A database file opened read-only with SQLite itself, after the server has stopped: nothing
/// of the server's (its writer, its migrations) touches what is checked.
private final class ReadOnlySQLite: CheckedDatabase {
    private let handle: OpaquePointer

    init(path: String) throws {
        var opened: OpaquePointer?
        guard sqlite3_open_v2(path, &opened, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let opened else {
            sqlite3_close_v2(opened)
            throw TestFailure("cannot open \(path) read-only")
        }
        handle = opened
    }

    deinit { sqlite3_close_v2(handle) }

    func rows(_ sql: String) throws -> [[String?]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw TestFailure("\(sql): \(String(cString: sqlite3_errmsg(handle)))")
        }
        defer { sqlite3_finalize(statement) }
        var rows: [[String?]] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return rows }
            guard status == SQLITE_ROW else {
                throw TestFailure("\(sql): \(String(cString: sqlite3_errmsg(handle)))")
            }
            rows.append(
                (0..<sqlite3_column_count(statement)).map { column in
                    sqlite3_column_text(statement, column).map { String(cString: $0) }
                })
        }
    }

    /// `PRAGMA integrity_check`: the pages, the records and every index against its table.
    func integrityProblems() throws -> [String] {
        let verdict = try rows("PRAGMA integrity_check")
        return verdict == [["ok"]] ? [] : verdict.map { $0.map { $0 ?? "" }.joined(separator: " ") }
    }

    /// `PRAGMA foreign_key_check` (SQLite checks foreign keys only where a connection asks it to).
    func foreignKeyProblems() throws -> [String] {
        try rows("PRAGMA foreign_key_check").map { $0.map { $0 ?? "NULL" }.joined(separator: " ") }
    }
}

/// A database of the test cluster, read over libpq as the cluster's superuser (on its Unix
/// socket) after the server has stopped: nothing of the server's (its pool, its session settings,
/// its role) touches what is checked, and amcheck, which needs the superuser, can run.
private final class SuperuserPostgres: CheckedDatabase {
    private let connection: PostgresConnection

    init(_ database: TestDatabase) throws {
        let cluster = try PostgresCluster.shared.get()
        guard let name = try PostgresURL(database.url).database else {
            throw TestFailure("no database in \(database.url)")
        }
        connection = try PostgresConnection(
            parameters: [
                ("host", cluster.folder.path), ("port", String(cluster.port)), ("user", "postgres"),
                ("dbname", name),
            ], responseTimeout: 120)
    }

    func rows(_ sql: String) throws -> [[String?]] {
        try connection.query(sql, []).map { row in
            row.values.map { value in
                switch value {
                case .null: nil
                case .integer(let number): String(number)
                case .text(let text): text
                }
            }
        }
    }

    /// amcheck: `verify_heapam` on every table of the schema (its rows are the corruption it
    /// found), and `bt_index_check` with `heapallindexed` on every btree index (each index's
    /// structure, and every heap tuple found in it; it raises an error on the first problem).
    func integrityProblems() throws -> [String] {
        try connection.execute("CREATE EXTENSION IF NOT EXISTS amcheck", [])
        var problems = try rows(
            """
            SELECT c.relname, v.blkno, v.offnum, v.msg FROM pg_class c
            CROSS JOIN LATERAL verify_heapam(c.oid) v
            WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
            """
        ).map { $0.map { $0 ?? "" }.joined(separator: " ") }
        let indexes = try rows(
            """
            SELECT c.oid, c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            JOIN pg_am a ON a.oid = c.relam
            WHERE a.amname = 'btree' AND c.relnamespace = 'public'::regnamespace
            """)
        guard !indexes.isEmpty else { throw TestFailure("no btree index to check") }
        for index in indexes {
            do {
                _ = try rows("SELECT bt_index_check(\(index[0] ?? "0"), true)")
            } catch {
                problems.append("\(index[1] ?? ""): \(error)")
            }
        }
        return problems
    }

    /// PostgreSQL enforces foreign keys on every write, but a trigger can be disabled: each
    /// single-column foreign key of the schema is checked by counting the rows it leaves orphaned.
    func foreignKeyProblems() throws -> [String] {
        let keys = try rows(
            """
            SELECT c.conrelid::regclass::text, quote_ident(a.attname), c.confrelid::regclass::text,
                quote_ident(f.attname), cardinality(c.conkey)
            FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
            JOIN pg_attribute f ON f.attrelid = c.confrelid AND f.attnum = c.confkey[1]
            WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
            """)
        guard !keys.isEmpty else { throw TestFailure("no foreign key to check") }
        return try keys.compactMap { key in
            let (table, column, parent, parentColumn) = (
                key[0] ?? "", key[1] ?? "", key[2] ?? "", key[3] ?? ""
            )
            guard key[4] == "1" else {
                return "\(table).\(column): a foreign key of \(key[4] ?? "?") columns"
            }
            let orphans = try count(
                """
                SELECT COUNT(*) FROM \(table) child WHERE child.\(column) IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM \(parent) p WHERE p.\(parentColumn) = child.\(column))
                """)
            return orphans == 0 ? nil : "\(table).\(column) → \(parent): \(orphans) orphans"
        }
    }
}

/// docs/design.md, "Durability": "a 2xx means it is committed: kill -9 at any instant loses
/// nothing that was acknowledged". `keybound serve` runs as a real process under load from many
/// clients and is killed with SIGKILL at random moments, then restarted on the same database.
///
/// Events too (docs/webhooks.md): a webhook endpoint takes every event type, and its receiver is
/// down through every kill. Afterwards each committed change has its event in the outbox and each
/// event its committed change (the same ids, once each), and once the receiver is back it gets
/// every event, verified by `standardwebhooks`.
@Suite("Crash safety", .serialized)
struct CrashSafetyTests {
    static let rounds = 8
    static let clients = 8

    /// The SQLite half (group commit, `synchronous=full`, the default).
    @Test func sigkillAtRandomMomentsLosesNoAcknowledgedWriteOnSQLite() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("crash.sqlite")
        let ledger = try await Self.drive(
            "sqlite", databaseURL: "sqlite:" + path, environment: [:], seed: Self.seed("sqlite"))
        try Self.check(ReadOnlySQLite(path: path), ledger)
    }

    /// The PostgreSQL half: the same clients and kills against `keybound serve` on a new database
    /// of the throwaway cluster (PostgreSQL keeps running; what dies is the server, mid-request
    /// and mid-transaction), then the same checks over a superuser connection, amcheck giving the
    /// engine's verdict. The cluster runs with `fsync=off`: that PostgreSQL's own commits survive
    /// a power loss is PostgreSQL's business; what is tested is that a 2xx follows a COMMIT.
    @Test(PostgresRequirement()) func sigkillAtRandomMomentsLosesNoAcknowledgedWriteOnPostgreSQL()
        async throws
    {
        let directory = try TemporaryDirectory()
        let database = try TestDatabase(.postgres, in: directory)
        let ledger = try await Self.drive(
            "postgres", databaseURL: database.url,
            environment: ["KEYBOUND_DB_PASSWORD": database.password ?? ""], seed: Self.seed("postgres"))
        try Self.check(SuperuserPostgres(database), ledger)
    }

    /// The PostgreSQL verdicts are not vacuous: amcheck runs (and finds a sound database sound),
    /// and a row whose foreign key names nothing, written with the foreign-key triggers off as
    /// only a superuser can, is found.
    @Test(PostgresRequirement()) func thePostgreSQLCheckFindsAnOrphanedRow() async throws {
        let live = try TestServer(engine: .postgres)
        try await live.client.createAccount("alice")
        _ = try await live.client.login("alice")
        live.server.stop()
        let database = try SuperuserPostgres(live.database)
        #expect(try database.integrityProblems() == [])
        #expect(try database.foreignKeyProblems() == [])
        _ = try database.rows("SET session_replication_role = replica")
        _ = try database.rows("UPDATE sessions SET user_id = 'usr_gone'")
        let problems = try database.foreignKeyProblems()
        #expect(problems.count == 1 && problems.first?.hasPrefix("sessions.user_id") == true, "\(problems)")
    }

    /// `KEYBOUND_CRASH_SEED`, else a random seed; printed, so that a failing run can be replayed.
    private static func seed(_ engine: String) -> UInt64 {
        let seed =
            ProcessInfo.processInfo.environment["KEYBOUND_CRASH_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("crash safety (\(engine)): seed \(seed) (KEYBOUND_CRASH_SEED=\(seed) replays the schedule)")
        return seed
    }

    /// Runs the clients against `keybound serve --db databaseURL`, kills it ``rounds`` times,
    /// then restarts it once more and replays what must stay refused; stops it with SIGTERM.
    private static func drive(
        _ engine: String, databaseURL: String, environment: [String: String], seed: UInt64
    ) async throws -> Ledger {
        let arguments = [
            "--db", databaseURL, "--server-id", "crash", "--signup-limit", "0", "--address-failure-limit",
            "0", "--allow-private-webhooks",
        ]
        // A receiver that is down until every kill is over.
        var operatorSettings = Configuration()
        operatorSettings.databaseURL = databaseURL
        operatorSettings.databasePassword = environment["KEYBOUND_DB_PASSWORD"]
        operatorSettings.allowPrivateWebhooks = true
        operatorSettings.log = .discard
        let webhooks = try WebhookAdministration(configuration: operatorSettings)
        let receiverPort = try WebhookReceiver.freePort()
        let endpoint = try webhooks.add(
            url: WebhookReceiver.url(receiverPort), events: WebhookEventType.known.map(\.rawValue))
        var random = SeededGenerator(seed: seed)
        let ledger = Locked(Ledger())
        let apps = (0..<clients).map { CrashClient(username: "user\($0)", seed: seed &+ UInt64($0) &+ 1) }
        for round in 1...rounds {
            let server = try await ServeProcess(arguments: arguments, environment: environment)
            let before = ledger.withLock { $0.acknowledged }
            // The kill lands after some progress (so that every round writes) plus a random delay.
            let progress = Int.random(in: 10...50, using: &random)
            let delay = UInt64.random(in: 0...500_000_000, using: &random)
            let client = server.client
            await withTaskGroup(of: Void.self) { group in
                for app in apps { group.addTask { await app.run(client, ledger) } }
                // Bounded: 20 s at most waiting for progress.
                for _ in 0..<2000 where ledger.withLock({ $0.acknowledged }) < before + progress {
                    try? await Task.sleep(nanoseconds: 10_000_000)
                }
                try? await Task.sleep(nanoseconds: delay)
                #expect(server.kill(SIGKILL) == SIGKILL)
                await group.waitForAll()
            }
            print(
                "crash safety (\(engine)): round \(round) killed after \(ledger.withLock { $0.acknowledged } - before) acknowledged writes"
            )
        }

        // Restarted once more: what was used stays used, what was rotated stays dead.
        let server = try await ServeProcess(arguments: arguments, environment: environment)
        let client = server.client
        let state = ledger.withLock { $0 }
        for used in state.usedChallenges {
            let replay = try await client.deviceLogin(
                challengeID: used.challengeID, signature: used.signature)
            // 410 once the challenge's 60 s are over, which a slow run can reach.
            #expect(replay.status == 409 || replay.status == 410, "\(replay.text)")
        }
        var managers: [String: String] = [:]
        for confirmed in state.confirmed {
            if managers[confirmed.username] == nil {
                managers[confirmed.username] = try await client.login(confirmed.username, clientID: "check")
                    .accessToken
            }
            let replay = try await client.send(
                API.confirmApproval,
                ConfirmApprovalRequest(signature: confirmed.signature), parameters: [confirmed.approvalID],
                token: managers[confirmed.username])
            #expect(replay.status == 409 && replay.problem?.code == .challengeUsed, "\(replay.text)")
        }
        for token in state.rotatedRefreshTokens {
            let replay = try await client.send(API.refresh, RefreshRequest(refreshToken: token))
            #expect(replay.status == 401, "\(replay.text)")
        }
        // The receiver is back: what was retried while it was down is sent at once (`keybound
        // webhook retry`, instead of waiting out the backoff), the rest as it comes due.
        let receiver = try await WebhookReceiver(port: receiverPort, secret: endpoint.secret ?? "")
        for delivery in try webhooks.deliveries(url: endpoint.url, limit: 100_000)
        where delivery.status != "delivered" {
            try webhooks.retry(deliveryID: delivery.id)
        }
        var pending: [WebhookDeliveryInfo] = []
        for _ in 0..<600 {
            pending = try webhooks.deliveries(url: endpoint.url, limit: 100_000).filter {
                $0.status != "delivered"
            }
            if pending.isEmpty { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(pending.isEmpty, "not delivered after the receiver came back: \(pending)")
        let received = try receiver.deliveries()
        #expect(received.allSatisfy { $0.verified && $0.status == 200 })
        receiver.stop()
        #expect(server.kill(SIGTERM) == 0)
        ledger.withLock {
            $0.loginsSent += managers.count
            $0.receivedEvents = received.map(\.id)
        }
        print(
            "crash safety (\(engine)): \(rounds) kills, \(state.acknowledged) acknowledged writes verified "
                + "(\(state.sessions.count) logins, \(state.rotatedRefreshTokens.count) refreshes, "
                + "\(state.devices.count) bindings, \(state.approvals.count) approvals, "
                + "\(state.confirmed.count) confirmations); replayed \(state.usedChallenges.count) challenges, "
                + "\(state.confirmed.count) approvals, \(state.rotatedRefreshTokens.count) refresh tokens")
        return ledger.withLock { $0 }
    }

    /// Every acknowledged change is there, nothing is there twice, and the file is sound.
    private static func check(_ database: some CheckedDatabase, _ ledger: Ledger) throws {
        #expect(try database.integrityProblems() == [])
        #expect(try database.foreignKeyProblems() == [])

        let users = Dictionary(
            try database.rows("SELECT username, id FROM users").map { ($0[0] ?? "", $0[1] ?? "") },
            uniquingKeysWith: { first, _ in first })
        for (username, userID) in ledger.users { #expect(users[username] == userID, "\(username)") }
        #expect(users.count == clients)

        let sessions = try database.rows("SELECT id, user_id, auth_method, device_id FROM sessions")
        let byID = Dictionary(sessions.map { ($0[0] ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        for (id, expected) in ledger.sessions {
            let row = byID[id]
            #expect(
                row?[1] == expected.userID && row?[2] == expected.method && row?[3] == expected.deviceID,
                "\(id)")
        }
        // No login made two sessions: at most one per login sent, and one login event per session.
        #expect(sessions.count >= ledger.sessions.count && sessions.count <= ledger.loginsSent)
        #expect(
            try database.count("SELECT COUNT(*) FROM audit_events WHERE type = 'login'") == sessions.count)

        // Each device session used exactly one challenge, and every acknowledged one is recorded.
        let used = Set(try database.rows("SELECT id FROM used_challenges").compactMap { $0[0] })
        #expect(ledger.usedChallenges.allSatisfy { used.contains($0.challengeID) })
        #expect(used.count == sessions.filter { $0[2] == "device" }.count)

        // A rotated refresh token is used for good; a session holds one live refresh token at most.
        let usedRefresh = Set(
            try database.rows("SELECT hash FROM tokens WHERE kind = 'refresh' AND used_at IS NOT NULL")
                .compactMap { $0[0] })
        #expect(ledger.rotatedRefreshTokens.allSatisfy { usedRefresh.contains(TokenHash.of($0)) })
        #expect(
            try database.rows(
                "SELECT session_id FROM tokens WHERE kind = 'refresh' AND used_at IS NULL GROUP BY session_id HAVING COUNT(*) > 1"
            ).isEmpty)

        let devices = try database.rows("SELECT id, user_id FROM devices")
        let deviceOwners = Dictionary(
            devices.map { ($0[0] ?? "", $0[1] ?? "") }, uniquingKeysWith: { first, _ in first })
        for (id, userID) in ledger.devices { #expect(deviceOwners[id] == userID, "\(id)") }
        #expect(devices.count >= ledger.devices.count && devices.count <= ledger.bindsSent)
        // One client per user: a new key replaced the old one, never beside it.
        #expect(
            try database.rows(
                "SELECT user_id FROM devices WHERE revoked_at IS NULL GROUP BY user_id HAVING COUNT(*) > 1"
            ).isEmpty)

        let approvals = try database.rows("SELECT id, user_id, status FROM approvals")
        let approvalRows = Dictionary(
            approvals.map { ($0[0] ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        for (id, userID) in ledger.approvals { #expect(approvalRows[id]?[1] == userID, "\(id)") }
        for confirmed in ledger.confirmed { #expect(approvalRows[confirmed.approvalID]?[2] == "approved") }
        #expect(approvals.count >= ledger.approvals.count && approvals.count <= ledger.approvalsSent)
        // One decision per approval, one audit event per decision.
        #expect(
            try database.count("SELECT COUNT(*) FROM audit_events WHERE type = 'approval_confirmed'")
                == approvals.filter { $0[2] == "approved" }.count)

        try checkEvents(database, ledger)
    }

    /// The outbox holds one event per committed change, and none for a change that is not
    /// there; the receiver, once back, got every one of them.
    private static func checkEvents(_ database: some CheckedDatabase, _ ledger: Ledger) throws {
        let messages = try database.rows("SELECT id, type, body FROM webhook_messages")
        func ids(_ type: WebhookEventType, _ member: String, status: String? = nil) throws -> [String] {
            try messages.filter { $0[1] == type.rawValue }.compactMap { row in
                let body = try JSON.parse(Data((row[2] ?? "").utf8))
                let data = OpenAPISpec.member(body, "data") ?? .null
                if let status, OpenAPISpec.string(OpenAPISpec.member(data, "status")) != status { return nil }
                return OpenAPISpec.string(OpenAPISpec.member(data, member))
            }
        }
        func column(_ sql: String) throws -> [String] { try database.rows(sql).compactMap { $0[0] } }
        let expectations: [(String, [String], [String])] = [
            ("account.created", try ids(.accountCreated, "user_id"), try column("SELECT id FROM users")),
            ("device.bound", try ids(.deviceBound, "device_id"), try column("SELECT id FROM devices")),
            (
                "device.revoked", try ids(.deviceRevoked, "device_id"),
                try column("SELECT id FROM devices WHERE revoked_at IS NOT NULL")
            ),
            (
                "approval.requested", try ids(.approvalRequested, "approval_id"),
                try column("SELECT id FROM approvals")
            ),
            (
                "approval.decided approved", try ids(.approvalDecided, "approval_id", status: "approved"),
                try column("SELECT id FROM approvals WHERE status = 'approved'")
            ),
            (
                "approval.decided failed", try ids(.approvalDecided, "approval_id", status: "failed"),
                try column("SELECT id FROM approvals WHERE status = 'failed'")
            ),
            (
                "session.revoked", try ids(.sessionRevoked, "session_id"),
                try column("SELECT id FROM sessions WHERE revoked_at IS NOT NULL")
            ),
        ]
        for (name, events, changes) in expectations {
            #expect(
                events.sorted() == changes.sorted(),
                "\(name): \(events.count) events, \(changes.count) changes")
        }
        #expect(!messages.isEmpty)
        let received = Set(ledger.receivedEvents)
        let written = Set(messages.compactMap { $0[0] })
        #expect(
            written.subtracting(received).isEmpty,
            "\(written.subtracting(received).count) events not received")
        #expect(received.subtracting(written).isEmpty)
        print(
            "crash safety: \(messages.count) events checked against the committed changes and what the receiver got"
        )
    }
}
