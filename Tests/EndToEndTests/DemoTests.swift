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
        #expect(end["steps"] as? Int == 27, "\(end)")
        #expect(end["error"] == nil, "\(end)")

        // The transcript agrees with the summary: 27 ok steps, numbered 1…27, in 7 chapters.
        let steps = events.filter { $0["event"] as? String == "step" }
        #expect(steps.count == 27)
        #expect(steps.compactMap { $0["step"] as? Int } == Array(1...27))
        #expect(steps.allSatisfy { $0["ok"] as? Bool == true })
        #expect(events.filter { $0["event"] as? String == "chapter" }.count == 7)
        #expect(
            steps.contains {
                ($0["outcome"] as? String)?.contains("0.5 ETH to \(ApprovalTests.grouped)") == true
            })
    }
}
