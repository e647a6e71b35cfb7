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
    func begin(_ statement: String) {
        transactionFailure = nil
        transactionStarted = false
        pendingBegin = statement
        pendingSavepointCommands = []
        savepointSent = false
    }

    /// Opens the savepoint of the next member of a group commit: sent with the member's first
    /// statement, after the release of the previous member's (both in that round trip). A member
    /// that runs no statement costs nothing.
    func startSavepoint() {
        if pendingSavepointCommands.last == Self.savepoint { return }
        if savepointSent {
            pendingSavepointCommands.append("RELEASE SAVEPOINT member")
            savepointSent = false
        }
        pendingSavepointCommands.append(Self.savepoint)
    }

    /// Undoes the statements of the running member of a group commit, and its failure: the
    /// transaction goes on with the next member.
    /// - Throws: ``PostgresFailure`` when it cannot (the savepoint itself failed, or the
    ///   connection did): then the whole transaction is lost.
    func rollbackToSavepoint() throws {
        if pendingSavepointCommands.last == Self.savepoint {
            pendingSavepointCommands.removeLast()
            return
        }
        if !unanswered.isEmpty { _ = try? readAnswers(keepingLast: false) }
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
        pendingSavepointCommands = []
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        let tag = try command("COMMIT")
        guard tag == "COMMIT" else {
            throw transactionFailure ?? PostgresFailure(sqlState: "25P02", message: "transaction rolled back")
        }
    }

    /// Ends a read-only transaction without waiting for the answer: COMMIT and a sync point go
    /// out now (PostgreSQL ends the transaction at once), and the answer is read before the
    /// connection's next command. A read-only transaction has nothing to lose at its COMMIT.
    func commitWithoutWaiting() throws {
        pendingSavepointCommands = []
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
        pendingSavepointCommands = []
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        if !isBroken && (try? command("ROLLBACK")) == nil { discard() }
    }
}
