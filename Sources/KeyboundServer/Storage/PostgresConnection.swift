import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One PostgreSQL connection. It owns the libpq handle and the statements prepared on it.
///
/// Every round trip waits for its answer with a deadline of our own (`poll` on the socket), so a
/// server that stops answering — stopped, frozen, or behind a dead network — costs a request at
/// most that long, whatever TCP does. A connection that timed out or lost its server is marked
/// broken and never used again.
///
/// `@unchecked Sendable` is safe because a connection is used by one thread at a time: the pool
/// hands it out under its lock and takes it back when the transaction ends (libpq allows a
/// connection to move between threads, not to be shared by them).
final class PostgresConnection: SQLConnection, @unchecked Sendable {
    let handle: OpaquePointer
    /// The longest wait for one answer, in seconds (longer for a migration's statements).
    var responseTimeout: Double
    /// Statements prepared on this connection: SQL with `?` → its name and parameter count.
    var statements: [String: (name: String, parameters: Int)] = [:]
    /// The first failure inside the current transaction (the transaction is aborted from then on).
    var transactionFailure: PostgresFailure?
    /// True once the connection cannot be trusted: lost, timed out, or in an unknown state.
    private(set) var isBroken = false
    /// The `BEGIN` of the current transaction while not yet sent: it goes out with the
    /// transaction's first statement, in one round trip.
    var pendingBegin: String?
    /// Commands without parameters not yet sent (a group's lock, its members' savepoints):
    /// they go out with the next statement, in its round trip.
    var pendingCommands: [String] = []
    /// Whether the savepoint of the running member of a group commit has been answered.
    var savepointSent = false
    /// The lock that the current transaction takes after its `BEGIN` (``begin(_:locking:)``), and
    /// whether PostgreSQL granted it (a refused one ended the transaction before any member ran).
    var pendingLock: String?
    var lockGranted = false
    static let savepoint = "SAVEPOINT member"
    /// Whether PostgreSQL has started the current transaction (its `BEGIN` was answered).
    var transactionStarted = false
    /// Inside ``pipelined(_:)``: every statement is sent without waiting for its answer.
    var isPipelined = false
    /// What was sent in pipeline mode and not answered yet, in order (libpq's pipeline mode:
    /// commands go out without waiting; one sync point reads their answers together).
    var unanswered: [Sent] = []
    /// A sync point was sent behind ``unanswered`` whose answers nobody waits for (a read's
    /// COMMIT, ``commitWithoutWaiting()``): read before the connection's next command.
    var owesAnswers = false
    /// Deferred statements are read after this many: few enough that their answers fit in the
    /// socket buffers, so that neither side blocks writing while the other does too.
    static let pipelineDepth = 500

    /// A command sent in pipeline mode, for what its answer means.
    enum Sent {
        /// The transaction's `BEGIN`: answered, the transaction has started.
        case begin
        /// A group member's savepoint: answered, it can be rolled back to.
        case savepoint
        /// The transaction's lock: answered, it holds the lock.
        case lock
        /// The preparation of a statement (forgotten when it fails).
        case prepare(sql: String)
        /// A statement whose result the caller reads.
        case answer
        /// Anything else.
        case command
    }

    /// Opens a connection.
    /// - Parameters:
    ///   - parameters: libpq keywords and values (`host`, `port`, `connect_timeout`, …).
    ///   - responseTimeout: the longest wait for one answer, in seconds.
    /// - Throws: ``PostgresFailure`` without SQLSTATE when the server cannot be reached or refuses.
    init(parameters: [(String, String)], responseTimeout: Double) throws {
        self.responseTimeout = responseTimeout
        let keywords = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer { for pointer in keywords + values { free(pointer) } }
        let opened = (keywords.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keywordArray in
            (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { valueArray in
                PQconnectdbParams(keywordArray.baseAddress, valueArray.baseAddress, 0)
            }
        }
        guard let opened else { throw PostgresFailure(sqlState: nil, message: "out of memory") }
        guard PQstatus(opened) == CONNECTION_OK else {
            let message = Self.firstLine(PQerrorMessage(opened))
            PQfinish(opened)
            throw PostgresFailure(sqlState: nil, message: message)
        }
        handle = opened
        kb_pq_silence_notices(handle)
    }

    deinit { PQfinish(handle) }

    private static func firstLine(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "connection failed" }
        let message = String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
        return message.split(separator: "\n").first.map(String.init) ?? "connection failed"
    }

