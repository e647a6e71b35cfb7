import Foundation
import KeyboundTestSupport
import Testing

@testable import KeyboundServer

/// PostgreSQL's write path (``PostgresWriter``): concurrent writes share one transaction, a
/// savepoint each, and one COMMIT; a serialization failure runs the group again.
@Suite("PostgreSQL group commit", PostgresRequirement())
struct PostgresGroupCommitTests {
    private struct Refused: Error {}

    /// A new database of the shared cluster, and storage on it with one writer (so that the
    /// writes a test queues behind a held one form exactly one group).
    private func storage(writers: Int = 1, timeout: Int = 5) throws -> (PostgresDatabase, TestDatabase) {
        let database = try TestDatabase(.postgres, in: try TemporaryDirectory())
        var limits = PostgresDatabase.Limits(timeout: timeout)
        limits.writers = writers
        let storage = try PostgresDatabase(
            url: PostgresURL(database.url), password: database.password, maximumConnections: 4, limits: limits
        )
        try storage.createGroupLockTable()
        return (storage, database)
    }

    /// ``storage(writers:timeout:)`` with the tables of a write-skew race (`pair`, rows 1 and 2 at
    /// 0; `items`), and another storage on the same database whose transactions run outside the
    /// writers (another server's, or a rolling upgrade's older instance).
    private func writeSkewStorage(writers: Int = 1) throws -> (
        PostgresDatabase, TestDatabase, PostgresDatabase
    ) {
        let (database, keep) = try storage(writers: writers)
        let other = try PostgresDatabase(
            url: PostgresURL(keep.url), password: keep.password, maximumConnections: 1)
        try database.write { connection in
            try connection.execute("CREATE TABLE pair (id BIGINT PRIMARY KEY, value BIGINT NOT NULL)", [])
            try connection.execute("INSERT INTO pair (id, value) VALUES (1, 0), (2, 0)", [])
            try connection.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", [])
        }
        return (database, keep, other)
    }

    private static func names(_ database: PostgresDatabase) throws -> [String] {
        try database.read { try $0.query("SELECT name FROM items ORDER BY name", []) }.map { try $0.text(0) }
    }

