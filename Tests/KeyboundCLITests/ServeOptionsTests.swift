import Foundation
import Testing

/// `keybound serve`'s options are declared once (Sources/keybound/ServeCommand.swift): its help
/// shows what each takes and its default, parsing enforces exactly what the help shows, and
/// docs/server.md's tables list the same options, variables and defaults.
@Suite("keybound serve options")
struct ServeOptionsTests {
    /// One option as `keybound serve --help` shows it.
    struct HelpEntry {
        let flag: String
        let variable: String?
        /// What it takes (`60-86400`, `full or normal`), if the help says.
        let accepted: String?
        let defaultText: String?
    }

    /// The options of `keybound serve --help`: an option line, then its detail line
    /// (`60-86400, default 900`) indented under the summary.
    static func helpEntries() throws -> [HelpEntry] {
        let reply = try Sandbox().run(["serve", "--help"])
        #expect(reply.status == 0, "\(reply.stderr)")
        let lines = reply.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        return lines.indices.filter { lines[$0].hasPrefix("  --") }.map { index in
            let words = lines[index].split(separator: " ").map(String.init)
            let next = index + 1 < lines.count ? lines[index + 1] : ""
            let detail = next.hasPrefix("   ") ? next.trimmingCharacters(in: .whitespaces) : nil
            let parts = detail?.components(separatedBy: "default ")
            return HelpEntry(
                flag: words[0], variable: words.first { $0.hasPrefix("KEYBOUND_") },
                accepted: parts.flatMap { $0.count == 2 && !$0[0].isEmpty ? String($0[0].dropLast(2)) : nil },
                defaultText: parts.flatMap { $0.count == 2 ? $0[1] : nil })
        }
    }

    @Test func helpShowsEveryOptionsDefaultAndVariable() throws {
        let entries = try Self.helpEntries().filter { $0.flag != "--help" }
        #expect(entries.count >= 35)
        for entry in entries {
            #expect(entry.defaultText?.isEmpty == false, "\(entry.flag) shows no default")
            let expected =
                "KEYBOUND_" + entry.flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
            #expect(entry.variable == expected, "\(entry.flag)")
        }
        let byFlag = Dictionary(entries.map { ($0.flag, $0) }) { first, _ in first }
        #expect(byFlag["--access-token-ttl"]?.accepted == "60-86400")
        #expect(byFlag["--access-token-ttl"]?.defaultText == "900")
        #expect(byFlag["--sqlite-synchronous"]?.accepted == "full or normal")
        #expect(byFlag["--sqlite-synchronous"]?.defaultText == "full")
        #expect(byFlag["--listen"]?.defaultText == "127.0.0.1:8420")
    }

