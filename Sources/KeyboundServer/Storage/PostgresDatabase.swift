import Foundation

/// PostgreSQL storage for any number of `keybound serve` instances on one database: a pool of
/// libpq connections, prepared statements, one transaction per request (docs/design.md, "Storage
/// and the write path").
///
/// **Isolation, per invariant.** Every write transaction runs SERIALIZABLE; reads run REPEATABLE
/// READ READ ONLY (one snapshot, never a serialization failure). The services were written for
/// SQLite's single writer, where a write transaction sees no other writer, and several of their
/// invariants are a read followed by a write that depends on it:
///
/// - a throttle count (`throttles`: read the row, write failures + 1) and a folded audit row
///   (read its count, write count + 1) would lose increments under READ COMMITTED when two
///   instances count at once;
/// - the device cap counts a user's devices, then inserts one: two concurrent bindings could each
///   see room for one more (write skew, which only SERIALIZABLE or a lock on the user prevents);
/// - a sign-up reads whether the name is free, then inserts it;
/// - a refresh reads its token (used? then the family is revoked), then marks it used; an approval
///   reads `pending`, then decides it.
///
/// A login challenge is claimed by inserting its id into `used_challenges` (unique key, `ON
/// CONFLICT DO NOTHING`) in the transaction that opens the session. Of N instances claiming one
/// id at once, one inserts; the others wait for its commit, are rolled back with 40001 (the row
/// is not in their snapshot), and their rerun finds the id taken: "challenge already used", as on
/// SQLite, never an error. A refresh token and an approval are each claimed by one conditional
/// write. Some of these would hold with row locks alone, but `SELECT … FOR UPDATE` is not
/// portable SQL, and one rule that covers every present and future read-then-write is safer than
/// one lock per query. PostgreSQL detects the orderings it cannot serialize and rolls one
/// transaction back with SQLSTATE 40001 (40P01 for a deadlock); such a transaction is run again
/// automatically, up to ``Limits/attempts`` times with a short random backoff. The retry is safe
/// because nothing of the failed attempt was committed; the work of a transaction must therefore
/// not have effects outside the database that matter when repeated.
///
/// **Migrations** run READ COMMITTED under `pg_advisory_xact_lock`: of N instances starting at
/// once one migrates, the others wait, then see the new version (READ COMMITTED takes a new
/// snapshot after the lock; SERIALIZABLE would keep the snapshot from before it) and skip. So
/// migration 4's random secret (``ServerSecrets``) is written once, and every instance signs and
/// checks login challenges with the same key.
///
/// **Faults.** Every answer is awaited with a deadline (``Limits/responseTimeout``), connecting
/// with `connect_timeout`, and the server ends slow statements and lock waits itself
/// (`statement_timeout`, `lock_timeout`); TCP keepalives find a dead peer. A request that cannot
/// reach the database fails with ``DatabaseError/unavailable(_:)`` (503) within those bounds.
/// Connections that failed are dropped; the next request opens new ones, so the server recovers
/// by itself when the database comes back. A COMMIT whose answer never came is reported as
/// unavailable, never as success, and never retried (it may have taken effect).
///
/// Commits are durable when acknowledged as long as the database keeps `synchronous_commit` on
/// (its default); PostgreSQL groups concurrent commits into one WAL flush by itself.
package final class PostgresDatabase: Database {
    /// A read is a round trip to the PostgreSQL server, and may wait for a pooled connection.
    package var readsInProcess: Bool { false }

    /// Row locks that concurrent claimers skip: each instance claims rows no other holds.
    package var skipLockedRows: String { "FOR UPDATE SKIP LOCKED" }

    /// Time bounds and pool size.
    struct Limits: Sendable {
        /// Seconds to establish a connection (libpq's `connect_timeout`, at least 2).
        var connectTimeout = 3
        /// The server cancels a statement running longer (milliseconds).
        var statementTimeout = 4_500
        /// The server gives up waiting for a row lock after this long (milliseconds).
        var lockTimeout = 4_000
        /// The longest we wait for any one answer, in seconds (``Configuration/databaseTimeout``):
        /// past the statement timeout, so the server's own cancellation normally comes first. A
        /// COMMIT that waits longer (a primary whose synchronous standby is gone) is a 503 whose
        /// outcome is unknown.
        var responseTimeout = 5.0
        /// The longest a request waits for a free connection, in seconds (then 503).
        var poolWait = 5.0
        /// Runs of one transaction, the first included, before a serialization failure is 503.
        var attempts = 10
        /// Threads that commit the requests' writes in groups (``PostgresWriter``), each with a
        /// connection of its own.
        var writers = 2
        /// The longest wait for one answer of a migration or a bulk load, which may rightly run
        /// long (an index built on a large table), in seconds; they have no statement timeout.
        var longResponseTimeout = 3600.0

        /// The bounds for `--db-timeout` of `seconds`: answers within it, statements and lock
        /// waits ended by the server a little before.
        init(timeout seconds: Int = 5) {
            let milliseconds = max(1, seconds) * 1000
            responseTimeout = Double(max(1, seconds))
            poolWait = responseTimeout
            statementTimeout = max(500, milliseconds - 500)
            lockTimeout = max(250, min(5_000, statementTimeout - 500))
            connectTimeout = min(3, max(2, seconds))
        }
    }

    /// The database, for messages (holds no password).
    var url: PostgresURL { endpoint.url }
    private let endpoint: PostgresEndpoint
    private var limits: Limits { endpoint.limits }
    private let idle = Locked<[PostgresConnection]>([])
    private let slots: DispatchSemaphore
    private let writer: PostgresWriter
    /// The COMMITs that ``checkWritable()`` makes to see whether commits go through, on a
    /// connection of their own.
    private let commitProbe: PostgresCommitProbe

    /// The key of the advisory lock that migrations hold (the bytes of "keybound").
    static let migrationLockKey: Int64 = 0x6b65_7962_6f75_6e64

    /// Opens one connection now, so a wrong URL or password fails at start.
    /// - Parameters:
    ///   - password: from `KEYBOUND_DB_PASSWORD` or `PGPASSWORD`; nil leaves it to libpq
    ///     (`PGPASSWORD`, `~/.pgpass`).
    ///   - maximumConnections: at most this many connections (one per worker thread, plus a few).
    /// - Throws: ``DatabaseError/unavailable(_:)`` when it cannot connect.
    init(url: PostgresURL, password: String?, maximumConnections: Int, limits: Limits = Limits()) throws {
        slots = DispatchSemaphore(value: max(1, maximumConnections))
        // Server-side bounds, set at connection start (no extra round trip).
        let serverSettings = [
            "statement_timeout=\(limits.statementTimeout)", "lock_timeout=\(limits.lockTimeout)",
            // A transaction left open by a stuck client must not hold its locks for long.
            "idle_in_transaction_session_timeout=\(max(limits.statementTimeout, 30_000))",
            // Every query of ours is an indexed lookup. On a small table the planner would rather
            // scan it whole, and under SERIALIZABLE a whole-table scan locks the whole table
            // against concurrent writers: logins of different users would abort each other
            // (PostgreSQL's documentation, "Serializable Isolation Level", advises index scans).
            "enable_seqscan=off",
        ]
        var parameters: [(String, String)] = [
            ("connect_timeout", String(max(2, limits.connectTimeout))),
            ("client_encoding", "UTF8"),
            ("options", serverSettings.map { "-c " + $0 }.joined(separator: " ")),
            // A peer that vanished (host down, network cut) is found in seconds, not hours.
            ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"),
            ("keepalives_count", "3"), ("tcp_user_timeout", String(Int(limits.responseTimeout * 1000))),
        ]
        if let user = url.user { parameters.append(("user", user)) }
        if let host = url.hostParameter { parameters.append(("host", host)) }
        if let port = url.portParameter { parameters.append(("port", port)) }
        if let database = url.database { parameters.append(("dbname", database)) }
        if let password, !password.isEmpty { parameters.append(("password", password)) }
        if !url.options.contains(where: { $0.key == "application_name" }) {
            parameters.append(("application_name", "keybound"))
        }
        parameters += url.options.filter { $0.key != "target_session_attrs" }.map { ($0.key, $0.value) }
        // A standby is never kept: libpq passes over a server that takes no writes, so a pool
        // that reconnects after a failover finds the new primary.
        parameters.append(("target_session_attrs", url.targetSessionAttributes))
        endpoint = PostgresEndpoint(url: url, parameters: parameters, limits: limits)
        let first = try endpoint.connect()
        idle.withLock { $0.append(first) }
        commitProbe = PostgresCommitProbe(endpoint: endpoint)
        writer = PostgresWriter(endpoint: endpoint, writers: limits.writers) { [idle] in
            Self.dropIdleConnections(idle)
        }
    }

    deinit { writer.stop() }

    /// Opens `url` (`postgres://…`) with the default limits: for the bench's seeding, which
    /// goes through the server's own storage.
    /// - Throws: ``DatabaseError/unsupportedURL(_:)``, ``DatabaseError/unavailable(_:)``.
    package convenience init(url: String, password: String?, maximumConnections: Int) throws {
        try self.init(url: PostgresURL(url), password: password, maximumConnections: maximumConnections)
    }

    /// A transaction that may rightly run long: no statement timeout, and ``Limits/longResponseTimeout``.
    private func unbounded<T>(_ connection: PostgresConnection, _ body: () throws -> T) throws -> T {
        connection.responseTimeout = limits.longResponseTimeout
        defer { connection.responseTimeout = limits.responseTimeout }
        _ = try connection.query("SELECT set_config('statement_timeout', '0', true)", [])
        return try body()
    }

    // MARK: Pool

    private func checkout() throws -> PostgresConnection {
        guard slots.wait(timeout: .now() + limits.poolWait) == .success else {
            throw DatabaseError.busy("no pooled connection came free within \(Int(limits.poolWait)) s")
        }
        if let connection = idle.withLock({ $0.popLast() }) { return connection }
        do {
            return try endpoint.connect()
        } catch {
            slots.signal()
            throw error
        }
    }

    private func checkin(_ connection: PostgresConnection) {
        if !connection.isBroken { idle.withLock { $0.append(connection) } }
        slots.signal()
    }

    /// Closes every idle connection: when one turns out dead, the server most likely restarted
    /// and the others are dead too.
    private func dropIdleConnections() { Self.dropIdleConnections(idle) }

    private static func dropIdleConnections(_ idle: Locked<[PostgresConnection]>) {
        let dropped = idle.withLock { connections in
            defer { connections.removeAll() }
            return connections
        }
        _ = dropped  // closed here, outside the lock, as they are released
    }

    // MARK: Transactions

    private enum Kind {
        case read, write, migrate, queue

        var begin: String {
            switch self {
            case .read: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            case .write: "BEGIN ISOLATION LEVEL SERIALIZABLE"
            case .migrate, .queue: "BEGIN ISOLATION LEVEL READ COMMITTED"
            }
        }
    }

    /// Runs `body` inside its own savepoint of a writer's next group (``PostgresWriter``): one
    /// SERIALIZABLE transaction and one COMMIT for the requests that came meanwhile, and returns
    /// once it has committed. A serialization failure runs `body` again; so `body` must only
    /// touch the database.
    /// - Throws: what `body` throws (only its own statements are rolled back);
    ///   ``DatabaseError/unavailable(_:)`` when PostgreSQL cannot be reached or the COMMIT's
    ///   outcome is unknown; ``DatabaseError/busy`` when no writer came free in time, a timeout
    ///   struck, or the retries ran out.
    /// - Important: `body` runs on a writer's thread and must not write itself (that would wait
    ///   for the writers: it throws instead).
    @discardableResult
    package func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        guard !writer.isWriterThread else {
            throw DatabaseError.engine(code: 0, message: "a write inside a write would wait for itself")
        }
        return try submitWrite(body, to: writer.submit)
    }

    /// How many writes wait for a writer, and how many groups have committed (tests use them to
    /// form a group and to count its commits).
    var writerQueue: (queued: Int, groupsCommitted: Int) { (writer.queued, writer.groupsCommitted) }

    /// Runs `body` in a REPEATABLE READ READ ONLY transaction: one snapshot, never a
    /// serialization failure.
    package func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try transaction(.read, body)
    }

    /// Runs `body` READ COMMITTED: a work queue's claims and outcomes, kept apart by row locks
    /// (`FOR UPDATE SKIP LOCKED`, and updates conditional on the lease), not by serializability.
    /// As a SERIALIZABLE transaction its range reads of the queue would conflict with the
    /// requests that add to it (an event's delivery), and those would be rolled back and, under
    /// load, run out of retries (503).
    @discardableResult
    package func queueWrite<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try transaction(.queue, body)
    }

    /// A SERIALIZABLE transaction (a hot standby refuses one) that would take writes (a server
    /// set read-only would not), and the last outcome of a COMMIT that must reach the disk and the
    /// synchronous standbys (``PostgresCommitProbe``, on a connection of its own: once a second,
    /// at once after the writers' commits went unanswered, never a second one while the last has
    /// not been answered): a primary whose synchronous standby is gone answers reads but never
    /// such a COMMIT. While no primary takes writes, ``DatabaseError/unavailable(_:)``, and the
    /// connection is dropped.
    package func checkWritable() throws {
        try transaction(.write) { connection in
            let readOnly = try connection.queryOne("SELECT current_setting('transaction_read_only')", [])?
                .text(0)
            guard readOnly == "off" else {
                // As a write would have failed: the connection goes, and the pool reconnects.
                throw PostgresFailure(sqlState: "25006", message: "the database takes no writes")
            }
        }
        let probe = commitProbe.check(stalled: writer.commitsStalled)
        if probe.committed && probe.probedNow { writer.commitsStalled = false }
        guard probe.committed else {
            throw DatabaseError.unavailable(
                "the health probe's COMMIT did not go through (no answer within \(Int(limits.responseTimeout)) s, "
                    + "or it failed)")
        }
    }

    /// Runs `body` READ COMMITTED under the migration advisory lock (see the type's notes).
    @discardableResult
    package func migrate<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try transaction(.migrate) { connection in
            try unbounded(connection) {
                _ = try connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))", [])
                return try body(connection)
            }
        }
    }

    /// Runs `body` as one write transaction whose statements are pipelined (see
    /// ``PostgresConnection/pipelined(_:)``): for bulk loads, where waiting for each INSERT's answer
    /// would cost a round trip per row. Nothing of it is committed if any statement fails.
    package func bulkWrite(_ body: (any SQLConnection) throws -> Void) throws {
        try transaction(.write) { connection in
            try unbounded(connection) { try connection.pipelined { try body(connection) } }
        }
    }

    private func transaction<T>(_ kind: Kind, _ body: (PostgresConnection) throws -> T) throws -> T {
        var attempt = 0
        var reconnected = false
        while true {
            attempt += 1
            let connection = try checkout()
            defer { checkin(connection) }
            connection.begin(kind.begin)
            let result: T
            do {
                result = try body(connection)
            } catch {
                // A server that takes no writes (a standby): nothing ran. The connection and the
                // idle ones (they reached the same server) go; the transaction runs once more on
                // a new connection, which libpq makes to a server that takes writes, if any.
                if let failure = connection.transactionFailure ?? (error as? PostgresFailure),
                    failure.meansNotPrimary
                {
                    connection.discard()
                    dropIdleConnections()
                    if !reconnected {
                        reconnected = true
                        continue
                    }
                    throw failure.databaseError
                }
                connection.rollback()
                // Lost before PostgreSQL started the transaction: nothing ran. A pooled connection
                // whose server went away (restarted, or the connection was cut while idle) is
                // replaced by a new one.
                if connection.isBroken && !connection.transactionStarted && attempt < limits.attempts {
                    dropIdleConnections()
                    continue
                }
                // The first failure inside the transaction decides, even if the body caught it.
                let failure = connection.transactionFailure ?? (error as? PostgresFailure)
                if let failure, failure.isRetryable, !connection.isBroken {
                    if attempt < limits.attempts {
                        PostgresEndpoint.backoff(attempt)
                        continue
                    }
                    throw failure.databaseError
                }
                if error is PostgresFailure, let failure { throw failure.databaseError }
                throw error
            }
            do {
                if kind == .read {
                    // The first failure decides, even one the body caught (as COMMIT would say).
                    if let failure = connection.transactionFailure { throw failure }
                    try connection.commitWithoutWaiting()
                } else {
                    try connection.commit()
                }
            } catch let failure as PostgresFailure {
                // With an SQLSTATE, PostgreSQL answered: the transaction was rolled back. Without
                // one, the outcome is unknown, and the request must not be told it succeeded.
                if failure.meansNotPrimary {
                    connection.discard()
                    dropIdleConnections()
                }
                // A failure before the COMMIT went out (a deferred statement's, a caught one)
                // leaves the transaction open: it must not go back to the pool so.
                if failure.sqlState != nil { connection.rollback() }
                if failure.isRetryable && attempt < limits.attempts {
                    PostgresEndpoint.backoff(attempt)
                    continue
                }
                throw failure.databaseError
            }
            return result
        }
    }
}
