import Foundation
import KeyboundTestSupport
import Testing

/// `keybound demo --json`, the real binary as a subprocess: every story against a real server
/// with production Argon2id settings, each step's outcome checked by the demo itself.
@Suite("keybound demo")
struct DemoTests {
    @Test(.timeLimit(.minutes(1)))
    func demoRunsEveryStoryAndEndsOK() async throws {
        let run = try await Subprocess.run(try KeyboundExecutable.url(), ["demo", "--json"], timeout: 50)
        #expect(!run.timedOut, "the demo did not finish in time")
        #expect(!run.crashed, "the demo crashed: \(run.stderr)")
        #expect(run.status == 0, "exit \(run.status): \(run.stdout.suffix(2000)) \(run.stderr)")

        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: true)
        var events: [[String: Any]] = []
        for line in lines {
            let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
            events.append(try #require(parsed as? [String: Any], "not a JSON object: \(line)"))
        }
        let end = try #require(events.last, "no output")
        #expect(end["event"] as? String == "end", "\(end)")
        #expect(end["ok"] as? Bool == true, "\(end)")
        #expect(end["steps"] as? Int == 31, "\(end)")
        #expect(end["error"] == nil, "\(end)")

        // The transcript agrees with the summary: 31 ok steps, numbered 1…31, in 8 chapters.
        let steps = events.filter { $0["event"] as? String == "step" }
        #expect(steps.count == 31)
        #expect(steps.compactMap { $0["step"] as? Int } == Array(1...31))
        #expect(steps.allSatisfy { $0["ok"] as? Bool == true })
        #expect(events.filter { $0["event"] as? String == "chapter" }.count == 8)
        #expect(
            steps.contains {
                ($0["outcome"] as? String)?.contains("0.5 ETH to \(ApprovalTests.grouped)") == true
            })
        // The passkey and App Attest chapter: Grace signs up and in by passkey; the genuine app's
        // attested binding is accepted and the other app's refused for its App ID.
        let lastChapter = steps.filter { $0["chapter"] as? String == "7. Passkeys and App Attest" }
        #expect(lastChapter.count == 4)
        #expect((lastChapter.first?["outcome"] as? String)?.contains("auth_method passkey") == true)
        #expect(
            (lastChapter.last?["outcome"] as? String)?.contains("refused: server (rp_id_mismatch)") == true)
    }
}