    /// The OAuth 2.0 and OpenID Connect settings have a section of their own, with their
    /// defaults; the key that seals the signing keys is named, and comes from the environment only.
    @Test func helpShowsTheOAuthSection() throws {
        let reply = try Sandbox().run(["serve", "--help"])
        let parts = reply.text.components(separatedBy: "\nOAuth 2.0 and OpenID Connect (docs/oauth.md):\n")
        #expect(parts.count == 2, "\(reply.text)")
        let section = parts.last?.components(separatedBy: "\n\n").first ?? ""
        let flags = section.split(separator: "\n").filter { $0.hasPrefix("  --") }.compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
        #expect(
            flags == ["--issuer", "--key-publish-delay", "--ciba-interval", "--android-app"], "\(section)")
        let byFlag = Dictionary(try Self.helpEntries().map { ($0.flag, $0) }) { first, _ in first }
        #expect(byFlag["--issuer"]?.defaultText == "off")
        #expect(byFlag["--key-publish-delay"]?.accepted == "0-604800")
        #expect(byFlag["--key-publish-delay"]?.defaultText == "600")
        #expect(
            byFlag["--ciba-interval"]?.accepted == "1-60" && byFlag["--ciba-interval"]?.defaultText == "5")
        #expect(byFlag["--android-app"]?.accepted == "repeatable")
        #expect(byFlag["--android-app"]?.defaultText == "none")
        #expect(reply.text.contains("KEYBOUND_KEY_ENCRYPTION_KEY (32 bytes, base64)"))
        let flag = try Sandbox().run(["serve", "--key-encryption-key", "x"])
        #expect(
            flag.status == 2 && flag.stderr.contains("unknown option --key-encryption-key"), "never a flag")
    }

    /// Every range the help shows is the one parsing enforces: both bounds are accepted, one past
    /// either is refused (exit 2) with a message that names the range. A bound that is accepted
    /// lets parsing reach the rule that `--tls-cert` needs `--tls-key`, so no server starts.
    @Test func parsingEnforcesTheRangesTheHelpShows() throws {
        let sandbox = try Sandbox()
        let ranges = try Self.helpEntries().compactMap { entry -> (String, Int, Int)? in
            let bounds = entry.accepted?.split(separator: "-").compactMap { Int($0) } ?? []
            return bounds.count == 2 ? (entry.flag, bounds[0], bounds[1]) : nil
        }
        #expect(ranges.count >= 19)
        for (flag, low, high) in ranges {
            for accepted in [low, high] {
                let reply = try sandbox.run(["serve", flag, "\(accepted)", "--tls-cert", "only.pem"])
                #expect(
                    reply.status == 2 && reply.stderr.contains("--tls-key go together"),
                    "\(flag) \(accepted): \(reply.stderr)")
            }
            for refused in [low - 1, high + 1] {
                let reply = try sandbox.run(["serve", flag, "\(refused)"])
                #expect(reply.status == 2, "\(flag) \(refused)")
                #expect(
                    reply.stderr.contains("\(flag) must be an integer from \(low) to \(high)"),
                    "\(reply.stderr)")
            }
        }
        // The choices the help shows are the ones parsing takes.
        for entry in try Self.helpEntries() {
            guard let accepted = entry.accepted, accepted.contains(" or ") else { continue }
            for choice in accepted.components(separatedBy: " or ") {
                let reply = try sandbox.run(["serve", entry.flag, choice, "--tls-cert", "only.pem"])
                #expect(
                    reply.stderr.contains("--tls-key go together"), "\(entry.flag) \(choice): \(reply.stderr)"
                )
            }
            let reply = try sandbox.run(["serve", entry.flag, "bogus"])
            #expect(
                reply.status == 2 && reply.stderr.contains("\(entry.flag) must be \(accepted)"),
                "\(reply.stderr)")
        }
    }

    /// docs/server.md's option tables (flag, variable, default) and `keybound serve --help` list
    /// the same options, with the same variables and defaults. A default the help computes on
    /// this machine shows as `note: value`, and the table gives the note.
    @Test func docsTablesMatchTheHelp() throws {
        let help = Dictionary(try Self.helpEntries().filter { $0.flag != "--help" }.map { ($0.flag, $0) }) {
            a, _ in a
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/server.md"), encoding: .utf8)
        var documented: [String: (variable: String, defaultText: String)] = [:]
        for line in document.split(separator: "\n") where line.hasPrefix("| `--") {
            // Cells are separated by | that is not escaped (`full\|normal`).
            let cells = line.replacingOccurrences(of: "\\|", with: "\u{0}").split(separator: "|")
                .map { $0.replacingOccurrences(of: "\u{0}", with: "|").trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3 else { continue }
            let flags = Self.codeSpans(cells[0]).compactMap {
                $0.split(separator: " ").first.map(String.init)
            }
            let variables = Self.codeSpans(cells[1]).map { $0.replacingOccurrences(of: "=1", with: "") }
            let defaultText = cells[2].replacingOccurrences(of: "`", with: "")
            #expect(flags.count == variables.count, "\(line)")
            for (flag, variable) in zip(flags, variables) { documented[flag] = (variable, defaultText) }
        }
        #expect(Set(documented.keys) == Set(help.keys))
        for (flag, row) in documented {
            guard let entry = help[flag] else { continue }
            #expect(entry.variable == row.variable, "\(flag)")
            let shown = entry.defaultText ?? ""
            #expect(
                shown == row.defaultText || shown.hasPrefix(row.defaultText + ": "),
                "\(flag): help \(shown), docs \(row.defaultText)")
        }
    }

    /// The contents of a table cell's code spans: `--tls-cert FILE` / `--tls-key FILE`.
    static func codeSpans(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter {
            $0.offset % 2 == 1
        }
        .map { String($0.element) }
    }
}
