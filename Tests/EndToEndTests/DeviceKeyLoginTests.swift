import Foundation
import KeyboundCrypto
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import Keybound

/// Story 2: device binding and challenge–response login with the bound key.
@Suite("Story 2: device binding and device-key login")
struct DeviceKeyLoginTests {
    @Test func bindThenRelaunchAndLogInWithTheDeviceKey() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let userID = try await backend.createUser("ada")

        let first = try backend.app(.deviceKey, device: phone)
        #expect(try await first.boundDeviceID() == nil)
        #expect(try await first.state() == .notEnabled)
        try await first.loginWithPassword(username: "ada", password: Backend.password)
        try await first.enable()
        #expect(try await first.state() == .enabled(.faceID))
        let deviceID = try #require(try await first.boundDeviceID())
        let devices = try await first.client.devices()
        #expect(devices.map(\.deviceID) == [deviceID])
        #expect(devices.first?.status == .active)
        #expect(devices.first?.keyProtection == .emulator)
        // The server got the public key; the private one never left the emulated secure element.
        let publicKey = try await phone.publicKey("acme-deviceKey.device-key")
        #expect((try? P256PublicKey(spkiDER: publicKey)) != nil)

        let relaunched = try backend.app(.deviceKey, device: phone)
        await phone.present(.match)
        let session = try await relaunched.unlock()
        let me = try await relaunched.client.me()
        #expect(me.authMethod == .device)
        #expect(me.userID == userID)
        #expect(session.sessionID == me.sessionID)
        #expect(try await relaunched.client.devices().first?.lastUsedAt != nil)
    }

    @Test func noMatchMeansNoSignatureAndNoSession() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        _ = try await backend.enabledApp(.deviceKey, device: phone)
        let loginsBefore = try await backend.requests(API.deviceLogin)

        let relaunched = try backend.app(.deviceKey, device: phone)
        // Someone else's face, twice, and once more after Face ID offered the fallback button:
        // the evaluation fails; nothing was signed or sent.
        await phone.present(.noMatch, .noMatch, .noMatch)
        await expectKeyboundError(.authenticationFailed, recovery: .retry) { try await relaunched.unlock() }
        // Nothing queued: the prompt is dismissed.
        await expectKeyboundError(.userCancel, recovery: .silent) { try await relaunched.unlock() }
        #expect(await relaunched.client.currentSession == nil)
        #expect(try await backend.requests(API.deviceLogin) == loginsBefore)

        // A patched app signs the server's challenge without asking the OS: the key refuses,
        // with no verification and with a forged one.
        let deviceID = try #require(try await relaunched.boundDeviceID())
        let challenge = try await relaunched.client.loginChallenge(deviceID: deviceID)
        let keys = ProtectedKeys(vault: phone, markers: phone, verifier: phone)
        await expectKeyboundError(.authenticationFailed) {
            try await keys.sign(challenge.payload, with: "acme-deviceKey.device-key", verification: nil)
        }
        let forged = Verification(
            id: "ffeeddccbbaa99887766554433221100", factors: [.biometry], verifiedAt: Date(),
            reuseDuration: 300)
        await expectKeyboundError(.authenticationFailed) {
            try await keys.sign(challenge.payload, with: "acme-deviceKey.device-key", verification: forged)
        }
        // A signature by another key (the attacker's own) for this device's challenge.
        let attackerKey = try P256SigningKey()
        let foreign = try attackerKey.signature(for: challenge.payload).derRepresentation
        await expectKeyboundError(.server, serverCode: .signatureInvalid) {
            try await relaunched.client.loginWithDevice(
                challengeID: challenge.challengeID, signature: foreign)
        }
        #expect(await relaunched.client.currentSession == nil)

        // The owner still logs in.
        await phone.present(.match)
        try await relaunched.unlock()
        #expect(try await relaunched.client.me().authMethod == .device)
    }

    /// The app is configured for one server; a challenge issued by another (a phishing proxy
    /// relaying someone else's server) is refused before any prompt is shown.
    @Test func aChallengeFromAnotherServerIsRefusedBeforeThePrompt() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        _ = try await backend.enabledApp(.deviceKey, device: phone)

        let misdirected = try backend.app(.deviceKey, device: phone, serverID: "bank.example")
        await phone.present(.match)
        await expectKeyboundError(.payloadMismatch) { try await misdirected.unlock() }
        #expect(await misdirected.client.currentSession == nil)
        #expect(await phone.snapshot().queuedOutcomes == 1, "no prompt may be shown for a foreign payload")
        #expect(try await backend.requests(API.deviceLogin) == 0)
    }

    /// The payload checks of ``TransactionApproval/check(approvalID:payload:)`` on hand-made
    /// `SigningPayload` bytes: purpose, server, device, expiry, canonical form.
    @Test func payloadChecksOnHandMadePayloads() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try await backend.enabledApp(.deviceKey, device: phone)
        let deviceID = try #require(try await app.boundDeviceID())
        let approvals = try TransactionApproval(
            client: app.client, device: DeviceBackends(phone), deviceID: deviceID, serverID: Backend.serverID,
            keyName: "acme-deviceKey.device-key", clock: backend.clientClock)
        let now = backend.clock.now
        let transfer = ApprovalAction.transfer(
            try TransferAction(
                amount: DecimalAmount("0.5"), asset: "ETH", to: "0x12a4c8b2e19d7f3a5c6b8e0d4f2a1b3c9d7e5fef"))
        func payload(
            purpose: SigningPayload.Purpose = .approve, server: String = Backend.serverID,
            device: String? = nil, expires: Date? = nil, action: ApprovalAction? = nil
        ) throws -> Data {
            try SigningPayload(
                purpose: purpose, server: server, device: device ?? deviceID,
                challenge: Data(repeating: 7, count: 32), expires: expires ?? now.addingTimeInterval(300),
                action: purpose == .approve ? (action ?? transfer) : nil
            ).bytes
        }

        // The well-formed one passes, and its prompt is built from what it says.
        let good = try approvals.check(approvalID: "apr_hand", payload: try payload())
        #expect(good.promptText == "Send 0.5 ETH to \(ApprovalTests.grouped)")
        #expect(good.payload.action == transfer)

        await expectKeyboundError(.payloadMismatch, "a login challenge presented for approval") {
            try approvals.check(approvalID: "apr_hand", payload: try payload(purpose: .login))
        }
        await expectKeyboundError(.payloadMismatch, "another server") {
            try approvals.check(approvalID: "apr_hand", payload: try payload(server: "bank.example"))
        }
        await expectKeyboundError(.payloadMismatch, "another device") {
            try approvals.check(approvalID: "apr_hand", payload: try payload(device: "dev_someoneelse"))
        }
        await expectKeyboundError(.payloadMismatch, "expired") {
            try approvals.check(
                approvalID: "apr_hand", payload: try payload(expires: now.addingTimeInterval(-1)))
        }
        await expectKeyboundError(.payloadMismatch, "expires exactly now") {
            try approvals.check(approvalID: "apr_hand", payload: try payload(expires: now))
        }
        // Not canonical: a space the server never writes, members reordered, an extra member.
        let canonical = String(decoding: try payload(), as: UTF8.self)
        for variant in [
            canonical.replacingOccurrences(of: "\"purpose\":", with: "\"purpose\": "),
            canonical.replacingOccurrences(of: "{\"keybound\":1,", with: "{").replacingOccurrences(
                of: "\"purpose\":\"approve\",", with: "\"purpose\":\"approve\",\"keybound\":1,"),
            canonical.replacingOccurrences(of: "{\"keybound\":1,", with: "{\"keybound\":1,\"extra\":1,"),
            "not json",
        ] {
            #expect(variant != canonical)
            await expectKeyboundError(.payloadMismatch, "\(variant)") {
                try approvals.check(approvalID: "apr_hand", payload: Data(variant.utf8))
            }
        }

        // A real login challenge from the server, slipped in as an "approval": refused.
        let challenge = try await app.client.loginChallenge(deviceID: deviceID)
        await expectKeyboundError(.payloadMismatch) {
            try approvals.check(approvalID: "apr_hand", payload: challenge.payload)
        }

        // A payload that was fine expires while it waits: by the client's clock, 5 min later.
        let pending = try await approvals.request(transfer)
        backend.clock.advance(by: 301)
        await expectKeyboundError(.payloadMismatch) {
            try approvals.check(approvalID: pending.approvalID, payload: pending.payloadBytes)
        }
        #expect(await phone.snapshot().queuedOutcomes == 0)
    }

    /// The same checks on the login side: the one `unlock()` runs on the server's challenge
    /// before it prompts (internal, so reached with `@testable`).
    @Test func loginPayloadChecksOnHandMadePayloads() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func payload(
            purpose: SigningPayload.Purpose = .login, server: String = Backend.serverID,
            device: String = "dev_mine", expires: Date? = nil
        ) throws -> Data {
            try SigningPayload(
                purpose: purpose, server: server, device: device, challenge: Data(repeating: 9, count: 32),
                expires: expires ?? now.addingTimeInterval(60),
                action: purpose == .approve
                    ? .transfer(
                        try TransferAction(amount: DecimalAmount("1"), asset: "BTC", to: "bc1qattacker"))
                    : nil
            ).bytes
        }
        func check(_ bytes: Data) throws -> SigningPayload {
            try PayloadCheck.parse(
                bytes, purpose: .login, serverID: Backend.serverID, deviceID: "dev_mine", now: now)
        }

        #expect(try check(try payload()).purpose == .login)
        // An approval (1 BTC to the attacker) presented as a login challenge: "Log in" would
        // be the prompt, and the signature would approve the transfer.
        #expect(throws: KeyboundError.payloadMismatch) { try check(try payload(purpose: .approve)) }
        #expect(throws: KeyboundError.payloadMismatch) { try check(try payload(server: "bank.example")) }
        #expect(throws: KeyboundError.payloadMismatch) { try check(try payload(device: "dev_other")) }
        #expect(throws: KeyboundError.payloadMismatch) { try check(try payload(expires: now)) }
        #expect(throws: KeyboundError.payloadMismatch) { try check(Data("{}".utf8)) }
    }
}

/// Re-binding needs a fresh password login; a refused bind must not destroy the working key.
@Suite("Story 2: re-binding without step-up")
struct RebindWithoutStepUpTests {
    @Test func enableAfterADeviceLoginIsRefusedAndTheOldKeyKeepsWorking() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let first = try await backend.enabledApp(.deviceKey, device: phone)
        let deviceID = try #require(try await first.boundDeviceID())
        let keyBefore = try await phone.publicKey("acme-deviceKey.device-key")

        let relaunched = try backend.app(.deviceKey, device: phone)
        await phone.present(.match)
        try await relaunched.unlock()  // a device-key session: no password step-up
        await expectKeyboundError(.server, recovery: .usePassword) { try await relaunched.enable() }
        // Nothing changed on the device or the server: the old key still logs in.
        #expect(try await phone.publicKey("acme-deviceKey.device-key") == keyBefore)
        #expect(try await relaunched.boundDeviceID() == deviceID)
        #expect(try await relaunched.state() == .enabled(.faceID))
        await phone.present(.match)
        try await relaunched.unlock()
        #expect(try await relaunched.client.me().authMethod == .device)
    }
}
