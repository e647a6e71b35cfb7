import Foundation
import KeyboundWire
import Testing

@testable import Keybound

/// The DocC article "The error table" (Sources/Keybound/Keybound.docc/ErrorTable.md) says, for
/// every `KeyboundError.Code`, what recovery it carries. These tests hold the article to the code,
/// so a new code or a changed recovery cannot leave the documentation behind.
@Suite struct ErrorTableArticleTests {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    private static func read(_ path: String) throws -> String {
        try String(contentsOf: repository.appendingPathComponent(path), encoding: .utf8)
    }

    /// The rows of every Markdown table in the article, as cells, header and rule rows left out.
    private static func tableRows() throws -> [[String]] {
        var rows: [[String]] = []
        var previousWasTable = false
        for line in try read("Sources/Keybound/Keybound.docc/ErrorTable.md").split(separator: "\n") {
            guard line.hasPrefix("|") else {
                previousWasTable = false
                continue
            }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let isRule = cells.allSatisfy { $0.allSatisfy { $0 == "-" || $0 == ":" } }
            // The first row of a table is its header.
            if previousWasTable && !isRule { rows.append(cells) }
            previousWasTable = true
        }
        return rows
    }

    /// The names between backticks in a cell, in order.
    private static func names(in cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// Every `static let … = Code(rawValue: …)` of KeyboundError.swift: the codes as written.
    private static func declaredCodes() throws -> [String] {
        try read("Sources/Keybound/KeyboundError.swift").split(separator: "\n").compactMap { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("public static let "), text.contains("= Code(rawValue:") else { return nil }
            return String(text.dropFirst("public static let ".count).prefix { $0 != " " })
        }
    }

    @Test func everyCodeHasOneRowWithTheRecoveryItCarries() throws {
        let codes = try Self.declaredCodes()
        #expect(codes.count >= 21, "KeyboundError.swift was not read as expected: \(codes)")
        let rows = try Self.tableRows().filter { $0.count == 4 }
        for code in codes {
            let matching = rows.filter { Self.names(in: $0[0]) == [code] }
            #expect(matching.count == 1, "the article has \(matching.count) rows for \(code)")
            guard let row = matching.first else { continue }
            let documented = Self.names(in: row[3]).first
            let actual = KeyboundError(KeyboundError.Code(rawValue: code)).recovery.rawValue
            #expect(documented == actual, "\(code): the article says \(documented ?? "nothing")")
        }
    }

    @Test func everyProblemCodeRowHasTheRecoveryTheClientGives() throws {
        let rows = try Self.tableRows().filter { $0.count == 2 && $0[0].contains("_") }
        #expect(!rows.isEmpty)
        for row in rows {
            let recovery = Self.names(in: row[1]).first
            for code in Self.names(in: row[0]) {
                let problem = Problem(status: 400, code: ProblemCode(rawValue: code), title: code, detail: "")
                let error = KeyboundClient.error(status: 400, body: problem.jsonData, retryAfter: nil)
                #expect(
                    error.recovery.rawValue == recovery, "\(code): the article says \(recovery ?? "nothing")")
            }
        }
    }
}
