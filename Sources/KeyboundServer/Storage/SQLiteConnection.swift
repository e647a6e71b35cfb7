import CSQLite
import Foundation

/// One SQLite connection. It owns the `sqlite3` handle and its cached prepared statements.
///
/// `@unchecked Sendable` is safe because a connection is used by one thread at a time: a reader
/// is handed out by the pool under its lock and taken back when its transaction ends, and the
/// writer connection is only ever used by the writer's thread (SQLite is opened in multi-thread
/// mode, which allows exactly that).
final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, busyTimeoutMilliseconds: Int32, synchronous: SQLiteSynchronous) throws {
        _ = Self.configured
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
        // Temporary data in memory, above all the sub-journal: every request of a group commit
        // runs in its own savepoint, which keeps the original of each page it changes. In a file
        // (the default) that was a temporary file created, written page by page and removed for
        // every login: about 50 system calls each, more than the rest of its storage work.
        try execute("PRAGMA temp_store = MEMORY", [])
    }

    /// Process-wide settings, made once before the first connection opens (and so initializes
    /// SQLite). If something else in the process used SQLite first they stay as they were.
    private static let configured: Void = {
        _ = kb_sqlite_disable_memory_statistics()
    }()

    /// Whether ``close()`` has run.
    private(set) var isClosed = false

    /// Closes the connection now rather than when it is released; it must not be used after.
    /// (The last connection of a WAL database to close checkpoints the WAL and removes it.)
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        sqlite3_close_v2(handle)
    }

    deinit { close() }

    private func check(_ status: Int32) throws {
        guard status == SQLITE_OK || status == SQLITE_DONE || status == SQLITE_ROW else {
            if status & 0xFF == SQLITE_BUSY || status & 0xFF == SQLITE_LOCKED {
                throw DatabaseError.busy("another connection held the database's lock past the busy timeout")
            }
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

    /// Runs `body` in a read transaction (one snapshot of the last commit, WAL).
    func readTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try execute("BEGIN", [])
        do {
            let result = try body(self)
            try execute("COMMIT", [])
            return result
        } catch {
            if inTransaction { _ = try? execute("ROLLBACK", []) }
            throw error
        }
    }

    /// Frames in the WAL after this connection's last commit, as its WAL hook reported them.
    /// Kept only after ``checkpointWhenAsked()``; 0 before.
    private(set) var walFrames = 0

    /// Turns off SQLite's automatic checkpoint for this connection: it runs inside the COMMIT
    /// that crosses 1000 frames and holds that commit (and everyone waiting for it) until the
    /// pages are copied and synced. Instead the connection records the WAL's size after each
    /// commit (``walFrames``), and its owner calls ``checkpoint()`` when it suits it.
    func checkpointWhenAsked() {
        // Replaces the hook of `sqlite3_wal_autocheckpoint`, which is just such a hook. The
        // context is unretained: the hook lives as long as the handle, which `close()` closes.
        sqlite3_wal_hook(
            handle,
            { context, _, _, frames in
                guard let context else { return SQLITE_OK }
                Unmanaged<SQLiteConnection>.fromOpaque(context).takeUnretainedValue().walFrames = Int(frames)
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Copies the WAL's committed pages into the database file without waiting for anyone
    /// (`SQLITE_CHECKPOINT_PASSIVE`): pages that a reader's snapshot still needs stay in the WAL
    /// until a later checkpoint. Once every page is copied, the next write starts the WAL over
    /// from its beginning, so the file stops growing.
    func checkpoint() throws {
        try check(sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil))
    }

    /// Whether a transaction is open. SQLite ends one by itself after some errors (I/O, disk
    /// full, out of memory), and then every savepoint in it is gone too.
    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }
}
