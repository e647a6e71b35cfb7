import CLibPQ
import Foundation

// A PostgreSQL connection's statements: prepared on first use, run waiting for their answer,
// sent to be answered later, or sent together and answered in one round trip.

extension PostgresConnection {
    /// The prepared statement for `sql`, prepared on first use (placeholders numbered once).
    /// The preparation goes out in the same round trip as the statement's first run.
    private func prepared(_ sql: String) throws -> (name: String, parameters: Int) {
        if let known = statements[sql] { return known }
        let (text, count) = Self.numberPlaceholders(sql)
        let name = "kb\(statements.count + 1)"
        try enqueue({ PQsendPrepare(handle, name, text, Int32(count), nil) }, as: .prepare(sql: sql))
        statements[sql] = (name, count)
        return (name, count)
    }

    /// How ``run(_:_:_:)`` sends a statement.
    private enum Sending {
        /// and waits for its answer;
        case waiting
        /// without waiting: its answer is read with the next one that waits (``executeLater(_:_:)``);
        case later
        /// without waiting, its result kept for the ``readAnswers()`` that follows (``queries(_:)``).
        case batched
    }

    /// Runs a prepared statement with text-format parameters; the caller clears the result
    /// (nil in a pipeline, or unless `sending` is `.waiting`).
    private func run(_ sql: String, _ parameters: [SQLValue], _ sending: Sending = .waiting) throws
        -> OpaquePointer?
    {
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
            let send = {
                PQsendQueryPrepared(
                    self.handle, statement.name, Int32(pointers.count), pointers.baseAddress, nil, nil, 0)
            }
            switch sending {
            case .waiting: return try perform(send)
            case .later:
                try enqueue(send)
                if unanswered.count >= Self.pipelineDepth { try settleAnswers() }
            case .batched: try enqueue(send, as: .answer)
            }
            return nil
        }
    }

    /// Sends the statement without waiting for its answer, which is read with the next statement
    /// that waits, at ``flush()`` or at COMMIT; its failure then fails that, as the failure of a
    /// statement of the transaction.
    func executeLater(_ sql: String, _ parameters: [SQLValue]) throws {
        _ = try run(sql, parameters, .later)
    }

    /// Sends every statement, then reads all their answers: one round trip, with whatever
    /// waited to go out or to be answered before them.
    func queries(_ statements: [SQLStatement]) throws -> [[SQLRow]] {
        guard !isPipelined else {
            throw PostgresFailure(sqlState: "0A000", message: "no queries inside a pipelined bulk load")
        }
        do {
            for statement in statements { _ = try run(statement.sql, statement.parameters, .batched) }
        } catch {
            // Those already sent are answered now, so that no later statement takes their results.
            try? settleAnswers()
            throw error
        }
        let results = try readAnswers()
        defer { for result in results { PQclear(result) } }
        guard results.count == statements.count else { throw lost() }
        return try results.map { try Self.rows(of: $0) }
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        guard !isPipelined else {
            throw PostgresFailure(sqlState: "0A000", message: "no queries inside a pipelined bulk load")
        }
        guard let result = try run(sql, parameters) else { return [] }
        defer { PQclear(result) }
        return try Self.rows(of: result)
    }

    /// The rows of a result. Integer columns (int8, int4, int2) come back as integers, booleans
    /// as 0 or 1, everything else as text: the types the portable schema uses.
    private static func rows(of result: OpaquePointer) throws -> [SQLRow] {
        let columns = PQnfields(result)
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
}
