import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The SQLite write path (docs/design.md, "Storage and the write path"): one writer, group commit.
@Suite("Group commit")
struct GroupCommitTests {
    private struct Refused: Error {}

    @Test func failingRequestsRollBackAloneWhileTheirGroupCommits() throws {
        let directory = try TemporaryDirectory()
        let database = try SQLiteDatabase(
            path: directory.path("group.sqlite"), readers: 2, synchronous: .full)
        try database.write { try $0.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", []) }
        let held = HeldWriter(database)
        let before = database.writerQueue.groupsCommitted
        // Every third request writes two rows and then fails: both must vanish, and only they.
        let (group, outcomes) = queueWrites(9, on: database) { index, connection in
            try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
            if index % 3 == 1 {
                try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("extra\(index)")])
                throw Refused()
            }
        }
        held.letGo()
        group.wait()
        let expected = (0..<9).filter { $0 % 3 != 1 }
        #expect(
            outcomes.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<9).map { ($0, $0 % 3 != 1) }))
        let names = try database.read { try $0.query("SELECT name FROM items ORDER BY name", []) }
            .map { try $0.text(0) }
        #expect(names == expected.map { "item\($0)" })
        // The held write's group and the nine's group: two COMMITs in all.
        #expect(database.writerQueue.groupsCommitted == before + 2)
    }

    @Test func aFailedCommitFailsEveryRequestOfItsGroup() throws {
        let directory = try TemporaryDirectory()
        let database = try SQLiteDatabase(
            path: directory.path("group.sqlite"), readers: 2, synchronous: .full)
        try database.write { connection in
            try connection.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", [])
            try connection.execute("CREATE TABLE parents (id TEXT PRIMARY KEY)", [])
            // Checked at COMMIT only: a dangling child makes the COMMIT itself fail.
            try connection.execute(
                "CREATE TABLE children (parent TEXT REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)",
                [])
        }
        let held = HeldWriter(database)
        let (group, outcomes) = queueWrites(5, on: database) { index, connection in
            if index == 2 {
                try connection.execute("INSERT INTO children (parent) VALUES ('nobody')", [])
            } else {
                try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
            }
        }
        held.letGo()
        group.wait()
        #expect(outcomes.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<5).map { ($0, false) }))
        #expect(try database.read { try $0.queryOne("SELECT COUNT(*) FROM items", [])?.integer(0) } == 0)
        // The writer goes on with the next group.
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('after')", []) }
        #expect(try database.read { try $0.queryOne("SELECT COUNT(*) FROM items", [])?.integer(0) } == 1)
    }

    /// A database whose writer checkpoints from 64 frames, with a table of rows that fill a page
    /// each: every write adds two or three frames (its leaf, the table's root).
    private struct SmallWAL {
        let directory: TemporaryDirectory
        let database: SQLiteDatabase
        /// What a WAL frame takes in the file: a 24-byte header and the page.
        static let frameBytes = 24 + 4096
        /// The threshold and one write's frames past it, plus the file's 32-byte header.
        static let boundBytes = 32 + (64 + 8) * frameBytes

        init() throws {
            directory = try TemporaryDirectory()
            database = try SQLiteDatabase(
                path: directory.path("wal.sqlite"), readers: 2, synchronous: .normal, checkpointFrames: 64)
            try database.write {
                try $0.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", [])
            }
        }

        /// One write per row, 3000 bytes each.
        func insert(_ ids: Range<Int>) throws {
            for id in ids {
                try database.write {
                    try $0.execute(
                        "INSERT INTO items (id, body) VALUES (?, ?)",
                        [.integer(Int64(id)), .text(String(repeating: "x", count: 3000))])
                }
            }
        }

        /// The WAL file's size. It is not truncated when the WAL starts over, so this is the
        /// largest extent the WAL has had.
        func walBytes() throws -> Int {
            try #require(
                try FileManager.default.attributesOfItem(atPath: directory.path("wal.sqlite") + "-wal")[.size]
                    as? Int)
        }

        static func count(_ connection: any SQLConnection) throws -> Int64? {
            try connection.queryOne("SELECT COUNT(*) FROM items", [])?.integer(0)
        }
    }

    @Test func theWriterCheckpointsSoTheWALStaysSmall() throws {
        let wal = try SmallWAL()
        // 400 writes, about a thousand frames. SQLite's own checkpoint is off on the writer's
        // connection, so only the writer's checkpoints keep the file small.
        try wal.insert(0..<400)
        #expect(try wal.walBytes() <= SmallWAL.boundBytes)
        // Every row is there, read back after the checkpoints moved them into the database file.
        let rows = try wal.database.read {
            try $0.queryOne("SELECT COUNT(*), SUM(LENGTH(body)) FROM items", [])
        }
        #expect(try rows?.integer(0) == 400)
        #expect(try rows?.integer(1) == 400 * 3000)
    }

    /// A passive checkpoint cannot copy the frames a reader's snapshot still needs, so the WAL
    /// grows while a read lasts; the writer must try again after later groups, and the WAL must
    /// start over once the reader is gone.
    @Test func aLongReadHoldsTheWALOnlyWhileItLasts() throws {
        let wal = try SmallWAL()
        try wal.insert(0..<50)
        let (before, after) = try wal.database.read { connection in
            let before = try SmallWAL.count(connection)
            try wal.insert(50..<250)
            return (before, try SmallWAL.count(connection))
        }
        // The reader saw one snapshot throughout, and the WAL kept the frames written meanwhile.
        #expect(before == 50 && after == 50)
        let held = try wal.walBytes()
        #expect(held > SmallWAL.boundBytes)
        // Reader gone: the checkpoint after the next write copies everything and the WAL starts
        // over at its beginning, so a thousand more frames fit in the extent it already has,
        // and that one write's frames.
        try wal.insert(250..<650)
        #expect(try wal.walBytes() <= held + 8 * SmallWAL.frameBytes)
        #expect(try wal.database.read { try SmallWAL.count($0) } == 650)
    }

    /// Releasing the database closes every connection before it returns, the writer's too: the
    /// last close checkpoints the WAL and removes it, so the file is whole and can be copied or
    /// deleted at once (a test's folder, an operator's backup after a stop).
    @Test func releasingTheDatabaseClosesItsFilesBeforeItReturns() throws {
        let directory = try TemporaryDirectory()
        for round in 0..<20 {
            let path = directory.path("closed\(round).sqlite")
            do {
                let database = try SQLiteDatabase(path: path, readers: 2, synchronous: .normal)
                try database.write { try $0.execute("CREATE TABLE t (x INTEGER)", []) }
                try database.write { try $0.execute("INSERT INTO t VALUES (1)", []) }
                #expect(try database.read { try $0.queryOne("SELECT COUNT(*) FROM t", [])?.integer(0) } == 1)
                #expect(FileManager.default.fileExists(atPath: path + "-wal"))
            }
            #expect(
                !FileManager.default.fileExists(atPath: path + "-wal"),
                "round \(round): the WAL is still there")
        }
    }

    /// The writer closes its connection before `stop()` returns, not whenever its thread lets go
    /// of it. (The test above shows what that is for, but a late close usually still wins the
    /// race there; this one does not depend on timing: the test holds the connection too.)
    @Test func stoppingTheWriterClosesItsConnection() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection(
            path: directory.path("writer.sqlite"), busyTimeoutMilliseconds: 1000, synchronous: .normal)
        let writer = SQLiteWriter(connection: connection, checkpointFrames: 4000)
        #expect(!connection.isClosed)
        writer.stop()
        #expect(connection.isClosed)
    }

    @Test func aWriteInsideAWriteFailsInsteadOfWaitingForItself() throws {
        let directory = try TemporaryDirectory()
        let database = try SQLiteDatabase(
            path: directory.path("group.sqlite"), readers: 2, synchronous: .normal)
        #expect(throws: DatabaseError.self) {
            try database.write { _ in try database.write { _ in } }
        }
    }
}

