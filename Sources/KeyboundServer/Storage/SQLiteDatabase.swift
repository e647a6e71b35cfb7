import CSQLite
import Foundation

/// One SQLite connection. It owns the `sqlite3` handle and its cached prepared statements.
///
/// `@unchecked Sendable` is safe because a connection is used by one thread at a time: the pool
/// hands it out under its lock and takes it back when the transaction ends (SQLite is opened in
/// multi-thread mode, which allows exactly that).
private final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, busyTimeoutMilliseconds: Int32, synchronous: SQLiteSynchronous) throws {
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &opened, flags, nil)
        guard status == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(opened)
            throw DatabaseError.engine(code: status, message: message)
        }
        handle = opened
        try check(sqlite3_busy_timeout(handle, busyTimeoutMilliseconds))
        try check(sqlite3_extended_result_codes(handle, 1))
        // WAL lets readers run beside the writer. FULL syncs the WAL on every commit, so an
        // acknowledged change survives a crash of the process or of the machine; NORMAL writes it
        // to the OS before the commit returns, so it survives kill -9 but not a power loss.
        _ = try query("PRAGMA journal_mode = WAL", [])
        try execute("PRAGMA synchronous = \(synchronous == .full ? "FULL" : "NORMAL")", [])
        try execute("PRAGMA foreign_keys = ON", [])
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    private func check(_ status: Int32) throws {
        guard status == SQLITE_OK || status == SQLITE_DONE || status == SQLITE_ROW else {
            if status & 0xFF == SQLITE_BUSY || status & 0xFF == SQLITE_LOCKED { throw DatabaseError.busy }
            throw DatabaseError.engine(code: status, message: String(cString: sqlite3_errmsg(handle)))
        }
    }

    private func prepare(_ sql: String, _ parameters: [SQLValue]) throws -> OpaquePointer {
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var prepared: OpaquePointer?
            try check(sqlite3_prepare_v2(handle, sql, -1, &prepared, nil))
            guard let prepared else {
                throw DatabaseError.engine(code: SQLITE_MISUSE, message: "empty statement")
            }
            statements[sql] = prepared
            statement = prepared
        }
        try check(sqlite3_reset(statement))
        try check(sqlite3_clear_bindings(statement))
        guard Int(sqlite3_bind_parameter_count(statement)) == parameters.count else {
            throw DatabaseError.engine(code: SQLITE_RANGE, message: "parameter count mismatch")
        }
        for (offset, value) in parameters.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: try check(sqlite3_bind_null(statement, index))
            case .integer(let number): try check(sqlite3_bind_int64(statement, index, number))
            case .text(let text):
                try check(sqlite3_bind_text(statement, index, text, -1, kb_sqlite_transient()))
            }
        }
        return statement
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        let statement = try prepare(sql, parameters)
        defer { sqlite3_reset(statement) }
        var rows: [SQLRow] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else {
                try check(status)
                break
            }
            var values: [SQLValue] = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_NULL: values.append(.null)
                case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(statement, column)))
                default:
                    let text = sqlite3_column_text(statement, column).map { String(cString: $0) } ?? ""
                    values.append(.text(text))
                }
            }
            rows.append(SQLRow(values: values))
        }
        return rows
    }

    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
        let statement = try prepare(sql, parameters)
        defer { sqlite3_reset(statement) }
        var status = sqlite3_step(statement)
        while status == SQLITE_ROW { status = sqlite3_step(statement) }
        try check(status)
        return Int(sqlite3_changes(handle))
    }

    /// Runs `body` between BEGIN and COMMIT; rolls back on any error.
    func transaction<T>(write: Bool, _ body: (any SQLConnection) throws -> T) throws -> T {
        // IMMEDIATE takes the write lock up front, so two writers never deadlock on an upgrade.
        try execute(write ? "BEGIN IMMEDIATE" : "BEGIN", [])
        do {
            let result = try body(self)
            try execute("COMMIT", [])
            return result
        } catch {
            if sqlite3_get_autocommit(handle) == 0 { _ = try? execute("ROLLBACK", []) }
            throw error
        }
    }
}

/// SQLite storage: WAL, one connection per worker thread (a pool sized to the thread count),
/// busy timeout, synchronous commits.
final class SQLiteDatabase: Database {
    private struct Pool {
        var idle: [SQLiteConnection] = []
        var open = 0
    }

    private let path: String
    private let maximumConnections: Int
    private let busyTimeoutMilliseconds: Int32
    private let synchronous: SQLiteSynchronous
    private let pool = Locked(Pool())
    private let available: DispatchSemaphore

    /// - Parameters:
    ///   - path: the database file (created if missing).
    ///   - maximumConnections: at most this many connections (one per worker thread).
    init(
        path: String, maximumConnections: Int, synchronous: SQLiteSynchronous,
        busyTimeoutMilliseconds: Int32 = 5000
    ) throws {
        self.path = path
        self.synchronous = synchronous
        self.maximumConnections = max(1, maximumConnections)
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        available = DispatchSemaphore(value: self.maximumConnections)
        try Self.restrictFileModes(path: path)
        // Open one connection now so a bad path fails at start, not on the first request.
        let first = try SQLiteConnection(
            path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, synchronous: synchronous)
        pool.withLock {
            $0.idle.append(first)
            $0.open = 1
        }
    }

    /// Makes the database readable by its owner only. SQLite would create the file 0644 (it sets
    /// that mode even under a stricter umask), so the file is created here first, 0600; SQLite then
    /// gives the `-wal` and `-shm` files the main file's mode. Files left by an older version are
    /// tightened to 0600 too: they hold password hashes and token hashes.
    private static func restrictFileModes(path: String) throws {
        func failure(_ action: String, _ code: Int32) -> DatabaseError {
            .engine(code: SQLITE_CANTOPEN, message: "cannot \(action): \(String(cString: strerror(code)))")
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        let openError = errno
        if descriptor >= 0 {
            close(descriptor)
        } else if openError != EEXIST {
            throw failure("create \(path)", openError)
        }
        for file in [path, path + "-wal", path + "-shm"] where chmod(file, 0o600) != 0 {
            let chmodError = errno
            guard chmodError == ENOENT else {
                throw failure("make \(file) readable by its owner only", chmodError)
            }
        }
    }

    private func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        available.wait()
        defer { available.signal() }
        let reused: SQLiteConnection? = pool.withLock { $0.idle.popLast() }
        let connection =
            try reused
            ?? SQLiteConnection(
                path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, synchronous: synchronous)
        defer { pool.withLock { $0.idle.append(connection) } }
        return try body(connection)
    }

    func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try withConnection { try $0.transaction(write: true, body) }
    }

    func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try withConnection { try $0.transaction(write: false, body) }
    }
}

/// Opens the database a URL names: `sqlite:PATH`, or `postgres://` / `postgresql://` with
/// `password` (see ``PostgresURL``).
func openDatabase(
    url: String, connections: Int, synchronous: SQLiteSynchronous, password: String? = nil
) throws -> any Database {
    if PostgresURL.names(url) {
        return try PostgresDatabase(
            url: PostgresURL(url), password: password, maximumConnections: connections)
    }
    if url.hasPrefix("sqlite:") {
        let path = String(url.dropFirst("sqlite:".count))
        guard !path.isEmpty else { throw DatabaseError.unsupportedURL("sqlite: needs a path") }
        return try SQLiteDatabase(path: path, maximumConnections: connections, synchronous: synchronous)
    }
    throw DatabaseError.unsupportedURL("use sqlite:PATH or postgres://user@host:port/database")
}
