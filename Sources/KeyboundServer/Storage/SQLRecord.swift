import Foundation
import KeyboundWire

/// A row type: the columns it reads, in order, and how it reads them. A query of more than two
/// columns reads into one, so that its SELECT list and its reader are written side by side, and a
/// list that no longer matches the reader fails at once, at its first use, instead of shifting
/// values into the wrong fields.
///
/// ```swift
/// struct ThrottleRow: SQLRecord {
///     static let columns = "failures, blocked_until, updated_at"
///     let failures: Int64
///     let blockedUntil: Date
///     let updatedAt: Date
///     init(row: inout SQLRowReader) throws {
///         failures = try row.integer()
///         blockedUntil = try row.date()
///         updatedAt = try row.date()
///     }
/// }
/// let row = try connection.queryOne(ThrottleRow.self, "SELECT \(ThrottleRow.columns) FROM throttles WHERE scope = ?", [.text(scope)])
/// ```
protocol SQLRecord {
    /// The SELECT list, in the order ``init(row:)`` reads it (qualified names where the query
    /// joins tables).
    static var columns: String { get }
    /// Reads every column of ``columns``, in order.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when a column holds another type.
    init(row: inout SQLRowReader) throws
}

/// Reads one row's columns in order. Times come back as `Date` (the database keeps
/// milliseconds since 1970), flags as `Bool` (0 or 1).
struct SQLRowReader {
    private let row: SQLRow
    /// The next column to read.
    private(set) var column = 0

    init(_ row: SQLRow) { self.row = row }

    /// Whether every column of the row was read.
    var isAtEnd: Bool { column == row.values.count }

    /// The next column's text.
    mutating func text() throws -> String {
        defer { column += 1 }
        return try row.text(column)
    }
    /// The next column's text, or nil for NULL.
    mutating func optionalText() throws -> String? {
        defer { column += 1 }
        return try row.optionalText(column)
    }
    /// The next column's integer.
    mutating func integer() throws -> Int64 {
        defer { column += 1 }
        return try row.integer(column)
    }
    /// The next column's integer, or nil for NULL.
    mutating func optionalInteger() throws -> Int64? {
        defer { column += 1 }
        return try row.optionalInteger(column)
    }
    /// The next column as a flag: 0 is false, anything else true.
    mutating func bool() throws -> Bool { try integer() != 0 }
    /// The next column as a value of a closed vocabulary (an enumeration of the wire).
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` for a value outside it.
    mutating func vocabulary<Value: RawRepresentable<String>>() throws -> Value {
        let at = column
        guard let value = Value(rawValue: try text()) else { throw DatabaseError.unexpectedType(column: at) }
        return value
    }
    /// The next column's bytes, stored as base64url text.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` for text that is not base64url.
    mutating func base64URLBytes() throws -> Data {
        let at = column
        guard let bytes = Base64URL.decode(try text()) else { throw DatabaseError.unexpectedType(column: at) }
        return bytes
    }
    /// The next column as a time (milliseconds since 1970).
    mutating func date() throws -> Date { Date(milliseconds: try integer()) }
    /// The next column as a time, or nil for NULL.
    mutating func optionalDate() throws -> Date? { try optionalInteger().map(Date.init(milliseconds:)) }
}

extension SQLConnection {
    /// Runs a statement that returns rows of `type`.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when a row does not have exactly the
    ///   columns the type reads.
    func query<Record: SQLRecord>(_ type: Record.Type, _ sql: String, _ parameters: [SQLValue]) throws
        -> [Record]
    {
        try query(sql, parameters).map(Record.read)
    }

    /// Runs a statement and returns its first row as `type`, if any (the others are not read).
    func queryOne<Record: SQLRecord>(_ type: Record.Type, _ sql: String, _ parameters: [SQLValue])
        throws -> Record?
    {
        try query(sql, parameters).first.map(Record.read)
    }
}

extension SQLRecord {
    /// The first of `rows` as this type, if any (the others are not read).
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when it does not have exactly the
    ///   columns the type reads.
    static func first(of rows: [SQLRow]) throws -> Self? { try rows.first.map(read) }

    /// Reads a whole row.
    /// - Throws: ``DatabaseError/unexpectedType(column:)`` when the row does not have exactly the
    ///   columns the type reads.
    fileprivate static func read(_ row: SQLRow) throws -> Self {
        var reader = SQLRowReader(row)
        let record = try Self(row: &reader)
        guard reader.isAtEnd else { throw DatabaseError.unexpectedType(column: reader.column) }
        return record
    }
}
