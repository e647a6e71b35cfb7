import Foundation
import Keybound
import KeyboundEmulator
import KeyboundTestSupport
import Testing

/// Passes every call to the emulated device and keeps the prompts it was asked to show.
actor RecordingVerifier: UserVerifier {
    let device: EmulatedDevice
    private(set) var prompts: [VerificationPrompt] = []

    init(_ device: EmulatedDevice) { self.device = device }

    func availability() async -> VerificationAvailability { await device.availability() }

    func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
        prompts.append(prompt)
        return try await device.verify(policy, prompt: prompt)
    }
}

/// What you see is what you sign: the app's own confirmation of the parsed payload is a required
/// step, it shows the whole recipient, and nothing but the exact issued bytes is accepted.
@Suite("Story 3: the confirmation step")
struct ConfirmationStepTests {
    @Test func theWholeRecipientIsInWhatTheAppShowsAndInThePromptReason() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let bound = try await ApprovalTests.bound(backend, phone)
        let recorder = RecordingVerifier(phone)
        let approvals = try TransactionApproval(
            client: bound.app.client, device: DeviceBackends(store: phone, vault: phone, verifier: recorder),
            deviceID: bound.deviceID, serverID: Backend.serverID, keyName: "acme-deviceKey.device-key",
            clock: backend.clientClock)

