import Foundation

// What PostgreSQL's protocol asks of a connection besides its handle: the failures it reports,
// and the numbered placeholders it takes.

/// A failure PostgreSQL reported, or the loss of the connection (no SQLSTATE then).
struct PostgresFailure: Error, CustomStringConvertible {
    /// The five-character SQLSTATE; nil when no answer came (connection refused, lost, timed out).
    let sqlState: String?
    /// PostgreSQL's primary message, or libpq's. Never contains bound values: the DETAIL line,
    /// which can quote them, is left out.
    let message: String

    var description: String { sqlState.map { "SQLSTATE \($0): \(message)" } ?? message }

    /// The transaction was rolled back because it could not be ordered with a concurrent one
    /// (40001 serialization_failure, 40P01 deadlock_detected): running it again is safe.
    var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// The server takes no writes: a hot standby (0A000 "cannot use serializable mode in a hot
    /// standby", 25006 read_only_sql_transaction), reached through a proxy or DNS that switched
    /// before the new primary left recovery, or a primary demoted under a pooled connection.
    /// Nothing of the transaction ran; the connection must go, and the request is a 503.
    var meansNotPrimary: Bool {
        sqlState == "25006" || (sqlState == "0A000" && message.contains("hot standby"))
    }

    /// What the request is told: `unavailable` when the database cannot be reached or is going
    /// away, `busy` when it was too slow or too contended, else an engine error (a 500).
    var databaseError: DatabaseError {
        guard let sqlState else { return .unavailable(message) }
        if meansNotPrimary { return .unavailable(description) }
        switch sqlState {
        // Connection exceptions; insufficient resources (too many connections, disk full);
        // shutting down or starting up; a read-only standby; system errors (I/O).
        case _ where sqlState.hasPrefix("08") || sqlState.hasPrefix("53") || sqlState.hasPrefix("58"),
            "57P01", "57P02", "57P03", "25006":
            return .unavailable(description)
        // Retries used up; statement_timeout; lock_timeout.
        case "40001", "40P01", "57014", "55P03":
            return .busy(description)
        default:
            return .engine(code: 0, message: description)
        }
    }
}

extension PostgresConnection {
    /// Rewrites the portable `?` placeholders as PostgreSQL's `$1`, `$2`, … (outside string
    /// literals, quoted identifiers and comments).
    /// - Returns: the rewritten SQL and the number of placeholders.
    static func numberPlaceholders(_ sql: String) -> (sql: String, count: Int) {
        enum State {
            case code, literal, identifier, lineComment, blockComment
        }
        var state = State.code
        var output: [UInt8] = []
        output.reserveCapacity(sql.utf8.count + 8)
        var count = 0
        var previous: UInt8 = 0
        for byte in sql.utf8 {
            switch state {
            case .code:
                switch byte {
                case UInt8(ascii: "?"):
                    count += 1
                    output.append(contentsOf: Array("$\(count)".utf8))
                    previous = 0
                    continue
                case UInt8(ascii: "'"): state = .literal
                case UInt8(ascii: "\""): state = .identifier
                case UInt8(ascii: "-") where previous == UInt8(ascii: "-"): state = .lineComment
                case UInt8(ascii: "*") where previous == UInt8(ascii: "/"): state = .blockComment
                default: break
                }
            case .literal: if byte == UInt8(ascii: "'") { state = .code }
            case .identifier: if byte == UInt8(ascii: "\"") { state = .code }
            case .lineComment: if byte == UInt8(ascii: "\n") { state = .code }
            case .blockComment:
                if byte == UInt8(ascii: "/") && previous == UInt8(ascii: "*") {
                    state = .code
                    output.append(byte)
                    previous = 0
                    continue
                }
            }
            output.append(byte)
            previous = byte
        }
        return (String(decoding: output, as: UTF8.self), count)
    }
}