@Suite("Login challenges")
struct LoginChallengeTests {
    /// The rows of every table.
    private static func rowCounts(_ app: InProcessApplication) throws -> [String: Int64] {
        let tables = try app.rows(
            app.database.engine == .sqlite
                ? "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                : "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    + "ORDER BY table_name")
        var counts: [String: Int64] = [:]
        for case .text(let table) in tables.map({ $0[0] }) {
            counts[table] = try app.count("SELECT COUNT(*) FROM \"\(table)\"")
        }
        return counts
    }

    /// The id with its decoded bytes changed by `change`.
    private static func forge(_ id: String, _ change: (inout [UInt8]) -> Void) throws -> String {
        var bytes = [UInt8](try #require(Base64URL.decode(String(id.dropFirst(4)))))
        change(&bytes)
        return "chl_" + Base64URL.encode(Data(bytes))
    }

    @Test(arguments: Engine.all) func issuingChallengesWritesNothing(engine: Engine) throws {
        let app = try InProcessApplication(engine)
        let (_, deviceID) = try app.userWithDevice("alice")
        let before = try Self.rowCounts(app)
        for _ in 0..<20 { _ = try app.challenge(deviceID) }
        #expect(try Self.rowCounts(app) == before)
    }

    @Test(arguments: Engine.all) func forgedChallengesAreUnknownAndWriteNothing(engine: Engine) throws {
        let app = try InProcessApplication(engine)
        let (key, deviceID) = try app.userWithDevice("alice")
        let (otherKey, otherDevice) = try app.userWithDevice("bob")
        let challenge = try app.challenge(deviceID)
        let before = try Self.rowCounts(app)
        let forgeries = [
            // The tag changed.
            try Self.forge(challenge.challengeID) { $0[30] ^= 1 },
            // A later expiry.
            try Self.forge(challenge.challengeID) { $0[8] &+= 60 },
            // Another device: the payload would name bob's device, which bob's key can sign.
            try Self.forge(challenge.challengeID) { $0 = Array($0.prefix(57)) + Array(otherDevice.utf8) },
        ]
        for forged in forgeries {
            let payload = try SigningPayload(parsing: challenge.payload)
            for (signer, device) in [(key, deviceID), (otherKey, otherDevice)] {
                let bytes = try SigningPayload(
                    purpose: .login, server: payload.server, device: device, challenge: payload.challenge,
                    expires: payload.expires, action: nil
                ).bytes
                let reply = app.deviceLogin(forged, try sign(bytes, with: signer), from: "127.0.0.1")
                #expect(reply.status == 404, "\(forged)")
            }
        }
        // A challenge from another database (another key) is unknown here too.
        let elsewhere = try InProcessApplication(engine)
        let (_, foreignDevice) = try elsewhere.userWithDevice("alice")
        let foreign = try elsewhere.challenge(foreignDevice)
        #expect(app.deviceLogin(foreign.challengeID, Data([1]), from: "127.0.0.1").status == 404)
        #expect(try Self.rowCounts(app) == before)
        // The real one still works, once.
        let signature = try sign(challenge.payload, with: key)
        #expect(app.deviceLogin(challenge.challengeID, signature, from: "127.0.0.1").status == 200)
        #expect(app.deviceLogin(challenge.challengeID, signature, from: "127.0.0.1").status == 409)
    }

    @Test(arguments: Engine.all) func aChallengeForOneDeviceIsRefusedForAnother(engine: Engine) throws {
        let app = try InProcessApplication(engine)
        let (_, aliceDevice) = try app.userWithDevice("alice")
        let (bobKey, _) = try app.userWithDevice("bob")
        let challenge = try app.challenge(aliceDevice)
        let reply = app.deviceLogin(
            challenge.challengeID, try sign(challenge.payload, with: bobKey), from: "127.0.0.1")
        #expect(reply.status == 401)
        #expect(try app.count("SELECT COUNT(*) FROM sessions WHERE auth_method = 'device'") == 0)
    }

    @Test(arguments: Engine.all) func anExpiredChallengeIsRefusedAndItsUseIsPurgedAnHourLater(engine: Engine)
        throws
    {
        let app = try InProcessApplication(engine)
        let (key, deviceID) = try app.userWithDevice("alice")
        let used = try app.challenge(deviceID)
        #expect(
            app.deviceLogin(used.challengeID, try sign(used.payload, with: key), from: "127.0.0.1").status
                == 200)
        let unused = try app.challenge(deviceID)
        app.clock.advance(by: 60)
        let late = app.deviceLogin(unused.challengeID, try sign(unused.payload, with: key), from: "127.0.0.1")
        #expect(late.status == 410)
        #expect(try app.count("SELECT COUNT(*) FROM used_challenges") == 1)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM used_challenges") == 1)
        app.clock.advance(by: 3601)
        app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM used_challenges") == 0)
        // Purged, the used challenge is still refused: it has expired.
        #expect(
            app.deviceLogin(used.challengeID, try sign(used.payload, with: key), from: "127.0.0.1").status
                == 410)
    }
}

