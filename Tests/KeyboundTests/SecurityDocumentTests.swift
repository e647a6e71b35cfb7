import Foundation
import Testing

/// SECURITY.md maps every claim to the tests that prove it, written `Suite.test` (or a whole
/// `Suite`). This holds the document to the tests: renaming or deleting a test cannot leave a
/// claim pointing at nothing.
@Suite struct SecurityDocumentTests {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// A test named in SECURITY.md: its suite, and the test function unless the whole suite is meant.
    struct Reference: CustomStringConvertible {
        let suite: String
        let test: String?
        var description: String { test.map { "\(suite).\($0)" } ?? suite }
    }

    /// Every name between backticks in SECURITY.md that is a suite (`…Tests`) or a suite's test.
    static func references() throws -> [Reference] {
        let text = try String(contentsOf: repository.appendingPathComponent("SECURITY.md"), encoding: .utf8)
        let quoted = text.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map(\.element)
        return quoted.compactMap { name in
            let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.count <= 2, let suite = parts.first, suite.hasSuffix("Tests"),
                suite.first?.isUppercase == true, parts.allSatisfy(isIdentifier)
            else { return nil }
            return Reference(suite: suite, test: parts.count == 2 ? parts[1] : nil)
        }
    }

    private static func isIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
    }

    /// The bodies of every `struct` declared in Tests/ and of its extensions, by name: from the
    /// declaration to the closing brace at the same indentation. A name declared in several
    /// targets has several bodies.
    static func suiteBodies() throws -> [String: [String]] {
        let tests = repository.appendingPathComponent("Tests")
        guard let files = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil) else {
            return [:]
        }
        var bodies: [String: [String]] = [:]
        for case let file as URL in files where file.pathExtension == "swift" {
            let lines = try String(contentsOf: file, encoding: .utf8)
                .split(separator: "\n", omittingEmptySubsequences: false)
            for (index, line) in lines.enumerated() {
                let indent = line.prefix { $0 == " " }
                var declaration = line.dropFirst(indent.count)
                if declaration.hasPrefix("@Suite struct ") {
                    declaration = declaration.dropFirst("@Suite ".count)
                }
                guard let keyword = ["struct ", "extension "].first(where: { declaration.hasPrefix($0) })
                else {
                    continue
                }
                let name = declaration.dropFirst(keyword.count).prefix {
                    $0.isLetter || $0.isNumber || $0 == "_"
                }
                let closing = indent + "}"
                let end = lines[index...].firstIndex { $0 == closing } ?? lines.endIndex
                bodies[String(name), default: []].append(lines[index..<end].joined(separator: "\n"))
            }
        }
        return bodies
    }

    @Test func everyTestSecurityMDNamesExists() throws {
        let references = try Self.references()
        // The document names far more than this; a parse that finds few has gone wrong.
        #expect(references.count > 80)
        let bodies = try Self.suiteBodies()
        for reference in references {
            let suites = bodies[reference.suite] ?? []
            #expect(
                !suites.isEmpty, "SECURITY.md names \(reference), but Tests/ declares no \(reference.suite)")
            if let test = reference.test, !suites.isEmpty {
                #expect(
                    suites.contains { $0.contains("func \(test)(") },
                    "SECURITY.md names \(reference), but \(reference.suite) has no test \(test)")
            }
        }
    }
}