    // MARK: Round trips

    /// How many times this connection has waited for PostgreSQL's answers: a single statement,
    /// or everything sent since the last sync point, is one round trip.
    private(set) var roundTrips = 0

    /// Sends with `send` (a `PQsend…` call) and collects the answer within the deadline.
    /// - Returns: the result, which the caller must `PQclear`.
    /// - Throws: ``PostgresFailure``: the server's error (the connection stays usable), or the
    ///   connection's loss or timeout (it is broken then).
    private func roundTrip(_ send: () -> Int32) throws -> OpaquePointer {
        guard !isBroken else { throw PostgresFailure(sqlState: nil, message: "connection is broken") }
        guard send() == 1 else { throw lost() }
        roundTrips += 1
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(responseTimeout * 1e9)
        var answer: OpaquePointer?
        var failure: PostgresFailure?
        while true {
            try waitUntilReady(deadline: deadline)
            guard let result = PQgetResult(handle) else { break }
            if let error = Self.failure(of: result) {
                if failure == nil { failure = error }
                PQclear(result)
            } else {
                if let answer { PQclear(answer) }
                answer = result
            }
        }
        if PQstatus(handle) != CONNECTION_OK { isBroken = true }
        if let failure {
            if let answer { PQclear(answer) }
            throw record(failure)
        }
        guard let answer else { throw lost() }
        return answer
    }

    /// Sends a command and waits for its result, which the caller clears; inside
    /// ``pipelined(_:)`` returns nil instead (the answer is read with a later batch). Whatever
    /// waits to be sent (the `BEGIN`, savepoints) or to be answered (deferred statements) goes
    /// in the same round trip, before the command.
    func perform(_ send: () -> Int32) throws -> OpaquePointer? {
        if owesAnswers { try readOwedAnswers() }
        guard isPipelined || !unanswered.isEmpty || pendingBegin != nil || !pendingCommands.isEmpty
        else { return try roundTrip(send) }
        try enqueue(send, as: isPipelined ? .command : .answer)
        if isPipelined {
            if unanswered.count >= Self.pipelineDepth { try settleAnswers() }
            return nil
        }
        let results = try readAnswers()
        for result in results.dropLast() { PQclear(result) }
        return results.last
    }

    /// Sends, in pipeline mode and without waiting, the `BEGIN` and savepoint commands that wait
    /// to go out, then the command `send` sends.
    func enqueue(_ send: () -> Int32, as sent: Sent = .command) throws {
        guard !isBroken else { throw PostgresFailure(sqlState: nil, message: "connection is broken") }
        if owesAnswers { try readOwedAnswers() }
        if unanswered.isEmpty { guard PQenterPipelineMode(handle) == 1 else { throw lost() } }
        func sendCommand(_ text: String, as sent: Sent) throws {
            guard PQsendQueryParams(handle, text, 0, nil, nil, nil, nil, 0) == 1 else { throw lost() }
            unanswered.append(sent)
        }
        if let begin = pendingBegin {
            pendingBegin = nil
            try sendCommand(begin, as: .begin)
        }
        let prefixCommands = pendingCommands
        pendingCommands = []
        for text in prefixCommands {
            try sendCommand(
                text, as: text == Self.savepoint ? .savepoint : text == pendingLock ? .lock : .command)
        }
        guard send() == 1 else { throw lost() }
        unanswered.append(sent)
    }

    /// Sends a sync point and reads the answers of everything sent since the last one.
    /// - Returns: the results of the commands sent as ``Sent/answer``, in order (the caller
    ///   clears them).
    /// - Throws: the first failure among them (the commands after it did not run).
    func readAnswers() throws -> [OpaquePointer] {
        if owesAnswers { try readOwedAnswers() }
        guard !unanswered.isEmpty else { return [] }
        guard PQpipelineSync(handle) == 1 else { throw lost() }
        roundTrips += 1
        return try collectAnswers()
    }