        // The longest transfer the wire allows: 49-character amount, 16-character asset,
        // 128-character recipient. Two recipients that agree in their first 6 and last 4
        // characters (what shortening used to show) must look different.
        let amount = String(repeating: "9", count: 30) + "." + String(repeating: "9", count: 18)
        let asset = "ABCDEFGHIJKLMNOP"
        let genuine = "0x" + String(repeating: "a1b2c3d4", count: 15) + "e5f6a7"
        let lookalike = "0x" + String(repeating: "a1b2c3d4", count: 14) + "0000c3d4" + "e5f6a7"
        #expect(genuine.count == 128 && lookalike.count == 128)
        for recipient in [genuine, lookalike, ApprovalTests.recipient] {
            let action = ApprovalAction.transfer(
                try TransferAction(amount: DecimalAmount(amount), asset: asset, to: recipient))
            let pending = try await approvals.request(action)
            // What the confirmation screen shows: the whole recipient, exactly, and grouped.
            #expect(pending.recipient == recipient)
            #expect(pending.amount.text == amount)
            #expect(pending.asset == asset)
            #expect(pending.groupedRecipient.replacingOccurrences(of: " ", with: "") == recipient)
            #expect(pending.groupedRecipient.split(separator: " ").allSatisfy { $0.count <= 4 })
            #expect(pending.promptText == "Send \(amount) \(asset) to \(pending.groupedRecipient)")

            await phone.present(.match)
            #expect(try await approvals.approve(pending.confirm()).status == .approved)
            // The reason the system was given holds the whole recipient too.
            let reason = try #require(await recorder.prompts.last?.reason)
            #expect(reason == pending.promptText)
            #expect(reason.contains(pending.groupedRecipient))
        }
        let reasons = await recorder.prompts.map(\.reason)
        #expect(reasons[0] != reasons[1], "the lookalike recipient reads differently")
        #expect(!reasons.joined().contains("…"), "nothing is shortened")
    }

    /// Every byte of the payload counts: a payload altered by one byte is refused, by the SDK
    /// before any prompt when it is no longer a payload for this server and device, and by the
    /// server otherwise — the user would have seen the altered text, the server accepts only the
    /// bytes it issued.
    @Test func aPayloadAlteredByOneByteIsRefused() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let bound = try await ApprovalTests.bound(backend, phone)
        let action = try ApprovalTests.transfer("0.5")

        /// `bytes` with the first occurrence of `find` replaced by `replace` (one byte differs).
        func alter(_ bytes: Data, _ find: String, _ replace: String) throws -> Data {
            let text = String(decoding: bytes, as: UTF8.self)
            let range = try #require(text.range(of: find), "\(find) is in the payload")
            let altered = Data(text.replacingCharacters(in: range, with: replace).utf8)
            #expect(altered.count == bytes.count)
            #expect(zip(altered, bytes).filter { $0 != $1 }.count == 1, "one byte altered: \(find)")
            return altered
        }
        /// `bytes` with the character right after `prefix` changed.
        func alter(_ bytes: Data, after prefix: String) throws -> Data {
            let text = String(decoding: bytes, as: UTF8.self)
            let start = try #require(text.range(of: prefix), "\(prefix) is in the payload").upperBound
            let original = text[start]
            return try alter(bytes, prefix + String(original), prefix + (original == "A" ? "B" : "A"))
        }

        // Refused on the device, before any prompt: the payload no longer parses, or is for
        // another purpose, server or device, or has expired.
        let pending = try await bound.approvals.request(action)
        let refusedOnTheDevice = [
            try alter(pending.payloadBytes, after: "{\"keybound\":"),
            try alter(pending.payloadBytes, after: "\"purpose\":\""),
            try alter(pending.payloadBytes, after: "\"server\":\""),
            try alter(pending.payloadBytes, after: "\"device\":\""),
            try alter(pending.payloadBytes, "\"expires\":\"2", "\"expires\":\"1"),
            try alter(pending.payloadBytes, "\"server\":\"", "\"server\":'"),
            try alter(pending.payloadBytes, "}}", "}]"),
        ]
        for altered in refusedOnTheDevice {
            await expectKeyboundError(.payloadMismatch, "\(String(decoding: altered, as: UTF8.self))") {
                try bound.approvals.check(approvalID: pending.approvalID, payload: altered)
            }
        }

        // Still a payload for this device: what it says is what the confirmation screen shows
        // (the altered amount or recipient), and the server refuses the signature over it.
        let changes: [(String, String, (PendingApproval) -> Bool)] = [
            ("\"amount\":\"0.5\"", "\"amount\":\"0.6\"", { $0.amount.text == "0.6" }),
            ("5fef\"", "5fee\"", { $0.recipient == String(ApprovalTests.recipient.dropLast()) + "e" }),
            ("\"asset\":\"ETH\"", "\"asset\":\"ETG\"", { $0.asset == "ETG" }),
        ]
        for (find, replace, shows) in changes {
            let issued = try await bound.approvals.request(action)
            let altered = try bound.approvals.check(
                approvalID: issued.approvalID, payload: try alter(issued.payloadBytes, find, replace))
            #expect(shows(altered), "the app shows what the altered bytes say: \(altered.promptText)")
            #expect(altered.action != action)
            await phone.present(.match)
            await expectKeyboundError(.server, serverCode: .signatureInvalid) {
                try await bound.approvals.approve(altered.confirm())
            }
            #expect(try await bound.app.client.approval(issued.approvalID).status == .failed)
        }

        // One byte of the challenge: the device cannot tell, the server can.
        let issued = try await bound.approvals.request(action)
        let altered = try bound.approvals.check(
            approvalID: issued.approvalID, payload: try alter(issued.payloadBytes, after: "\"challenge\":\""))
        #expect(altered.action == action)
        await phone.present(.match)
        await expectKeyboundError(.server, serverCode: .signatureInvalid) {
            try await bound.approvals.approve(altered.confirm())
        }
    }

    /// A payload that expired while the confirmation screen was up is refused before the prompt.
    @Test func aPayloadThatExpiredOnTheConfirmationScreenIsNotSigned() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let bound = try await ApprovalTests.bound(backend, phone)
        let pending = try await bound.approvals.request(try ApprovalTests.transfer("0.5"))
        backend.clock.advance(by: 301)
        await phone.present(.match)
        await expectKeyboundError(.payloadMismatch) { try await bound.approvals.sign(pending.confirm()) }
        #expect(await phone.snapshot().queuedOutcomes == 1, "no prompt for an expired payload")
    }

    /// The type system is the guard: `sign` and `approve` take only a `ConfirmedApproval`, and
    /// only `PendingApproval.confirm()` makes one. Checked by compiling app code against the
    /// built `Keybound` module.
    @Test func signingWithoutTheConfirmationStepDoesNotCompile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-typecheck-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let confirmed = """
            import Keybound
            func approve(_ approvals: TransactionApproval, _ pending: PendingApproval) async throws {
                _ = try await approvals.sign(pending.confirm())
                _ = try await approvals.approve(pending.confirm())
            }
            """
        let compiled = try await typecheck(confirmed, in: directory)
        #expect(compiled.status == 0, "the confirmed path compiles: \(compiled.stderr)")

        // Each attempt in its own function: the compiler reports every one of them.
        let attempts = [
            "_ = try await approvals.sign(pending)",
            "_ = try await approvals.approve(pending)",
            "_ = try await approvals.sign(ConfirmedApproval(pending))",
            "_ = try await approvals.sign(ConfirmedApproval(pending: pending))",
        ]
        var source = "import Keybound\n"
        var lines: [Int] = []
        for (index, attempt) in attempts.enumerated() {
            source +=
                "func attempt\(index)(_ approvals: TransactionApproval, _ pending: PendingApproval) async throws {\n"
            lines.append(source.split(separator: "\n", omittingEmptySubsequences: false).count)
            source += "    \(attempt)\n}\n"
        }
        let run = try await typecheck(source, in: directory)
        #expect(run.status != 0, "none of the attempts may compile")
        for (attempt, line) in zip(attempts, lines) {
            #expect(run.stderr.contains("App.swift:\(line):"), "\(attempt) must not compile: \(run.stderr)")
        }
        #expect(!run.stderr.contains("no such module"), "\(run.stderr)")
    }

    /// Type-checks `source` against the modules SwiftPM built beside the `keybound` executable,
    /// with a module cache in `directory` (shared by the calls of one test: the second is fast).
    private func typecheck(_ source: String, in directory: URL) async throws -> Subprocess.Run {
        let modules = try KeyboundExecutable.url().deletingLastPathComponent().appendingPathComponent(
            "Modules")
        let swiftc = try #require(
            (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
                .map { URL(fileURLWithPath: String($0)).appendingPathComponent("swiftc") }
                .first { FileManager.default.isExecutableFile(atPath: $0.path) },
            "swiftc is not on PATH")
        let file = directory.appendingPathComponent("App.swift")
        try Data(source.utf8).write(to: file)
        return try await Subprocess.run(
            swiftc,
            [
                "-typecheck", "-swift-version", "6", "-I", modules.path, "-module-cache-path",
                directory.appendingPathComponent("cache").path, file.path,
            ], timeout: 120)
    }
}
