import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether COMMITs go through on the primary, for the health check
/// (``PostgresDatabase/checkWritable()``): a COMMIT that must reach the disk and the synchronous
/// standbys, on a connection of its own (not one of the pool's).
///
/// The probe is `SELECT pg_logical_emit_message(true, 'keybound', 'health')` on its own, so its
/// transaction is implicit: a transactional logical message writes WAL (a transaction id alone
/// would not), which no table holds, and anyone may call it. PostgreSQL answers it only after its
/// COMMIT, so the answer waits for the synchronous standbys; a primary whose synchronous standby
/// is gone never gives it, and neither `statement_timeout` nor a closed connection ends the wait
/// (the backend stays, holding a connection slot, until the standby is back).
///
/// So an unanswered probe is never abandoned and never sent again: the check that sent it waits
/// for the answer up to ``PostgresDatabase/Limits/responseTimeout``, then says "no"; while the
/// answer has not come, every later check says "no" at once, after only looking whether it came
/// (without waiting). When it comes (the standby is back), commits go through again and the same
/// connection carries the next probes. However long the standby is gone, one backend waits.
/// A connection that breaks or answers with an error (a server that takes no writes, a backend
/// that was ended) is closed, and the probe is sent once more at once on a new connection, which
/// libpq makes to a primary if there is one.
///
/// A probe goes out at most once a second while commits go through, and at once after the
/// writers' commits went unanswered; the checks in between use the last outcome.
///
/// `@unchecked Sendable` is safe because the connection is touched only by the one check that
/// holds the turn (`running`, under the lock); the state is behind the lock.
final class PostgresCommitProbe: @unchecked Sendable {
    /// The probe's statement.
    static let statement = "SELECT pg_logical_emit_message(true, 'keybound', 'health')"

    private struct State {
        /// The probe's own connection; nil until the first probe, and after one failed.
        var connection: PostgresConnection?
        /// The last probe was sent and not answered yet (commits are not going through).
        var awaiting = false
        /// When the last probe ended (`DispatchTime` nanoseconds).
        var checkedAt: UInt64 = 0
        /// Whether the last probe committed.
        var committed = true
        /// A check is probing: the others use the last outcome.
        var running = false
    }

    /// What became of one turn of the probe.
    private enum Outcome {
        case committed, waiting, failed
    }

    private let endpoint: PostgresEndpoint
    private let state = Locked(State())

    /// - Parameter endpoint: the database; the probe connects to it on its first use.
    init(endpoint: PostgresEndpoint) { self.endpoint = endpoint }

    /// Probes if one is due and no other check is probing, else uses the last outcome.
    /// - Parameter stalled: the writers' last group got no answer in time: probe now rather than
    ///   within a second.
    /// - Returns: whether the last probe committed (`false` while one waits for its answer), and
    ///   whether this call is the one that learnt it.
    func check(stalled: Bool) -> (committed: Bool, probedNow: Bool) {
        let now = DispatchTime.now().uptimeNanoseconds
        let turn = state.withLock { state -> (connection: PostgresConnection?, awaiting: Bool)? in
            guard !state.running, state.awaiting || stalled || now > state.checkedAt + 1_000_000_000 else {
                return nil
            }
            state.running = true
            defer { state.connection = nil }
            return (state.connection, state.awaiting)
        }
        guard let turn else { return (state.withLock { $0.committed }, false) }
        var (connection, outcome) =
            turn.awaiting ? answer(on: turn.connection, within: 0) : send(on: turn.connection)
        // A kept connection that failed (its server restarted, failed over or ended it): no probe
        // of ours waits there any more, and a new connection tries at once (libpq makes it to a
        // server that takes writes, if any).
        if outcome == .failed && turn.connection != nil { (connection, outcome) = send(on: nil) }
        return state.withLock { state in
            state.connection = connection
            state.running = false
            state.checkedAt = DispatchTime.now().uptimeNanoseconds
            state.awaiting = outcome == .waiting
            state.committed = outcome == .committed
            return (state.committed, true)
        }
    }

    /// Sends a probe (on a new connection if there is none) and waits for its answer up to
    /// ``PostgresDatabase/Limits/responseTimeout``.
    /// - Returns: the connection to keep (nil once it failed), and the outcome.
    private func send(on held: PostgresConnection?) -> (PostgresConnection?, Outcome) {
        guard let connection = held ?? (try? endpoint.connect()) else { return (nil, .failed) }
        guard PQsendQuery(connection.handle, Self.statement) == 1 else { return (nil, .failed) }
        return answer(on: connection, within: endpoint.limits.responseTimeout)
    }

    /// Waits up to `seconds` (0: only looks) for the answer of the probe sent on `connection`.
    /// - Returns: the connection to keep (nil once it failed), and the outcome: `waiting` when no
    ///   answer came in time (the connection is kept, with the probe still under way).
    private func answer(on held: PostgresConnection?, within seconds: Double) -> (
        PostgresConnection?, Outcome
    ) {
        guard let connection = held else { return (nil, .failed) }
        let handle = connection.handle
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        var failed = false
        while true {
            while PQisBusy(handle) != 0 {
                let now = DispatchTime.now().uptimeNanoseconds
                let milliseconds = deadline > now ? Int32(min((deadline - now) / 1_000_000 + 1, 60_000)) : 0
                var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                if ready == 0 {
                    if DispatchTime.now().uptimeNanoseconds >= deadline { return (connection, .waiting) }
                    continue
                }
                guard ready > 0, PQconsumeInput(handle) == 1 else { return (nil, .failed) }
            }
            // nil: the probe's results are all read.
            guard let result = PQgetResult(handle) else { break }
            let status = PQresultStatus(result)
            if status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK { failed = true }
            PQclear(result)
        }
        guard !failed, PQstatus(handle) == CONNECTION_OK else { return (nil, .failed) }
        return (connection, .committed)
    }
}
