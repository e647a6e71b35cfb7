import Foundation

/// A value bound to or read from SQL. Only the types every engine has alike: 64-bit integers
/// (`BIGINT`), text (`TEXT`) and NULL. Binary data is stored as base64url or hex text.
package enum SQLValue: Sendable, Equatable {
    /// SQL NULL.
    case null
    /// A `BIGINT`.
    case integer(Int64)
    /// A `TEXT`.
    case text(String)
}

extension SQLValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    /// A text literal.
    package init(stringLiteral value: String) { self = .text(value) }
    /// An integer literal.
    package init(integerLiteral value: Int64) { self = .integer(value) }
}

extension SQLValue {
    /// A time, as the database keeps it: milliseconds since 1970 (``Foundation/Date/milliseconds``).
    package static func date(_ date: Date) -> SQLValue { .integer(date.milliseconds) }
}

extension Date {
    /// The time as the database keeps it: whole milliseconds since 1970, the nearest (so that a
    /// time read from the database comes back to the same number).
    package var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    /// A time the database kept as milliseconds since 1970.
    package init(milliseconds: Int64) { self.init(timeIntervalSince1970: Double(milliseconds) / 1000) }
}

extension Optional where Wrapped == Date {
    /// The time, or NULL.
    package var sql: SQLValue { map { .date($0) } ?? .null }
}

extension Optional where Wrapped == String {
    /// The text, or NULL.
    package var sql: SQLValue { map { .text($0) } ?? .null }
}

extension Optional where Wrapped == Int64 {
    /// The integer, or NULL.
    package var sql: SQLValue { map { .integer($0) } ?? .null }
}

/// One result row.
package struct SQLRow: Sendable {
    /// The columns, in the order of the `SELECT`.
    package let values: [SQLValue]

    /// Wraps the values of one row.
    package init(values: [SQLValue]) { self.values = values }

    /// The text in `column`.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when it holds no text.
    package func text(_ column: Int) throws -> String {
        guard column < values.count, case .text(let text) = values[column] else {
            throw DatabaseError.unexpectedType(column: column)
        }
        return text
    }

    /// The text in `column`, or nil for NULL.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when it holds neither.
    package func optionalText(_ column: Int) throws -> String? { isNull(column) ? nil : try text(column) }

    /// The integer in `column`.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when it holds no integer.
    package func integer(_ column: Int) throws -> Int64 {
        guard column < values.count, case .integer(let number) = values[column] else {
            throw DatabaseError.unexpectedType(column: column)
        }
        return number
    }

    /// The integer in `column`, or nil for NULL.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when it holds neither.
    package func optionalInteger(_ column: Int) throws -> Int64? {
        isNull(column) ? nil : try integer(column)
    }

    /// Whether `column` holds NULL (a column past the row's end holds nothing, not NULL).
    private func isNull(_ column: Int) -> Bool { column < values.count && values[column] == .null }
}

/// Storage failures. None of them is the client's fault.
package enum DatabaseError: Error, CustomStringConvertible {
    /// The engine reported an error (code and message; never contains bound values).
    case engine(code: Int32, message: String)
    /// The database was too slow or too contended: it stayed locked longer than the busy
    /// timeout, no connection or writer came free in time, a statement or lock wait timed out,
    /// or the retries of a serialization failure ran out (why, for the log): 503.
    case busy(String)
    /// A column did not hold the expected type.
    case unexpectedType(column: Int)
    /// The configured URL names no supported engine, or is malformed (the reason, which never
    /// repeats the URL: it could hold a password).
    case unsupportedURL(String)
    /// The schema is newer than this server knows.
    case schemaTooNew(Int64)
    /// The database cannot be reached (refused, lost, timed out, shutting down): 503.
    case unavailable(String)

    /// What failed, for the log.
    package var description: String {
        switch self {
        case .engine(let code, let message): "database error \(code): \(message)"
        case .busy(let reason): "database busy: \(reason)"
        case .unexpectedType(let column): "unexpected column type at \(column)"
        case .unsupportedURL(let reason): "bad database URL: \(reason)"
        case .schemaTooNew(let version): "database schema version \(version) is newer than this server"
        case .unavailable(let reason): "database unavailable: \(reason)"
        }
    }
}