@Suite("No idle worker")
struct NoIdleWorkerTests {
    /// A database whose next write waits, on the thread that runs the request, until released:
    /// a request stuck waiting for its commit.
    private final class HeldWrites: DatabaseWrapper {
        let base: any Database
        private let holding = Locked(false)
        /// Whether a write is waiting right now.
        let waiting = Locked(false)

        init(_ base: any Database) { self.base = base }

        func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
            if holding.withLock({ $0 }) {
                waiting.withLock { $0 = true }
                // Every write that arrives while holding waits (the server's own housekeeping may
                // write too, so one signal for one waiter would leave the sign-up held). Bounded:
                // after 120 s the write goes ahead anyway (and the test fails).
                let deadline = Date().addingTimeInterval(120)
                while holding.withLock({ $0 }), Date() < deadline { usleep(1000) }
                waiting.withLock { $0 = false }
            }
            return try base.write(body)
        }

        func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }

        var readsInProcess: Bool { base.readsInProcess }

        func startHolding() { holding.withLock { $0 = true } }

        func stopHolding() { holding.withLock { $0 = false } }
    }

    /// One HTTP thread: if a waiting request held it, nothing else could be answered. With one
    /// handler thread too, the waiting sign-up holds that one: `/healthz` is then answered only
    /// because a request that only reads (on SQLite) is answered on the HTTP thread itself.
    @Test(arguments: [64, 1])
    func aRequestWaitingForItsCommitDoesNotHoldUpOtherConnections(handlerThreads: Int) async throws {
        let directory = try TemporaryDirectory()
        var configuration = Configuration.testing(databasePath: directory.path("keybound.sqlite"))
        configuration.workerThreads = 1
        configuration.handlerThreads = handlerThreads
        let database = HeldWrites(
            try openDatabase(url: configuration.databaseURL, connections: 2, synchronous: .normal))
        let server = try Server(configuration: configuration, database: database)
        try server.start()
        defer { server.stop(gracePeriod: 1) }
        let port = UInt16(try #require(server.baseURL?.port))

        // Plain sockets on Dispatch threads, not URLSession on the test's task: other suites can
        // keep the few threads that run every test's tasks busy for long, and a held request
        // must not time out in the client meanwhile.
        let (waited, healthz, signUp) = try await offThePool { () throws -> (Bool, Int?, Int?) in
            database.startHolding()
            let body = CreateAccountRequest(username: "alice", password: Client.password).jsonData
            let signUpConnection = try RawConnection(port: port)
            signUpConnection.send(
                "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.count)\r\n\r\n")
            _ = signUpConnection.send(body)
            // The sign-up is at its write, and stays there… (bounded to 120 s)
            for _ in 0..<12000 where !database.waiting.withLock({ $0 }) { usleep(10_000) }
            let waited = database.waiting.withLock { $0 }
            // …while another connection is served.
            let healthz = try RawConnection(port: port)
            healthz.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let healthzStatus = healthz.response()?.status
            let stillWaiting = database.waiting.withLock { $0 }
            database.stopHolding()
            // Its answer follows (each read waits at most 10 s; a loaded machine may need more).
            var signUpStatus: Int?
            for _ in 0..<12 where signUpStatus == nil { signUpStatus = signUpConnection.response()?.status }
            return (waited && stillWaiting, healthzStatus, signUpStatus)
        }
        #expect(waited)
        #expect(healthz == 200)
        #expect(signUp == 201)
    }
}

@Suite("Bearer header")
struct BearerHeaderTests {
    @Test func schemeInAnyCaseThenSpacesThenTheTokenIsAcceptedAndNothingElse() throws {
        let app = try InProcessApplication()
        try app.createAccount("alice")
        let token = try TokenResponse(jsonData: app.login("alice", Client.password).body).accessToken
        func me(_ authorization: String) -> Int {
            app.application.handle(
                HTTPRequest(
                    method: API.me.method.rawValue, path: API.me.path(),
                    headers: ["Authorization": authorization])
            ).status
        }
        for accepted in ["Bearer \(token)", "bearer \(token)", "BEARER  \(token)", "Bearer \(token) \t"] {
            #expect(me(accepted) == 200, "\(accepted)")
        }
        for refused in [
            "Bearer\(token)", "Bearer\t\(token)", "Basic \(token)", "Bearer", "Bearer ", "Bearers \(token)",
            "Bearer \(token)x",
            "Bearer x\(token)", "Bearer \(token.prefix(10))", "Bearer \(String(repeating: "a", count: 129))",
        ] {
            #expect(me(refused) == 401, "\(refused)")
        }
    }
}
