import Foundation
import KeyboundTestSupport
import Testing

/// `keybound demo --json`, the real binary as a subprocess: every story against a real server
/// with production Argon2id settings, each step's outcome checked by the demo itself, and the
/// receipt it kept checked again here.
@Suite("keybound demo")
struct DemoTests {
    @Test(.timeLimit(.minutes(1)))
    func demoRunsEveryStoryAndEndsOK() async throws {
        let run = try await Subprocess.run(
            try KeyboundExecutable.url(), ["demo", "--json", "--keep-database"], timeout: 50)
        #expect(!run.timedOut, "the demo did not finish in time")
        #expect(!run.crashed, "the demo crashed: \(run.stderr)")
        #expect(run.status == 0, "exit \(run.status): \(run.stdout.suffix(2000)) \(run.stderr)")

        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: true)
        var events: [[String: Any]] = []
        for line in lines {
            let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
            events.append(try #require(parsed as? [String: Any], "not a JSON object: \(line)"))
        }
        // --keep-database keeps the demo's folder: its database, and the receipt of chapter 9.
        let scene = try #require(events.first { $0["event"] as? String == "step" }?["outcome"] as? String)
        let database = try #require(scene.range(of: "SQLite at ").map { String(scene[$0.upperBound...]) })
        let folder = URL(fileURLWithPath: database).deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: folder) }

        let end = try #require(events.last, "no output")
        #expect(end["event"] as? String == "end", "\(end)")
        #expect(end["ok"] as? Bool == true, "\(end)")
        #expect(end["steps"] as? Int == 51, "\(end)")
        #expect(end["error"] == nil, "\(end)")

        // The transcript agrees with the summary: 51 ok steps, numbered 1…51, in 11 chapters.
        let steps = events.filter { $0["event"] as? String == "step" }
        #expect(steps.count == 51)
        #expect(steps.compactMap { $0["step"] as? Int } == Array(1...51))
        #expect(steps.allSatisfy { $0["ok"] as? Bool == true })
        #expect(events.filter { $0["event"] as? String == "chapter" }.count == 11)
        // The operator console: Ada's password refused there, the run's traffic in the overview,
        // her device revoked (its next challenge refused), the change under the admin's name.
        let console = steps.filter {
            $0["chapter"] as? String == "10. The operator console: what happened, and what must go"
        }.compactMap { $0["outcome"] as? String }
        #expect(console.count == 6, "\(console)")
        if console.count == 6 {
            #expect(console[1].hasSuffix("Ada's right password there: 403 admin_required"))
            #expect(console[2].hasPrefix("logins: password ") && !console[2].contains(" 0,"), "\(console[2])")
            #expect(console[4] == "204; its next login challenge: 403 device_revoked")
            #expect(console[5].hasPrefix("device_revoked, by administrator usr_"))
        }
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

        // The wallet's back end asked through CIBA; the phone showed the whole transfer and who
        // asked; the poll got tokens for it and a receipt that verifies, and a copy changed by
        // one byte does not.
        let ciba = steps.filter {
            $0["chapter"] as? String
                == "9. The wallet's back end asks the phone: CIBA, and a receipt anyone can check"
        }.compactMap { $0["outcome"] as? String }
        #expect(ciba.count == 8, "\(ciba)")
        if ciba.count == 8 {
            #expect(ciba[2] == "400 authorization_pending: Ada has not decided yet")
            #expect(
                ciba[3].contains("from Acme wallet")
                    && ciba[3].contains("0.5 ETH to \(ApprovalTests.grouped)"))
            #expect(ciba[4] == "approved")
            #expect(
                ciba[5].hasPrefix("200: authorization_details exactly as asked")
                    && ciba[5].contains("amr [hwk]"))
            #expect(ciba[6].hasPrefix("exit 0, verified: transfer 0.5 ETH to \(ApprovalTests.recipient)"))
            #expect(ciba[7].hasPrefix("exit 1: step 1 (the issuer's signature) failed"), "\(ciba[7])")
        }
        // What the back end kept, checked by the CLI on its own.
        for file in ["receipt.jwt", "receipt-tampered.jwt", "jwks.json"] {
            try #require(
                FileManager.default.fileExists(atPath: folder.appendingPathComponent(file).path),
                "the demo kept no \(file)")
        }
        func verify(_ file: String) async throws -> (Subprocess.Run, [String: Any]) {
            let run = try await Subprocess.run(
                try KeyboundExecutable.url(),
                [
                    "receipt", "verify", folder.appendingPathComponent(file).path, "--jwks",
                    folder.appendingPathComponent("jwks.json").path, "--json",
                ], timeout: 10)
            let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8))
            return (run, try #require(json as? [String: Any], "\(run.stdout) \(run.stderr)"))
        }
        let (kept, receipt) = try await verify("receipt.jwt")
        #expect(kept.status == 0 && receipt["ok"] as? Bool == true, "\(kept.stdout) \(kept.stderr)")
        let action = try #require(receipt["action"] as? [String: Any], "\(receipt)")
        #expect(action["amount"] as? String == "0.5" && action["asset"] as? String == "ETH")
        #expect(action["to"] as? String == ApprovalTests.recipient)
        #expect(receipt["binding_message"] as? String == "Acme wallet withdrawal W-1042")
        #expect(receipt["device_attested"] as? Bool == true)
        let (copy, refusal) = try await verify("receipt-tampered.jwt")
        #expect(copy.status == 1 && refusal["ok"] as? Bool == false, "\(copy.stdout) \(copy.stderr)")
        #expect((refusal["error"] as? [String: Any])?["code"] as? String == "issuer_signature_invalid")
    }

    #if os(Linux)
        /// `keybound demo --device linux --json`: the Linux kiosk's stories on a TPM (swtpm) and the
        /// Secret Service (gnome-keyring) the demo starts and stops itself, each step checked by the
        /// demo; skipped, with one warning, where those programs are not installed.
        @Test(.timeLimit(.minutes(2)))
        func linuxDemoRunsOnTheRealBackends() async throws {
            let missing = Self.linuxDemoPrograms.filter { Self.onPath($0) == nil }
            guard missing.isEmpty else {
                Issue.record(
                    Comment(
                        rawValue:
                            "the Linux demo did not run: \(missing.joined(separator: ", ")) not installed "
                            + "(make test-deps: swtpm, dbus-daemon, gnome-keyring)"), severity: .warning)
                try Test.cancel()
            }
            let run = try await Subprocess.run(
                try KeyboundExecutable.url(), ["demo", "--device", "linux", "--json"], timeout: 100)
            #expect(!run.timedOut, "the demo did not finish in time")
            #expect(!run.crashed, "the demo crashed: \(run.stderr)")
            #expect(run.status == 0, "exit \(run.status): \(run.stdout.suffix(2000)) \(run.stderr)")
            #expect(run.stderr.isEmpty, "\(run.stderr)")

            var events: [[String: Any]] = []
            for line in run.stdout.split(separator: "\n", omittingEmptySubsequences: true) {
                let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
                events.append(try #require(parsed as? [String: Any], "not a JSON object: \(line)"))
            }
            let end = try #require(events.last, "no output")
            #expect(end["event"] as? String == "end" && end["ok"] as? Bool == true, "\(end)")
            let steps = events.filter { $0["event"] as? String == "step" }
            #expect(steps.count == 20, "\(steps.count) steps")
            #expect(steps.compactMap { $0["step"] as? Int } == Array(1...steps.count))
            #expect(events.filter { $0["event"] as? String == "chapter" }.count == 6)
            let outcomes = steps.compactMap { $0["outcome"] as? String }
            // A wrong PIN refused by the TPM, twice (a login, the app lock); the right one logs in
            // by the TPM-signed challenge; the TPM-signed approval is accepted once; removing the
            // PIN invalidates, and the old key is revoked when a new one is bound.
            #expect(outcomes.filter { $0 == "refused: authenticationFailed, recovery retry" }.count == 2)
            #expect(outcomes.contains("logged in, auth_method device"))
            #expect(outcomes.contains("approved"))
            #expect(outcomes.contains { $0.hasPrefix("refused: server (challenge_used)") }, "\(outcomes)")
            #expect(outcomes.contains("refused: invalidated, recovery reenroll"))
            #expect(outcomes.last?.hasPrefix("refused: server (device_revoked)") == true, "\(outcomes)")
            #expect(
                outcomes.contains { $0.contains("0.5 ETH to \(ApprovalTests.grouped)") })

            // What the demo started is gone with it: the TPM's port is closed, the keyring's folder deleted.
            let scene = try #require(outcomes.first { $0.hasPrefix("TPM at swtpm:") }, "\(outcomes)")
            let folder = try #require(
                scene.range(of: "keyring at unix:path=").map {
                    URL(fileURLWithPath: String(scene[$0.upperBound...])).deletingLastPathComponent()
                })
            #expect(!FileManager.default.fileExists(atPath: folder.path), "\(folder.path) is left")
        }

        /// Where a program the Linux demo starts is missing, the demo says so in one line, names
        /// its package, exits 1, and runs nothing on the emulator instead.
        @Test func linuxDemoNamesTheMissingProgramAndHowToInstallIt() async throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-demo-path-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            // A PATH with every program but gnome-keyring's (those that are installed here).
            for program in Self.linuxDemoPrograms.dropLast() {
                guard let installed = Self.onPath(program) else { continue }
                try FileManager.default.createSymbolicLink(
                    at: folder.appendingPathComponent(program), withDestinationURL: installed)
            }
            var environment = ProcessInfo.processInfo.environment
            environment["PATH"] = folder.path
            let run = try await Subprocess.run(
                try KeyboundExecutable.url(), ["demo", "--device", "linux"], environment: environment,
                timeout: 30)
            #expect(run.status == 1, "exit \(run.status): \(run.stdout) \(run.stderr)")
            #expect(run.stdout.isEmpty, "the demo ran something: \(run.stdout.prefix(500))")
            let lines = run.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(run.stderr)")
            let missing = Self.linuxDemoPrograms.first { Self.onPath($0, in: folder.path) == nil } ?? ""
            #expect(
                lines.first?.hasPrefix("keybound demo --device linux: \(missing) (") == true
                    && lines.first?.contains("is not installed: sudo apt-get install ") == true,
                "\(run.stderr)")
        }

        /// What the Linux demo starts, in the order it looks for them.
        private static let linuxDemoPrograms = ["swtpm", "dbus-daemon", "gnome-keyring-daemon"]

        /// `program` in the folders of `path` (default: ours), as a shell finds it.
        private static func onPath(
            _ program: String,
            in path: String = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        ) -> URL? {
            path.split(separator: ":").map {
                URL(fileURLWithPath: String($0)).appendingPathComponent(program)
            }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
        }
    #endif
}
