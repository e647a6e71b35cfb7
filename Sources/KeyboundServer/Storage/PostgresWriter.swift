import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How to reach one PostgreSQL database, and how long to wait for it: what the pool of
/// ``PostgresDatabase`` and its writers share.
struct PostgresEndpoint: Sendable {
    /// The database, for messages (holds no password).
    let url: PostgresURL
    /// libpq's keywords and values.
    let parameters: [(String, String)]
    let limits: PostgresDatabase.Limits

    /// A new connection.
    /// - Throws: ``DatabaseError/unavailable(_:)`` when it cannot connect.
    func connect() throws -> PostgresConnection {
        do {
            return try PostgresConnection(parameters: parameters, responseTimeout: limits.responseTimeout)
        } catch let failure as PostgresFailure {
            throw DatabaseError.unavailable("cannot connect to \(url): \(failure.message)")
        }
    }

    /// Waits a random 0.5–1.5 × min(2^attempt, 64) ms before running a transaction again, so
    /// that the transactions that collided do not collide again at once.
    static func backoff(_ attempt: Int) {
        let milliseconds = Double(min(1 << min(attempt, 6), 64)) * Double.random(in: 0.5...1.5)
        usleep(UInt32(milliseconds * 1000))
    }
}

/// The writers of a PostgreSQL database: threads that commit the requests' writes in groups, as
/// the SQLite writer does (docs/design.md, "Storage and the write path").
///
/// Requests that arrive while the writers are busy wait in one queue; a writer that comes free
/// takes all of them (up to ``largestGroup``) as one group: one SERIALIZABLE transaction on its
/// own connection, each request's work inside its own savepoint, and one COMMIT — one round trip
/// and one WAL flush for the whole group, where each request would otherwise pay for its BEGIN,
/// its COMMIT and its flush, and concurrent requests of this instance would abort each other
/// with serialization failures. The savepoints cost no round trip: each is sent with its
/// member's first statement, together with the release of the one before; so is the group's
/// `BEGIN`, and the statements whose answers nobody reads (``SQLConnection/executeLater(_:_:)``).
///
/// **One group at a time, across every instance.** Each group locks a table (``lockTable``)
/// right after its BEGIN and holds it until its COMMIT: `LOCK TABLE` takes no snapshot, so each
/// group's snapshot follows the COMMIT of the one before. Under SERIALIZABLE, two concurrent groups of a few dozen
/// logins nearly always read what the other writes — PostgreSQL tracks a transaction's reads
/// per tuple only up to `max_pred_locks_per_relation` (32 by default), then per page or for the
/// whole table — and one of them would be rolled back, then the next, and so on: measured with
/// two instances, without the lock, 0.6 × the logins of one. Groups in a row never conflict.
/// The second writer of an instance has its group ready and waiting for the lock while the
/// first commits. The price: writes, from all instances together, run one group at a time, each
/// request's statements one round trip after another (docs/server.md, "Group commit").
///
/// - A request whose work throws is rolled back to its savepoint alone, and fails with its own
///   error; the others go on.
/// - A serialization failure (40001, 40P01) dooms PostgreSQL's whole transaction, wherever it
///   struck: the group is rolled back, split in halves, and each half run again, with a short
///   random backoff; each request runs at most ``PostgresDatabase/Limits/attempts`` times in all,
///   however often its group was split (then 503). Nothing of the group was committed, and each
///   member's work only touches the database, so nobody's work is lost.
/// - A group that waited for the group lock longer than `lock_timeout` (another group holds it:
///   one whose COMMIT waits for a synchronous standby that is gone) is refused with
///   ``DatabaseError/busy`` that says so, every member of it: none of their statements ran.
/// - A standby, a lost connection, an unknown COMMIT outcome: as for one transaction
///   (``PostgresDatabase``), for every member of the group.
/// - A request that waited longer than ``PostgresDatabase/Limits/poolWait`` for a writer (the
///   groups before it hung on a COMMIT the database did not answer) is refused with
///   ``DatabaseError/busy`` before it runs: nothing of it ran, and it may be sent again.
///
/// Outcomes are handed back only after the COMMIT: a request told it succeeded is durable.
///
/// `@unchecked Sendable` is safe because each writer's connection is touched only by that
/// writer's thread (the queue and the stall flag are safe themselves).
final class PostgresWriter: @unchecked Sendable {
    /// At most this many requests share a transaction: each member that writes takes a
    /// subtransaction id, and past 64 of them in one transaction PostgreSQL stops caching them,
    /// which slows every other session's snapshots.
    static let largestGroup = 48