/// A connection inside a transaction. SQL uses `?` placeholders and portable syntax only
/// (`BIGINT`, `TEXT`, no engine-specific functions), so every engine runs the same statements.
package protocol SQLConnection: AnyObject {
    /// Runs a statement that returns rows.
    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow]
    /// Runs a statement and returns the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int
    /// Runs a statement whose answer nobody reads (an INSERT, or an UPDATE whose count does not
    /// matter): PostgreSQL sends it without waiting, in the round trip of the next statement
    /// that waits; a failure then fails that statement, or the end of the work, as it would
    /// have failed here. SQLite runs it at once.
    func executeLater(_ sql: String, _ parameters: [SQLValue]) throws
    /// Runs statements that return rows, in order, each seeing what the ones before it did, and
    /// returns each one's rows: PostgreSQL sends them together, in one round trip. SQLite runs
    /// them one after another. A failure throws, and the statements after it do not run.
    func queries(_ statements: [SQLStatement]) throws -> [[SQLRow]]
}

/// A statement and its parameters, for ``SQLConnection/queries(_:)``.
package struct SQLStatement: Sendable {
    package let sql: String
    package let parameters: [SQLValue]

    package init(_ sql: String, _ parameters: [SQLValue]) {
        self.sql = sql
        self.parameters = parameters
    }
}

extension SQLConnection {
    /// Runs the statement at once.
    package func executeLater(_ sql: String, _ parameters: [SQLValue]) throws { try execute(sql, parameters) }

    /// Runs the statements one after another.
    package func queries(_ statements: [SQLStatement]) throws -> [[SQLRow]] {
        try statements.map { try query($0.sql, $0.parameters) }
    }

    /// Runs a statement and returns its first row, if any.
    package func queryOne(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow? {
        try query(sql, parameters).first
    }
}

/// The storage protocol: transactions over connections. The implementations are
/// ``SQLiteDatabase`` and ``PostgresDatabase``.
package protocol Database: Sendable {
    /// Runs `body` as one atomic write and commits it; any thrown error undoes all of `body`'s
    /// statements (and only them: an engine may commit several callers' bodies together, each in
    /// its own savepoint). When this returns, the change is durable. `body` must not use the
    /// database itself.
    @discardableResult
    func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Runs `body` in a read-only transaction (one consistent snapshot).
    func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Runs `body` as one schema migration step: a write transaction that no other server's
    /// migration runs beside, so N servers starting at once migrate once.
    @discardableResult
    func migrate<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Whether a read is served in this process, without waiting for another one (SQLite in WAL
    /// mode: readers never wait for the writer). Quick reads may then run on an HTTP thread. A
    /// wrapper passes on what it wraps (``DatabaseWrapper``).
    var readsInProcess: Bool { get }
    /// What a `SELECT` in a write ends with to lock the rows it returns and pass over those
    /// another transaction holds (`FOR UPDATE SKIP LOCKED` on PostgreSQL), so that N instances
    /// claim different rows at once; empty where one writer at a time keeps claims apart already
    /// (SQLite).
    var skipLockedRows: String { get }
    /// Runs `body` as a write of a work queue that claims its rows with ``skipLockedRows`` and
    /// needs no serializable snapshot (the webhook deliverer): READ COMMITTED on PostgreSQL, so
    /// that it takes no part in the serialization conflicts of the requests' writes, which would
    /// otherwise be rolled back for it; a write like any other on SQLite.
    @discardableResult
    func queueWrite<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    /// Answers only when the database takes writes now (`GET /healthz`): a read on SQLite; on
    /// PostgreSQL a transaction that a standby refuses, and a COMMIT that must go through.
    /// - Throws: ``DatabaseError/unavailable(_:)`` while no primary takes writes.
    func checkWritable() throws
}

/// A database that wraps another (to hold back its effects, or, in tests, to count or hold its
/// transactions): everything it does not change itself is the wrapped one's, so an engine's own
/// answers (PostgreSQL's row locks, migrations, queue writes, health) are never lost in a wrapper.
package protocol DatabaseWrapper: Database {
    /// The database it wraps.
    var base: any Database { get }
}

extension DatabaseWrapper {
    package func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }
    package var readsInProcess: Bool { base.readsInProcess }
    package var skipLockedRows: String { base.skipLockedRows }
    @discardableResult
    package func migrate<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.migrate(body) }
    @discardableResult
    package func queueWrite<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try base.queueWrite(body)
    }
    package func checkWritable() throws { try base.checkWritable() }
}
