import Foundation
import KeyboundTestSupport
import Testing

@testable import KeyboundServer

/// `SQLConnection.queries(_:)`: statements sent together, answered in order, on both engines;
/// on PostgreSQL in one round trip.
@Suite("Statements sent together")
struct StatementBatchTests {
    /// Storage on a fresh database of `engine`, with a table `t (v BIGINT PRIMARY KEY)`.
    private func storage(_ engine: Engine, in directory: TemporaryDirectory) throws -> (
        any Database, TestDatabase
    ) {
        let database = try TestDatabase(engine, in: directory)
        let storage: any Database
        switch engine {
        case .sqlite:
            storage = try SQLiteDatabase(
                path: directory.path("keybound.sqlite"), readers: 1, synchronous: .normal)
        case .postgres:
            let postgres = try PostgresDatabase(
                url: PostgresURL(database.url), password: database.password, maximumConnections: 2)
            try postgres.createGroupLockTable()
            storage = postgres
        }
        try storage.write { try $0.execute("CREATE TABLE t (v BIGINT PRIMARY KEY)", []) }
        return (storage, database)
    }

    private func count(_ storage: any Database) throws -> Int64? {
        try storage.read { try $0.queryOne("SELECT COUNT(*) FROM t", [])?.integer(0) }
    }

    @Test(arguments: Engine.all) func eachStatementAnswersInOrderAndSeesWhatTheOnesBeforeItDid(engine: Engine)
        throws
    {
        let directory = try TemporaryDirectory()
        let (storage, database) = try storage(engine, in: directory)
        defer { withExtendedLifetime(database) {} }
        let answers = try storage.write { connection in
            try connection.executeLater("INSERT INTO t (v) VALUES (1)", [])
            return try connection.queries([
                SQLStatement(
                    "INSERT INTO t (v) VALUES (?) ON CONFLICT (v) DO NOTHING RETURNING v", [.integer(2)]),
                SQLStatement(
                    "INSERT INTO t (v) VALUES (?) ON CONFLICT (v) DO NOTHING RETURNING v", [.integer(1)]),
                SQLStatement("SELECT COUNT(*) FROM t", []),
                SQLStatement("SELECT v FROM t WHERE v > ? ORDER BY v", [.integer(5)]),
                SQLStatement("UPDATE t SET v = v + 10 RETURNING v", []),
            ])
        }
        #expect(answers.count == 5)
        #expect(answers[0].map(\.values) == [[.integer(2)]])
        // The deferred insert ran before the batch: 1 was taken.
        #expect(answers[1].isEmpty)
        #expect(answers[2].map(\.values) == [[.integer(2)]])
        #expect(answers[3].isEmpty)
        #expect(try answers[4].map { try $0.integer(0) }.sorted() == [11, 12])
        #expect(
            try storage.read { try $0.query("SELECT v FROM t ORDER BY v", []).map(\.values) } == [
                [.integer(11)], [.integer(12)],
            ])
    }

    @Test(arguments: Engine.all) func aFailingStatementStopsTheBatchAndItsWriteKeepsNothing(engine: Engine)
        throws
    {
        let directory = try TemporaryDirectory()
        let (storage, database) = try storage(engine, in: directory)
        defer { withExtendedLifetime(database) {} }
        #expect(throws: DatabaseError.self) {
            try storage.write { connection in
                _ = try connection.queries([
                    SQLStatement("INSERT INTO t (v) VALUES (1) RETURNING v", []),
                    SQLStatement("INSERT INTO t (v) VALUES (1) RETURNING v", []),
                    SQLStatement("INSERT INTO t (v) VALUES (3) RETURNING v", []),
                ])
            }
        }
        #expect(try count(storage) == 0)
        // The connection goes on: the next write commits.
        try storage.write { try $0.execute("INSERT INTO t (v) VALUES (3)", []) }
        #expect(try count(storage) == 1)
    }

    @Test(.enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"))
    func onPostgreSQLTheDeferredStatementsAndTheBatchTakeOneRoundTrip() throws {
        let directory = try TemporaryDirectory()
        let (storage, database) = try storage(.postgres, in: directory)
        defer { withExtendedLifetime(database) {} }
        let (roundTrips, answers) = try storage.write { connection in
            guard let postgres = connection as? PostgresConnection else {
                Issue.record("not a PostgreSQL connection")
                return (0, [[SQLRow]]())
            }
            // The transaction's BEGIN, its lock and a savepoint also wait to go out with the first statement.
            let before = postgres.roundTrips
            try postgres.executeLater("INSERT INTO t (v) VALUES (1)", [])
            try postgres.executeLater("INSERT INTO t (v) VALUES (2)", [])
            let answers = try postgres.queries([
                SQLStatement("SELECT COUNT(*) FROM t", []),
                SQLStatement("SELECT v FROM t WHERE v = ?", [.integer(2)]),
                SQLStatement("INSERT INTO t (v) VALUES (?) RETURNING v", [.integer(3)]),
            ])
            return (postgres.roundTrips - before, answers)
        }
        #expect(roundTrips == 1)
        #expect(answers.map { $0.map(\.values) } == [[[.integer(2)]], [[.integer(2)]], [[.integer(3)]]])
        #expect(try count(storage) == 3)
    }

    @Test(.enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"))
    func aStatementRefusedBeforeItWasSentLeavesNoAnswerBehindForTheNextOne() throws {
        let directory = try TemporaryDirectory()
        let (storage, database) = try storage(.postgres, in: directory)
        defer { withExtendedLifetime(database) {} }
        let next = try storage.read { connection -> Int64? in
            // The second statement has one parameter too few: refused before it is sent, after
            // the first one went out.
            #expect(throws: PostgresFailure.self) {
                try connection.queries([
                    SQLStatement("SELECT 1", []), SQLStatement("SELECT CAST(? AS BIGINT)", []),
                ])
            }
            return try connection.queryOne("SELECT 2", [])?.integer(0)
        }
        #expect(next == 2)
    }
}