    /// The table each group locks until its COMMIT (migration 14): it holds no rows.
    static let lockTable = "group_commit_lock"

    private let endpoint: PostgresEndpoint
    /// Closes the pool's idle connections (a writer found a standby: they reached it too).
    private let dropPoolConnections: @Sendable () -> Void
    private let queue = PendingWrites<PostgresConnection>()
    /// Set when a group got no answer from PostgreSQL in time (a COMMIT that waits for a
    /// synchronous standby that is gone) or timed out waiting for a lock or a statement (the
    /// group lock that such a COMMIT holds), cleared when a group commits.
    private let stalled = Locked(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let writers: Int

    /// Starts `writers` threads, which connect when their first group comes.
    init(endpoint: PostgresEndpoint, writers: Int, dropPoolConnections: @escaping @Sendable () -> Void) {
        self.endpoint = endpoint
        self.writers = max(1, writers)
        self.dropPoolConnections = dropPoolConnections
        for index in 0..<self.writers {
            let thread = Thread { [self] in run() }
            thread.name = "keybound-postgres-writer-\(index + 1)"
            thread.start()
        }
    }

    /// Queues a request; a writer runs it in its next group.
    func submit(_ request: WriteRequest<PostgresConnection>) { queue.submit(request) }

    /// How many requests wait for a writer.
    var queued: Int { queue.queued }

    /// How many groups have committed so far.
    var groupsCommitted: Int { queue.groupsCommitted }

    /// Whether the last group that ended got no answer in time, and none has committed since.
    var commitsStalled: Bool {
        get { stalled.withLock { $0 } }
        set { stalled.withLock { $0 = newValue } }
    }

    /// Whether the caller is one of the writers' threads (work must never wait for a writer).
    var isWriterThread: Bool { queue.isWriterThread }

    /// Lets the writers finish the requests already queued, then ends their threads (and closes
    /// their connections).
    func stop() {
        queue.stop()
        for _ in 0..<writers { stopped.wait() }
    }

    private func run() {
        queue.joinAsWriter()
        var connection: PostgresConnection?
        while let group = queue.nextGroup(limit: Self.largestGroup) { commit(group, on: &connection) }
        connection = nil
        stopped.signal()
    }

    /// Completes the requests of `group` that waited too long with ``DatabaseError/busy``, and
    /// commits the others.
    private func commit(_ group: [WriteRequest<PostgresConnection>], on held: inout PostgresConnection?) {
        let patience = UInt64(endpoint.limits.poolWait * 1e9)
        let now = DispatchTime.now().uptimeNanoseconds
        var members: [WriteRequest<PostgresConnection>] = []
        for request in group {
            if now > request.queuedAt + patience {
                request.complete(
                    DatabaseError.busy("no writer came free within \(Int(endpoint.limits.poolWait)) s"))
            } else {
                members.append(request)
            }
        }
        if !members.isEmpty { commitMembers(members, on: &held, ranBefore: 0) }
    }

    /// Runs `members` to their COMMIT and completes them. A serialization failure splits a
    /// group in halves, committed one after the other: the smaller a transaction, the fewer
    /// rows it shares with another instance's, and the sooner one of them gets through. A request
    /// runs at most ``PostgresDatabase/Limits/attempts`` times in all, however often its group was
    /// split (the members of one group have always run equally often: they were split together).
    /// - Parameters:
    ///   - held: the writer's connection: opened when missing, dropped when broken.
    ///   - ranBefore: how many times these members have run already, in the groups they were
    ///     split from.
    private func commitMembers(
        _ members: [WriteRequest<PostgresConnection>], on held: inout PostgresConnection?, ranBefore: Int
    ) {
        let limits = endpoint.limits
        var runs = ranBefore
        var reconnected = false
        while true {
            runs += 1
            let connection: PostgresConnection
            do {
                connection = try held ?? endpoint.connect()
            } catch {
                for member in members { member.complete(error) }
                return
            }
            held = connection
            // The lock before the snapshot: LOCK TABLE takes none, so the group's snapshot comes
            // after the COMMIT of the group before it (a SELECT of an advisory lock would take
            // it before waiting, and the groups would still be concurrent to PostgreSQL).
            connection.begin(
                "BEGIN ISOLATION LEVEL SERIALIZABLE",
                locking: "LOCK TABLE \(Self.lockTable) IN EXCLUSIVE MODE")
            do {
                let outcomes = try runMembers(members, on: connection)
                queue.groupCommitted()
                commitsStalled = false
                for (member, outcome) in zip(members, outcomes) { member.complete(outcome) }
                return
            } catch {
                let failure = connection.transactionFailure ?? (error as? PostgresFailure)
                var outcome: any Error = failure?.databaseError ?? error
                if let failure, failure.meansNotPrimary {
                    // As for one transaction: nothing ran; a new connection finds the primary.
                    connection.discard()
                    held = nil
                    dropPoolConnections()
                    if !reconnected {
                        reconnected = true
                        continue
                    }
                } else if failure?.sqlState == "55P03" && !connection.lockGranted {
                    // The group lock was not granted within lock_timeout: another group holds it
                    // (most likely one whose COMMIT gets no answer). No member's statement ran.
                    connection.rollback()
                    if connection.isBroken { held = nil }
                    outcome = DatabaseError.busy(
                        "the group commit lock (\(Self.lockTable)) was not free within lock_timeout "
                            + "(\(limits.lockTimeout) ms): another group held it")
                } else {
                    connection.rollback()
                    if connection.isBroken { held = nil }
                    let retryable = failure?.isRetryable == true && !connection.isBroken
                    if runs < limits.attempts {
                        // Lost before PostgreSQL started the transaction: nothing ran.
                        if connection.isBroken && !connection.transactionStarted {
                            dropPoolConnections()
                            continue
                        }
                        if retryable {
                            PostgresEndpoint.backoff(runs)
                            if members.count > 1 {
                                let half = members.count / 2
                                commitMembers(Array(members[..<half]), on: &held, ranBefore: runs)
                                commitMembers(Array(members[half...]), on: &held, ranBefore: runs)
                                return
                            }
                            continue
                        }
                    } else if retryable, let failure {
                        outcome = DatabaseError.busy(
                            "serialization failures in each of \(runs) runs: \(failure)")
                    }
                }
                // No answer within the deadline, or a lock or statement that timed out (a group
                // stuck in its COMMIT keeps the group lock): commits may not be going through.
                if (failure?.sqlState == nil && connection.isBroken)
                    || ["55P03", "57014"].contains(failure?.sqlState)
                {
                    commitsStalled = true
                }
                for member in members { member.complete(outcome) }
                return
            }
        }
    }

    /// Runs each member in its own savepoint, then commits.
    /// - Returns: each member's outcome: nil when its work is in the committed transaction, else
    ///   what undid it (its own error, or the database's).
    /// - Throws: what lost the whole transaction: the connection, a serialization failure, a
    ///   standby, a savepoint that could not be rolled back to, or the COMMIT.
    private func runMembers(_ members: [WriteRequest<PostgresConnection>], on connection: PostgresConnection)
        throws -> [(any Error)?]
    {
        var outcomes: [(any Error)?] = []
        outcomes.reserveCapacity(members.count)
        for member in members {
            connection.startSavepoint()
            var thrown = member.run(on: connection)
            do {
                try connection.flush()
            } catch {
                if thrown == nil { thrown = error }
            }
            // A failure the work caught still decides: PostgreSQL refused its statement.
            guard let error = thrown ?? connection.transactionFailure else {
                outcomes.append(nil)
                continue
            }
            let failure = connection.transactionFailure ?? (error as? PostgresFailure)
            if connection.isBroken {
                throw failure ?? PostgresFailure(sqlState: nil, message: "connection lost during the group")
            }
            if let failure, failure.isRetryable || failure.meansNotPrimary { throw failure }
            try connection.rollbackToSavepoint()
            outcomes.append(error is PostgresFailure ? (failure?.databaseError ?? error) : error)
        }
        try connection.commit()
        return outcomes
    }
}