    /// Sends a sync point and reads the answers of everything sent since the last one, keeping
    /// none of them.
    /// - Throws: the first failure among them (the commands after it did not run).
    func settleAnswers() throws {
        for result in try readAnswers() { PQclear(result) }
    }

    /// Reads answers up to the sync point sent last, then leaves pipeline mode.
    /// - Returns: the results of the commands sent as ``Sent/answer``, in order.
    private func collectAnswers() throws -> [OpaquePointer] {
        let sent = unanswered
        unanswered = []
        owesAnswers = false
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(responseTimeout * 1e9)
        var failure: PostgresFailure?
        var kept: [OpaquePointer] = []
        func clearKept() { for result in kept { PQclear(result) } }
        var index = 0
        var nulls = 0
        while true {
            try waitUntilReady(deadline: deadline)
            // nil ends one command's results; the sync point ends the batch. Two in a row, or a
            // connection gone bad, mean no sync point will come (libpq stopped reading).
            guard let result = PQgetResult(handle) else {
                nulls += 1
                if nulls > 1 || PQstatus(handle) != CONNECTION_OK {
                    clearKept()
                    throw lost()
                }
                continue
            }
            nulls = 0
            if PQresultStatus(result) == PGRES_PIPELINE_SYNC {
                PQclear(result)
                break
            }
            let kind = index < sent.count ? sent[index] : .command
            if let error = Self.failure(of: result) {
                if failure == nil { failure = error }
                if case .prepare(let sql) = kind { statements[sql] = nil }
            } else {
                switch kind {
                case .begin: transactionStarted = true
                case .savepoint: savepointSent = true
                case .lock: lockGranted = true
                case .prepare, .answer, .command: break
                }
            }
            if case .answer = kind {
                kept.append(result)
            } else {
                PQclear(result)
            }
            index += 1
        }
        guard PQexitPipelineMode(handle) == 1, index == sent.count else {
            clearKept()
            throw lost()
        }
        if PQstatus(handle) != CONNECTION_OK { isBroken = true }
        if let failure {
            clearKept()
            throw record(failure)
        }
        return kept
    }

    /// Reads the answers of a read's COMMIT that nobody waited for. A read-only transaction
    /// changed nothing; a connection whose COMMIT failed is not trusted again.
    private func readOwedAnswers() throws {
        do {
            _ = try collectAnswers()
        } catch {
            isBroken = true
            throw error
        }
    }

    /// The failure a result reports, or nil when it reports success.
    private static func failure(of result: OpaquePointer) -> PostgresFailure? {
        let status = PQresultStatus(result)
        guard
            status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR || status == PGRES_BAD_RESPONSE
                || status == PGRES_PIPELINE_ABORTED
        else { return nil }
        return PostgresFailure(
            sqlState: kb_pq_sqlstate(result).map { String(cString: $0) },
            message: kb_pq_primary_message(result).map { String(cString: $0) }
                ?? firstLine(PQresultErrorMessage(result)))
    }

    /// Remembers the first failure of the transaction, and returns `failure`.
    private func record(_ failure: PostgresFailure) -> PostgresFailure {
        if transactionFailure == nil { transactionFailure = failure }
        return failure
    }

    /// Waits until libpq has a whole result, reading the socket as data arrives.
    private func waitUntilReady(deadline: UInt64) throws {
        while PQisBusy(handle) != 0 {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else {
                isBroken = true
                throw PostgresFailure(
                    sqlState: nil, message: "no answer from PostgreSQL within \(Int(responseTimeout)) s")
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 60_000))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { throw lost() }
            guard ready == 0 || PQconsumeInput(handle) == 1 else { throw lost() }
        }
    }

    /// Marks the connection as never to be used again (it reached a server that takes no
    /// writes, or cannot roll back): the pool closes it instead of taking it back.
    func discard() { isBroken = true }

    /// Marks the connection broken and describes why.
    func lost() -> PostgresFailure {
        isBroken = true
        return PostgresFailure(sqlState: nil, message: Self.firstLine(PQerrorMessage(handle)))
    }
}
