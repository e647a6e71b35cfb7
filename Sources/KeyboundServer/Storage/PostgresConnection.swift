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
    private let handle: OpaquePointer
    /// The longest wait for one answer, in seconds (longer for a migration's statements).
    var responseTimeout: Double
    /// Statements prepared on this connection: SQL with `?` → its name and parameter count.
    private var statements: [String: (name: String, parameters: Int)] = [:]
    /// The first failure inside the current transaction (the transaction is aborted from then on).
    private(set) var transactionFailure: PostgresFailure?
    /// True once the connection cannot be trusted: lost, timed out, or in an unknown state.
    private(set) var isBroken = false
    /// The `BEGIN` of the current transaction while not yet sent: it goes out with the
    /// transaction's first statement, in one round trip.
    private var pendingBegin: String?
    /// Whether PostgreSQL has started the current transaction (its `BEGIN` was answered).
    private(set) var transactionStarted = false
    /// Inside ``pipelined(_:)``: commands are sent without waiting for their answers.
    private var isPipelined = false
    /// Commands sent in the pipeline whose answers have not been read yet.
    private var queued = 0
    /// Answers are read after this many pipelined commands: few enough that their answers fit
    /// in the socket buffers, so that neither side blocks writing while the other does too.
    private static let pipelineDepth = 500

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

    /// Sends with `send` (a `PQsend…` call) and collects the answer within the deadline.
    /// - Returns: the result, which the caller must `PQclear`.
    /// - Throws: ``PostgresFailure``: the server's error (the connection stays usable), or the
    ///   connection's loss or timeout (it is broken then).
    private func roundTrip(_ send: () -> Int32) throws -> OpaquePointer {
        guard !isBroken else { throw PostgresFailure(sqlState: nil, message: "connection is broken") }
        guard send() == 1 else { throw lost() }
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

    /// Sends a command. Outside a pipeline it waits for the result (which the caller clears);
    /// inside ``pipelined(_:)`` it returns nil, and the answer is read with the next batch.
    private func perform(_ send: () -> Int32) throws -> OpaquePointer? {
        if let begin = pendingBegin {
            pendingBegin = nil
            return try beginWith(begin, send)
        }
        guard isPipelined else { return try roundTrip(send) }
        guard !isBroken, send() == 1 else { throw lost() }
        queued += 1
        if queued >= Self.pipelineDepth { try readPipeline() }
        return nil
    }

    /// Sends `begin` and the command `send` sends in one pipeline, so that starting a
    /// transaction costs no round trip of its own.
    /// - Returns: the command's result, which the caller clears.
    private func beginWith(_ begin: String, _ send: () -> Int32) throws -> OpaquePointer {
        guard !isBroken, PQenterPipelineMode(handle) == 1 else { throw lost() }
        guard PQsendQueryParams(handle, begin, 0, nil, nil, nil, nil, 0) == 1, send() == 1,
            PQpipelineSync(handle) == 1
        else { throw lost() }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(responseTimeout * 1e9)
        var results: [OpaquePointer] = []
        defer { for result in results { PQclear(result) } }
        while true {
            try waitUntilReady(deadline: deadline)
            guard let result = PQgetResult(handle) else { continue }
            if PQresultStatus(result) == PGRES_PIPELINE_SYNC {
                PQclear(result)
                break
            }
            results.append(result)
        }
        guard PQexitPipelineMode(handle) == 1 else { throw lost() }
        if PQstatus(handle) != CONNECTION_OK { isBroken = true }
        // The BEGIN's answer, then the command's (aborted when the BEGIN failed).
        guard results.count == 2 else { throw lost() }
        if let failure = Self.failure(of: results[0]) { throw record(failure) }
        transactionStarted = true
        if let failure = Self.failure(of: results[1]) { throw record(failure) }
        return results.removeLast()
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

    /// Reads the answers of every pipelined command up to a sync point it sends now.
    /// - Throws: the first failure among them (the ones after it did not run).
    private func readPipeline() throws {
        guard PQpipelineSync(handle) == 1 else { throw lost() }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(responseTimeout * 1e9)
        var failure: PostgresFailure?
        while true {
            try waitUntilReady(deadline: deadline)
            // nil ends one command's results; the sync point ends the batch.
            guard let result = PQgetResult(handle) else { continue }
            let status = PQresultStatus(result)
            if failure == nil { failure = Self.failure(of: result) }
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        queued = 0
        if let failure { throw record(failure) }
    }

    /// Runs `body` with its statements pipelined (libpq's pipeline mode): each is sent without
    /// waiting for its answer, and the answers are checked in batches. For bulk loads inside a
    /// transaction (the bench's seeding): ``execute(_:_:)`` returns 0, a failure surfaces with
    /// its batch, and ``query(_:_:)`` is refused. A connection whose pipeline failed is broken.
    func pipelined(_ body: () throws -> Void) throws {
        if let begin = pendingBegin {
            pendingBegin = nil
            _ = try command(begin)
            transactionStarted = true
        }
        guard !isBroken, PQenterPipelineMode(handle) == 1 else { throw lost() }
        isPipelined = true
        defer { isPipelined = false }
        do {
            try body()
            try readPipeline()
        } catch {
            isBroken = true
            throw error
        }
        guard PQexitPipelineMode(handle) == 1 else { throw lost() }
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

    /// Marks the connection broken and describes why.
    private func lost() -> PostgresFailure {
        isBroken = true
        return PostgresFailure(sqlState: nil, message: Self.firstLine(PQerrorMessage(handle)))
    }

    // MARK: Statements

    /// The prepared statement for `sql`, prepared on first use (placeholders numbered once).
    private func prepared(_ sql: String) throws -> (name: String, parameters: Int) {
        if let known = statements[sql] { return known }
        let (text, count) = Self.numberPlaceholders(sql)
        let name = "kb\(statements.count + 1)"
        if let result = try perform({ PQsendPrepare(handle, name, text, Int32(count), nil) }) {
            PQclear(result)
        }
        statements[sql] = (name, count)
        return (name, count)
    }

    /// Runs a prepared statement with text-format parameters; the caller clears the result
    /// (nil in a pipeline).
    private func run(_ sql: String, _ parameters: [SQLValue]) throws -> OpaquePointer? {
        let statement = try prepared(sql)
        guard statement.parameters == parameters.count else {
            throw PostgresFailure(
                sqlState: "07001",
                message: "expected \(statement.parameters) parameters, got \(parameters.count)")
        }
        let values: [UnsafeMutablePointer<CChar>?] = parameters.map { value in
            switch value {
            case .null: nil
            case .integer(let number): strdup(String(number))
            case .text(let text): strdup(text)
            }
        }
        defer { for pointer in values { free(pointer) } }
        return try values.map { UnsafePointer($0) }.withUnsafeBufferPointer { pointers in
            try perform {
                PQsendQueryPrepared(
                    handle, statement.name, Int32(pointers.count), pointers.baseAddress, nil, nil, 0)
            }
        }
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        guard !isPipelined else {
            throw PostgresFailure(sqlState: "0A000", message: "no queries inside a pipelined bulk load")
        }
        guard let result = try run(sql, parameters) else { return [] }
        defer { PQclear(result) }
        let columns = PQnfields(result)
        // Integer columns (int8, int4, int2) come back as integers, booleans as 0 or 1,
        // everything else as text: the types the portable schema uses.
        let kinds = (0..<columns).map { PQftype(result, $0) }
        var rows: [SQLRow] = []
        rows.reserveCapacity(Int(PQntuples(result)))
        for row in 0..<PQntuples(result) {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns {
                if PQgetisnull(result, row, column) == 1 {
                    values.append(.null)
                    continue
                }
                let text = String(cString: PQgetvalue(result, row, column))
                switch kinds[Int(column)] {
                case 20, 21, 23:
                    guard let number = Int64(text) else {
                        throw DatabaseError.unexpectedType(column: Int(column))
                    }
                    values.append(.integer(number))
                case 16: values.append(.integer(text == "t" ? 1 : 0))
                default: values.append(.text(text))
                }
            }
            rows.append(SQLRow(values: values))
        }
        return rows
    }

    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
        guard let result = try run(sql, parameters) else { return 0 }
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    // MARK: Transactions

    /// Sends a command without parameters (simple protocol) and returns its command tag.
    private func command(_ text: String) throws -> String {
        let result = try roundTrip { PQsendQuery(handle, text) }
        defer { PQclear(result) }
        return String(cString: PQcmdStatus(result))
    }

    /// Starts a transaction with `statement` (`BEGIN ISOLATION LEVEL …`). It is sent with the
    /// transaction's first statement (see ``transactionStarted``).
    func begin(_ statement: String) {
        transactionFailure = nil
        transactionStarted = false
        pendingBegin = statement
    }

    /// Commits. A COMMIT that PostgreSQL answered with ROLLBACK (the transaction had failed)
    /// throws that failure. A transaction that ran no statement has nothing to commit.
    /// - Throws: ``PostgresFailure``. Without SQLSTATE, the outcome is unknown: the COMMIT may
    ///   or may not have taken effect, and nobody may be told that it did.
    func commit() throws {
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        let tag = try command("COMMIT")
        guard tag == "COMMIT" else {
            throw transactionFailure ?? PostgresFailure(sqlState: "25P02", message: "transaction rolled back")
        }
    }

    /// Marks the connection as never to be used again (it reached a server that takes no
    /// writes): the pool closes it instead of taking it back.
    func discard() { isBroken = true }

    /// Rolls back the current transaction; a connection that cannot do so is marked broken.
    func rollback() {
        if pendingBegin != nil {
            pendingBegin = nil
            return
        }
        if !isBroken && (try? command("ROLLBACK")) == nil { isBroken = true }
    }
}
