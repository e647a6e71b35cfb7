import CLibPQ
import Foundation

// A PostgreSQL connection's transaction control: BEGIN, a group commit's savepoints, COMMIT and
// ROLLBACK, each sent in the round trip of a statement where it can be.

extension PostgresConnection {
    /// Sends a command without parameters and returns its command tag.
    private func command(_ text: String) throws -> String {
        guard let result = try perform({ PQsendQueryParams(handle, text, 0, nil, nil, nil, nil, 0) }) else {
            throw PostgresFailure(
                sqlState: "0A000", message: "no transaction control inside a pipelined bulk load")
        }
        defer { PQclear(result) }
        return String(cString: PQcmdStatus(result))
    }

    /// Starts a transaction with `statement` (`BEGIN ISOLATION LEVEL …`). It is sent with the
    /// transaction's first statement (see ``transactionStarted``).
    /// - Parameter lock: a command to send right after the `BEGIN`, with it (a group's
    ///   `LOCK TABLE`, which takes no snapshot); ``lockGranted`` tells whether it was granted.
    func begin(_ statement: String, locking lock: String? = nil) {
        transactionFailure = nil
        transactionStarted = false
        pendingBegin = statement
        pendingCommands = lock.map { [$0] } ?? []
        pendingLock = lock
        lockGranted = false
        savepointSent = false
    }

    /// Opens the savepoint of the next member of a group commit: sent with the member's first
    /// statement, after the release of the previous member's (both in that round trip). A member
    /// that runs no statement costs nothing.
    func startSavepoint() {
        if pendingCommands.last == Self.savepoint { return }
        if savepointSent {
            pendingCommands.append("RELEASE SAVEPOINT member")
            savepointSent = false
        }
        pendingCommands.append(Self.savepoint)
    }

    /// Undoes the statements of the running member of a group commit, and its failure: the
    /// transaction goes on with the next member.
    /// - Throws: ``PostgresFailure`` when it cannot (the savepoint itself failed, or the
    ///   connection did): then the whole transaction is lost.
    func rollbackToSavepoint() throws {
        if pendingCommands.last == Self.savepoint {
            pendingCommands.removeLast()
            return
        }
        if !unanswered.isEmpty { try? settleAnswers() }
        guard !isBroken, savepointSent, transactionStarted else {
            throw transactionFailure
                ?? PostgresFailure(sqlState: "3B001", message: "no savepoint to roll back to")
        }
        _ = try command("ROLLBACK TO SAVEPOINT member")
        transactionFailure = nil
    }

    /// Commits. A COMMIT that PostgreSQL answered with ROLLBACK (the transaction had failed)
    /// throws that failure. A transaction that ran no statement has nothing to commit.
    /// - Throws: ``PostgresFailure``. Without SQLSTATE, the outcome is unknown: the COMMIT may
    ///   or may not have taken effect, and nobody may be told that it did.
    func commit() throws {
        // Savepoints not sent yet saved nothing; COMMIT releases the sent ones.
        pendingCommands = []
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        // Deferred statements first: a failure among them must not leave the COMMIT aborted in
        // the pipeline and the transaction open.
        try flush()
        let tag = try command("COMMIT")
        guard tag == "COMMIT" else {
            throw transactionFailure ?? PostgresFailure(sqlState: "25P02", message: "transaction rolled back")
        }
    }

    /// Ends a read-only transaction without waiting for the answer: COMMIT and a sync point go
    /// out now (PostgreSQL ends the transaction at once), and the answer is read before the
    /// connection's next command. A read-only transaction has nothing to lose at its COMMIT.
    func commitWithoutWaiting() throws {
        pendingCommands = []
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        try enqueue { PQsendQueryParams(handle, "COMMIT", 0, nil, nil, nil, nil, 0) }
        guard PQpipelineSync(handle) == 1 else { throw lost() }
        owesAnswers = true
    }

    /// Rolls back the current transaction; a connection that cannot do so is marked broken.
    func rollback() {
        pendingCommands = []
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        if !isBroken && (try? command("ROLLBACK")) == nil { discard() }
    }

    /// Reads the answers of the statements sent with ``executeLater(_:_:)``.
    /// - Throws: the first failure among them.
    func flush() throws {
        guard !unanswered.isEmpty, !isPipelined else { return }
        try settleAnswers()
    }

    /// Runs `body` with its statements pipelined (libpq's pipeline mode): each is sent without
    /// waiting for its answer, and the answers are checked in batches. For bulk loads inside a
    /// transaction (the bench's seeding): ``execute(_:_:)`` returns 0, a failure surfaces with
    /// its batch, and ``query(_:_:)`` is refused. A connection whose pipeline failed is broken.
    func pipelined(_ body: () throws -> Void) throws {
        isPipelined = true
        defer { isPipelined = false }
        do {
            try body()
            if !unanswered.isEmpty { try settleAnswers() }
        } catch {
            discard()
            throw error
        }
    }
}