    @Test func eachFailingRequestRollsBackAloneWhileItsGroupCommits() throws {
        let (database, keep) = try storage()
        defer { withExtendedLifetime(keep) {} }
        try database.write { try $0.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", []) }
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('taken')", []) }
        let held = HeldWriter(database)
        let before = database.writerQueue.groupsCommitted
        // Each failing request writes a row first; it must vanish, and only it. Request 1 throws
        // an error of its own; 4's statement fails (PostgreSQL aborts the transaction, and the
        // savepoint brings it back); 7's deferred statement fails, which is found at its end.
        let (group, outcomes) = queueWrites(9, on: database) { index, connection in
            try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
            switch index {
            case 1: throw Refused()
            case 4: try connection.execute("INSERT INTO items (name) VALUES ('taken')", [])
            case 7: try connection.executeLater("INSERT INTO items (name) VALUES ('taken')", [])
            default:
                try connection.executeLater("INSERT INTO items (name) VALUES (?)", [.text("later\(index)")])
            }
        }
        held.letGo()
        group.wait()
        let failing: Set = [1, 4, 7]
        #expect(
            outcomes.withLock { $0 }
                == Dictionary(uniqueKeysWithValues: (0..<9).map { ($0, !failing.contains($0)) }))
        let kept = (0..<9).filter { !failing.contains($0) }
        #expect(
            try Self.names(database)
                == (kept.map { "item\($0)" } + kept.map { "later\($0)" } + ["taken"]).sorted())
        // The held write's group and the nine's group: two COMMITs in all.
        #expect(database.writerQueue.groupsCommitted == before + 2)
    }

    @Test func aSerializationFailureRunsTheGroupAgainAndEveryRequestLandsOnce() throws {
        let (database, keep, other) = try writeSkewStorage()
        defer { withExtendedLifetime(keep) {} }
        let held = HeldWriter(database)
        let runs = Locked(0)
        let readDone = DispatchSemaphore(value: 0)
        let otherCommitted = DispatchSemaphore(value: 0)
        // Request 0 reads row 2 and, on its first run, waits until the other transaction has read
        // row 1 and written row 2; then it writes row 1: write skew, which SERIALIZABLE refuses,
        // here to the group (the other committed first). Requests 1–5 only insert a row each.
        let (group, outcomes) = queueWrites(6, on: database) { index, connection in
            if index == 0 {
                let run = runs.withLock { runs in
                    runs += 1
                    return runs
                }
                let seen =
                    try connection.queryOne("SELECT value FROM pair WHERE id = 2", [])?.integer(0) ?? -1
                if run == 1 {
                    readDone.signal()
                    otherCommitted.wait()
                }
                try connection.execute("UPDATE pair SET value = ? WHERE id = 1", [.integer(seen + 10)])
            }
            try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
        }
        held.letGo()
        readDone.wait()
        try other.queueWrite { connection in
            try connection.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", [])
            let seen = try connection.queryOne("SELECT value FROM pair WHERE id = 1", [])?.integer(0) ?? -1
            try connection.execute("UPDATE pair SET value = ? WHERE id = 2", [.integer(seen + 100)])
        }
        otherCommitted.signal()
        group.wait()
        #expect(outcomes.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<6).map { ($0, true) }))
        #expect(runs.withLock { $0 } == 2)
        // Every request took effect once; the rerun of request 0 saw the other's write.
        #expect(try Self.names(database) == (0..<6).map { "item\($0)" })
        let pair = try database.read { try $0.query("SELECT value FROM pair ORDER BY id", []) }
            .map { try $0.integer(0) }
        #expect(pair == [110, 100])
    }

    @Test func aGroupThatWaitedForTheLockSeesThePreviousGroupAndDoesNotConflictWithIt() throws {
        let (database, keep, observer) = try writeSkewStorage(writers: 2)
        defer { withExtendedLifetime(keep) {} }
        // The first group reads row 2 and writes row 1, then waits, holding the lock.
        let wrote = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let first = DispatchGroup()
        first.enter()
        Thread {
            _ = try? database.write { connection in
                let seen =
                    try connection.queryOne("SELECT value FROM pair WHERE id = 2", [])?.integer(0) ?? -1
                try connection.execute("UPDATE pair SET value = ? WHERE id = 1", [.integer(seen + 1)])
                wrote.signal()
                release.wait()
            }
            first.leave()
        }.start()
        wrote.wait()
        // The second reads row 1 and writes row 2 (write skew, were they concurrent); it waits
        // for the lock on the other writer.
        let runs = Locked(0)
        let outcome = Locked<Int64?>(nil)
        let second = DispatchGroup()
        second.enter()
        Thread {
            let value = try? database.write { connection -> Int64 in
                runs.withLock { $0 += 1 }
                let seen =
                    try connection.queryOne("SELECT value FROM pair WHERE id = 1", [])?.integer(0) ?? -1
                try connection.execute("UPDATE pair SET value = ? WHERE id = 2", [.integer(seen + 10)])
                return seen
            }
            outcome.withLock { $0 = value }
            second.leave()
        }.start()
        // Bounded: until PostgreSQL shows the second group waiting for the lock (10 s at most).
        var waiting: Int64 = 0
        for _ in 0..<1000 where waiting == 0 {
            usleep(10_000)
            waiting =
                try observer.read {
                    // This database's only: other tests share the cluster.
                    try $0.queryOne(
                        "SELECT COUNT(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation' "
                            + "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                        [])?
                        .integer(0)
                } ?? 0
        }
        #expect(waiting == 1)
        release.signal()
        first.wait()
        second.wait()
        // It ran once, after the first had committed, and saw its write: no serialization failure.
        #expect(runs.withLock { $0 } == 1)
        #expect(outcome.withLock { $0 } == 1)
        let pair = try database.read { try $0.query("SELECT value FROM pair ORDER BY id", []) }
            .map { try $0.integer(0) }
        #expect(pair == [1, 11])
    }

    @Test func aGroupKeptFromTheLockEndsInBusyWithinTheTimeoutAndTheNextLands() throws {
        let (database, keep) = try storage(writers: 2, timeout: 2)
        defer { withExtendedLifetime(keep) {} }
        try database.write { try $0.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", []) }
        // Another instance's group that does not end: it holds the lock every group takes.
        let releaseLock = try Self.holdGroupLock(keep)
        let started = Date()
        let refused = #expect(throws: DatabaseError.self) {
            try database.write { try $0.execute("INSERT INTO items (name) VALUES ('blocked')", []) }
        }
        let waited = Date().timeIntervalSince(started)
        #expect(refused.map { if case .busy = $0 { true } else { false } } == true)
        #expect(waited < 4, "waited \(waited) s with --db-timeout 2")
        releaseLock()
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('after')", []) }
        #expect(try Self.names(database) == ["after"])
    }

    @Test func aReadEndsItsTransactionSoTheNextReadSeesNewWrites() throws {
        // One pooled connection: every read below runs on the same one.
        let database = try TestDatabase(.postgres, in: try TemporaryDirectory())
        let storage = try PostgresDatabase(
            url: PostgresURL(database.url), password: database.password, maximumConnections: 1)
        try storage.createGroupLockTable()
        try storage.write { try $0.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", []) }
        for index in 0..<5 {
            let count = try storage.read { try $0.queryOne("SELECT COUNT(*) FROM items", [])?.integer(0) }
            #expect(count == Int64(index))
            try storage.write {
                try $0.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
            }
        }
        // A read that fails leaves the connection usable for the next.
        #expect(throws: DatabaseError.self) { try storage.read { try $0.query("SELECT * FROM missing", []) } }
        #expect(try storage.read { try $0.queryOne("SELECT COUNT(*) FROM items", [])?.integer(0) } == 5)
    }

    @Test func commitsThatNeverReturnAreUnavailableAndTheHealthCheckSaysSo() throws {
        // A cluster of its own: every COMMIT waits for a synchronous standby that is not there,
        // as on a primary whose standby is gone (Patroni's synchronous_mode_strict).
        let cluster = try PostgresCluster()
        let name = try cluster.createDatabase()
        var limits = PostgresDatabase.Limits(timeout: 2)
        limits.writers = 1
        let database = try PostgresDatabase(
            url: PostgresURL(cluster.url(database: name)), password: cluster.password, maximumConnections: 4,
            limits: limits)
        try database.createGroupLockTable()
        try database.write { try $0.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", []) }
        try database.checkWritable()
        _ = try cluster.sql("ALTER SYSTEM SET synchronous_standby_names = 'gone'")
        _ = try cluster.sql("SELECT pg_reload_conf()")
        usleep(300_000)
        let started = Date()
        let refused = #expect(throws: DatabaseError.self) {
            try database.write { try $0.execute("INSERT INTO items (name) VALUES ('unknown')", []) }
        }
        #expect(refused.map { if case .unavailable = $0 { true } else { false } } == true)
        #expect(Date().timeIntervalSince(started) < 4)
        // Reads still work; the health check does not.
        #expect(try database.read { try $0.queryOne("SELECT 1", [])?.integer(0) } == 1)
        #expect(throws: DatabaseError.self) { try database.checkWritable() }
        _ = try cluster.sql("ALTER SYSTEM RESET synchronous_standby_names")
        _ = try cluster.sql("SELECT pg_reload_conf()")
        try Self.waitUntilWritable(database)
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('after')", []) }
        // The COMMIT whose answer never came did commit locally: its outcome was unknown, and
        // the client was never told it succeeded.
        #expect(try Self.names(database) == ["after", "unknown"])
    }

    /// Waits until the health check passes (10 s at most: the released COMMITs answer within
    /// moments of the reload), then checks once more, so that a failure says why.
    private static func waitUntilWritable(_ database: PostgresDatabase) throws {
        for _ in 0..<100 where (try? database.checkWritable()) == nil { usleep(100_000) }
        try database.checkWritable()
    }

    @Test func aLongStandbyLossLeavesOneProbeWaitingAndTheHealthCheckRecoversOnItsConnection() throws {
        // As above: a cluster whose every COMMIT waits for a synchronous standby that is not there.
        let cluster = try PostgresCluster()
        let name = try cluster.createDatabase()
        var limits = PostgresDatabase.Limits(timeout: 1)
        limits.writers = 1
        let database = try PostgresDatabase(
            url: PostgresURL(cluster.url(database: name)), password: cluster.password, maximumConnections: 4,
            limits: limits)
        try database.checkWritable()
        _ = try cluster.sql("ALTER SYSTEM SET synchronous_standby_names = 'gone'")
        _ = try cluster.sql("SELECT pg_reload_conf()")
        // Past the second after the last probe: the next check sends one.
        usleep(1_100_000)
        @Sendable func isUnavailable(_ error: DatabaseError?) -> Bool {
            if case .unavailable = error { true } else { false }
        }
        // The check that sends the probe waits --db-timeout for its COMMIT, then refuses.
        let first = #expect(throws: DatabaseError.self) { try database.checkWritable() }
        #expect(isUnavailable(first))
        // A hundred checks from four threads, over more than twice --db-timeout: each one used
        // to send a probe of its own once a second, each probe a backend left waiting.
        let refused = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<25 {
                do {
                    try database.checkWritable()
                } catch let error as DatabaseError {
                    if isUnavailable(error) { refused.withLock { $0 += 1 } }
                } catch {}
                usleep(100_000)
            }
        }
        #expect(refused.withLock { $0 } == 100)
        let waiting = try cluster.sql(
            "SELECT pid || ' ' || query FROM pg_stat_activity WHERE datname = '\(name)' AND wait_event = 'SyncRep'"
        ).split(separator: "\n").map(String.init)
        // One backend waits: the first probe's.
        #expect(waiting.count == 1)
        #expect(waiting.first?.hasSuffix(PostgresCommitProbe.statement) == true)
        let pid = waiting.first?.split(separator: " ").first.map(String.init) ?? "0"
        let sent = try cluster.sql("SELECT query_start FROM pg_stat_activity WHERE pid = \(pid)")
        _ = try cluster.sql("ALTER SYSTEM RESET synchronous_standby_names")
        _ = try cluster.sql("SELECT pg_reload_conf()")
        // The probe's COMMIT is answered: commits go through, and the health check says so.
        try Self.waitUntilWritable(database)
        // The next probe (due a second later) goes out on the same connection, and commits.
        usleep(1_100_000)
        try database.checkWritable()
        let probes = try cluster.sql(
            "SELECT pid, query_start > '\(sent)' FROM pg_stat_activity WHERE datname = '\(name)' "
                + "AND query = '\(PostgresCommitProbe.statement.replacingOccurrences(of: "'", with: "''"))'")
        #expect(probes == "\(pid)|t")
        #expect(
            try cluster.sql(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = '\(name)' AND wait_event = 'SyncRep'")
                == "0")
    }

    @Test func aGroupThatCannotGetTheLockTellsEveryMemberWhyAndNoneOfItRuns() throws {
        let (database, keep) = try storage(timeout: 2)
        defer { withExtendedLifetime(keep) {} }
        try database.write { try $0.execute("CREATE TABLE items (name TEXT PRIMARY KEY)", []) }
        // Another instance's group that does not end: it holds the lock every group takes.
        let releaseLock = try Self.holdGroupLock(keep)
        // Five writes form one group (a held write runs no statement, so it takes no lock).
        let held = HeldWriter(database)
        let entered = Locked<[Int]>([])
        let (group, outcomes) = queueWritesKeepingErrors(5, on: database) { index, connection in
            entered.withLock { $0.append(index) }
            try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
            try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("again\(index)")])
        }
        held.letGo()
        group.wait()
        // Every member is told the database is busy, and why: the group lock.
        let reason = "database busy: the group commit lock (\(PostgresWriter.lockTable)) was not free"
        #expect(outcomes.withLock { $0 }.count == 5)
        for (index, outcome) in outcomes.withLock({ $0 }) {
            #expect(outcome.hasPrefix(reason), "write \(index): \(outcome)")
        }
        // None of their statements ran: the lock went out with the first member's first
        // statement, which PostgreSQL never ran, and no other member's work was called.
        #expect(entered.withLock { $0 }.count == 1)
        releaseLock()
        try database.write { try $0.execute("INSERT INTO items (name) VALUES ('after')", []) }
        #expect(try Self.names(database) == ["after"])
    }

    @Test func aRequestInConflictEveryTimeRunsAtMostTheDocumentedTimesAcrossSplits() throws {
        let (database, keep, other) = try writeSkewStorage()
        defer { withExtendedLifetime(keep) {} }
        let held = HeldWriter(database)
        let runs = Locked(0)
        // Request 0 makes write skew on every run: it reads row 2, another transaction reads row
        // 1 and writes row 2 and commits, then request 0 writes row 1. Its group fails and is
        // split, the half that holds it fails and is split, and so on; request 0 alone runs on
        // until its runs are used up. Requests 1–5 only insert a row each.
        let (group, outcomes) = queueWritesKeepingErrors(6, on: database) { index, connection in
            if index == 0 {
                runs.withLock { $0 += 1 }
                let seen =
                    try connection.queryOne("SELECT value FROM pair WHERE id = 2", [])?.integer(0) ?? -1
                try other.queueWrite { connection in
                    try connection.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", [])
                    let seen =
                        try connection.queryOne("SELECT value FROM pair WHERE id = 1", [])?.integer(0) ?? -1
                    try connection.execute("UPDATE pair SET value = ? WHERE id = 2", [.integer(seen + 100)])
                }
                try connection.execute("UPDATE pair SET value = ? WHERE id = 1", [.integer(seen + 10)])
            }
            try connection.execute("INSERT INTO items (name) VALUES (?)", [.text("item\(index)")])
        }
        held.letGo()
        group.wait()
        // Ten runs in all (the documented limit), not ten after the last split (twelve or
        // thirteen here, about sixteen in a full group of 48), then busy; the others landed once
        // each.
        #expect(runs.withLock { $0 } == 10)
        let ended = outcomes.withLock { $0 }
        #expect(ended[0]?.hasPrefix("database busy: serialization failures in each of 10 runs") == true)
        #expect((1..<6).map { ended[$0] } == Array(repeating: "ok", count: 5))
        #expect(try Self.names(database) == (1..<6).map { "item\($0)" })
        let pair = try database.read { try $0.query("SELECT value FROM pair ORDER BY id", []) }
            .map { try $0.integer(0) }
        #expect(pair == [0, 100])
    }

    @Test func aWriteInsideAWriteFailsInsteadOfWaitingForItself() throws {
        let (database, keep) = try storage()
        defer { withExtendedLifetime(keep) {} }
        let inner = #expect(throws: DatabaseError.self) {
            try database.write { _ in try database.write { _ in } }
        }
        #expect(inner.map { if case .engine = $0 { true } else { false } } == true)
    }

    /// Another instance's group commit that holds the group lock until the returned function is
    /// called (which waits for that group to end): every group of the test's storage then waits.
    static func holdGroupLock(_ keep: TestDatabase) throws -> () -> Void {
        let other = try PostgresDatabase(
            url: PostgresURL(keep.url), password: keep.password, maximumConnections: 1)
        let locked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = try? other.queueWrite { connection in
                try connection.execute("LOCK TABLE \(PostgresWriter.lockTable) IN EXCLUSIVE MODE", [])
                locked.signal()
                release.wait()
            }
            finished.signal()
        }.start()
        locked.wait()
        return {
            release.signal()
            finished.wait()
        }
    }
}

extension PostgresDatabase {
    /// The table the writers lock (migration 14), for storage opened on a database without the
    /// server's migrations.
    func createGroupLockTable() throws {
        try migrate {
            try $0.execute(
                "CREATE TABLE IF NOT EXISTS \(PostgresWriter.lockTable) (id BIGINT PRIMARY KEY)", [])
        }
    }
}
