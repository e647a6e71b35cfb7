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
        #expect(end["steps"] as? Int == 37, "\(end)")
        #expect(end["error"] == nil, "\(end)")

        // The transcript agrees with the summary: 37 ok steps, numbered 1…37, in 9 chapters.
        let steps = events.filter { $0["event"] as? String == "step" }
        #expect(steps.count == 37)
        #expect(steps.compactMap { $0["step"] as? Int } == Array(1...37))
        #expect(steps.allSatisfy { $0["ok"] as? Bool == true })
        #expect(events.filter { $0["event"] as? String == "chapter" }.count == 9)
        #expect(
            steps.contains {
                ($0["outcome"] as? String)?.contains("0.5 ETH to \(ApprovalTests.grouped)") == true
            })
        // The passkey and App Attest chapter: Grace signs up and in by passkey; the genuine app's
        // attested binding is accepted and the other app's refused for its App ID.
        let passkeyChapter = steps.filter { $0["chapter"] as? String == "7. Passkeys and App Attest" }
        #expect(passkeyChapter.count == 4)
        #expect((passkeyChapter.first?["outcome"] as? String)?.contains("auth_method passkey") == true)
        #expect(
            (passkeyChapter.last?["outcome"] as? String)?.contains("refused: server (rp_id_mismatch)") == true
        )
        // The web app signs Grace in through OpenID Connect with her passkey; the phone's session
        // is DPoP-bound, and a copy of its token is refused.
        let oidc = steps.filter {
            $0["chapter"] as? String == "8. OpenID Connect for the web app, DPoP for the phone"
        }
        #expect(oidc.count == 6)
        #expect(oidc.contains { ($0["outcome"] as? String)?.contains("amr [user]") == true })
        #expect((oidc.last?["outcome"] as? String)?.hasPrefix("401 both times") == true)
    }
}
