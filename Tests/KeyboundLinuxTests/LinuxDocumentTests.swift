#if os(Linux)
    import Foundation
    import Testing

    /// docs/linux.md's tables name, in their last column, the tests that prove each row: those
    /// tests exist, so renaming or deleting one cannot leave a row pointing at nothing.
    @Suite struct LinuxDocumentTests {
        private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()

        @Test func everyTestTheTablesNameExists() throws {
            let document = try String(
                contentsOf: Self.repository.appendingPathComponent("docs/linux.md"), encoding: .utf8)
            var named: Set<String> = []
            for line in document.split(separator: "\n") where line.hasPrefix("|") {
                let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                guard let last = cells.dropLast().last else { continue }
                let quoted = last.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                    .filter { $0.offset % 2 == 1 }.map { String($0.element) }
                named.formUnion(quoted.filter { $0.first?.isLowercase == true && $0.allSatisfy(\.isLetter) })
            }
            // Both tables name tests; a parse that finds few has gone wrong.
            #expect(named.count >= 15)
            let folder = Self.repository.appendingPathComponent("Tests/KeyboundLinuxTests")
            let sources = try FileManager.default.contentsOfDirectory(
                at: folder, includingPropertiesForKeys: nil
            )
            .filter { $0.pathExtension == "swift" }
            .map { try String(contentsOf: $0, encoding: .utf8) }
            .joined(separator: "\n")
            for test in named.sorted() {
                let exists = sources.contains("func \(test)(")
                #expect(exists, "docs/linux.md names \(test), which is no test in KeyboundLinuxTests")
            }
        }
    }
#endif
