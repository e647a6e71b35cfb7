import CSQLite
import Foundation

/// The one writer of a SQLite database: a connection and the thread that owns it, committing
/// requests in groups (docs/design.md, "Storage and the write path").
///
/// Requests that arrive while the writer is busy wait in a queue; the writer then takes all of
/// them as one group: `BEGIN IMMEDIATE`, each request's work inside its own `SAVEPOINT` (released
/// on success, rolled back alone on failure), and one `COMMIT` — one sync of the WAL at
/// `synchronous=full` — for the whole group. Outcomes are handed back only after the COMMIT: a
/// request that is told it succeeded is durable. If the COMMIT fails, every request of the group
/// fails with it.
///
/// Our own connections never wait for each other in SQLite's busy handler (which sleeps): there
/// is one writer, and WAL readers do not block it. Only another process on the same file can
/// make `BEGIN IMMEDIATE` wait, up to the busy timeout.
///
/// The writer also checkpoints the WAL, after it has handed a group its outcomes, once the WAL
/// holds ``checkpointFrames`` frames or more: no request waits for the copy, and the requests
/// that arrive meanwhile make the next group. (SQLite's own automatic checkpoint would run inside
/// the COMMIT every 1000 frames, which a device login, writing about a dozen pages, crosses every
/// 80 logins or so. Checkpointing four times as rarely copies a page written again in between
/// once, and syncs the database file a quarter as often: quick bench runs, alternating, gave 8 %
/// more device logins per second; docs/benchmarks.md.)
///
/// `@unchecked Sendable` is safe because the connection is touched only by the writer's thread
/// (the queue is safe itself).
final class SQLiteWriter: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let queue = PendingWrites<SQLiteConnection>()
    private let stopped = DispatchSemaphore(value: 0)
    private let checkpointFrames: Int

    /// Takes over `connection` and starts the writer's thread.
    /// - Parameter checkpointFrames: the WAL's size, in frames (a page each), from which the
    ///   writer checkpoints it after a group.
    init(connection: SQLiteConnection, checkpointFrames: Int) {
        self.connection = connection
        self.checkpointFrames = max(1, checkpointFrames)
        connection.checkpointWhenAsked()
        let thread = Thread { [self] in run() }
        thread.name = "keybound-sqlite-writer"
        thread.start()
    }

    /// Queues a request; the writer runs it in its next group.
    func submit(_ request: WriteRequest<SQLiteConnection>) { queue.submit(request) }

    /// How many requests wait for the next group.
    var queued: Int { queue.queued }

    /// How many groups have committed so far.
    var groupsCommitted: Int { queue.groupsCommitted }

    /// Whether the caller is the writer's own thread (work must never wait for the writer).
    var isWriterThread: Bool { queue.isWriterThread }

    /// Lets the writer finish the requests already queued, then closes its connection and ends
    /// its thread.
    func stop() {
        queue.stop()
        stopped.wait()
    }

    private func run() {
        queue.joinAsWriter()
        while let group = queue.nextGroup() { commit(group) }
        // Closed here, not when the thread lets go of the writer (some time after `stop()` has
        // returned): whoever stopped the writer may delete or copy the file next.
        connection.close()
        stopped.signal()
    }

    private func commit(_ group: [WriteRequest<SQLiteConnection>]) {
        // nil: the work is in the transaction (so far); otherwise why it is not.
        var outcomes: [(any Error)?] = []
        outcomes.reserveCapacity(group.count)
        do {
            try connection.execute("BEGIN IMMEDIATE", [])
            for request in group {
                outcomes.append(runInSavepoint(request))
                // SQLite ends the whole transaction by itself after some errors (I/O, disk full):
                // the work of the requests before this one is gone with it.
                guard connection.inTransaction else {
                    throw outcomes.last.flatMap { $0 }
                        ?? DatabaseError.engine(code: SQLITE_ABORT, message: "rolled back")
                }
            }
            try connection.execute("COMMIT", [])
            queue.groupCommitted()
        } catch {
            if connection.inTransaction { _ = try? connection.execute("ROLLBACK", []) }
            // Every request whose work was in the transaction fails with it, and so does every
            // request that had not run yet.
            for index in outcomes.indices where outcomes[index] == nil { outcomes[index] = error }
            while outcomes.count < group.count { outcomes.append(error) }
        }
        for (request, outcome) in zip(group, outcomes) { request.complete(outcome) }
        if connection.walFrames >= checkpointFrames {
            // Best effort: another process's checkpoint or write may hold the file (BUSY). The
            // WAL then stays as it is until a later group tries again; nothing is lost either way.
            try? connection.checkpoint()
        }
    }

    /// Runs one request's work in its own savepoint: released when the work succeeds, rolled
    /// back (and then released) when it throws, so its statements leave no trace.
    private func runInSavepoint(_ request: WriteRequest<SQLiteConnection>) -> (any Error)? {
        do {
            try connection.execute("SAVEPOINT request", [])
        } catch {
            return error
        }
        if let failure = request.run(on: connection) {
            if connection.inTransaction {
                _ = try? connection.execute("ROLLBACK TO request", [])
                _ = try? connection.execute("RELEASE request", [])
            }
            return failure
        }
        do {
            try connection.execute("RELEASE request", [])
            return nil
        } catch {
            if connection.inTransaction {
                _ = try? connection.execute("ROLLBACK TO request", [])
                _ = try? connection.execute("RELEASE request", [])
            }
            return error
        }
    }
}
