import CSQLite
import Foundation

/// SQLite storage: WAL, one writer connection that commits in groups (``SQLiteWriter``), a pool
/// of reader connections, synchronous commits.
package final class SQLiteDatabase: Database {
    private let path: String
    private let busyTimeoutMilliseconds: Int32
    private let synchronous: SQLiteSynchronous
    private let writer: SQLiteWriter
    /// Idle reader connections; at most `readers` exist, `available` counts the free ones.
    private let idleReaders = Locked<[SQLiteConnection]>([])
    private let available: DispatchSemaphore

    /// - Parameters:
    ///   - path: the database file (created if missing).
    ///   - readers: at most this many reader connections (opened when first needed).
    ///   - synchronous: how commits reach the disk.
    ///   - busyTimeoutMilliseconds: how long a write waits for another process that holds the
    ///     file's write lock before it fails with ``DatabaseError/busy``.
    ///   - checkpointFrames: the WAL's size, in frames of a page each (4 KiB), from which the
    ///     writer checkpoints it (``SQLiteWriter``); 4000 frames are about 16 MiB.
    package init(
        path: String, readers: Int, synchronous: SQLiteSynchronous, busyTimeoutMilliseconds: Int32 = 5000,
        checkpointFrames: Int = 4000
    ) throws {
        self.path = path
        self.synchronous = synchronous
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        available = DispatchSemaphore(value: max(1, readers))
        try Self.restrictFileModes(path: path)
        // The writer's connection is opened now, so a bad path fails at start.
        writer = SQLiteWriter(
            connection: try SQLiteConnection(
                path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, synchronous: synchronous),
            checkpointFrames: checkpointFrames)
    }

    deinit { writer.stop() }

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

    /// Runs `body` on the writer connection inside its own savepoint of the writer's next group
    /// commit, and returns once that group has committed: then the change is durable. When
    /// `body` throws, only its own statements are rolled back, and the error is rethrown.
    /// - Throws: what `body` throws; the COMMIT's error (the change is not stored then);
    ///   ``DatabaseError/busy`` when another process held the write lock too long.
    /// - Important: `body` runs on the writer's thread and must not use the database itself (a
    ///   write from there would wait for itself: it throws instead).
    @discardableResult
    package func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        guard !writer.isWriterThread else {
            throw DatabaseError.engine(
                code: SQLITE_MISUSE, message: "a write inside a write would wait for itself")
        }
        return try submitWrite(body, to: writer.submit)
    }

    /// One writer at a time keeps claims apart.
    package var skipLockedRows: String { "" }

    /// One writer at a time already keeps migrations apart.
    @discardableResult
    package func migrate<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try write(body) }

    /// One writer at a time: a queue's write is a write.
    @discardableResult
    package func queueWrite<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try write(body) }

    /// The one file takes writes whenever it can be read.
    package func checkWritable() throws { _ = try read { try $0.query("SELECT 1", []) } }

    /// How many writes wait for the writer's next group, and how many groups have committed
    /// (tests use them to form a group and to count its commits).
    var writerQueue: (queued: Int, groupsCommitted: Int) { (writer.queued, writer.groupsCommitted) }

    /// Runs `body` in a read-only transaction on a reader connection: one consistent snapshot of
    /// the last commit.
    /// In WAL mode a reader never waits for the writer, and nothing leaves the process.
    package var readsInProcess: Bool { true }

    package func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        available.wait()
        defer { available.signal() }
        let reused = idleReaders.withLock { $0.popLast() }
        let connection =
            try reused
            ?? SQLiteConnection(
                path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, synchronous: synchronous)
        defer { idleReaders.withLock { $0.append(connection) } }
        return try connection.readTransaction(body)
    }
}

/// Opens the database a URL names: `sqlite:PATH`, or `postgres://` / `postgresql://` with
/// `password` (see ``PostgresURL``). `connections` is the number of SQLite readers or the size of
/// the PostgreSQL pool; `timeout` bounds every PostgreSQL call (``Configuration/databaseTimeout``).
package func openDatabase(
    url: String, connections: Int, synchronous: SQLiteSynchronous, password: String? = nil, timeout: Int = 5
) throws -> any Database {
    if PostgresURL.names(url) {
        return try PostgresDatabase(
            url: PostgresURL(url), password: password, maximumConnections: connections,
            limits: .init(timeout: timeout))
    }
    if url.hasPrefix("sqlite:") {
        let path = String(url.dropFirst("sqlite:".count))
        guard !path.isEmpty else { throw DatabaseError.unsupportedURL("sqlite: needs a path") }
        return try SQLiteDatabase(path: path, readers: connections, synchronous: synchronous)
    }
    throw DatabaseError.unsupportedURL("use sqlite:PATH or postgres://user@host:port/database")
}
