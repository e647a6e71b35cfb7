import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// Story 1: biometric login with a stored refresh token, against a real server.
@Suite("Story 1: biometric login with a stored token")
struct TokenLoginTests {
    @Test func passwordLoginEnableRelaunchUnlockRotateAndDisable() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let userID = try await backend.createUser("ada")

        // First launch: password login; biometric login is off until the user says yes.
        let first = try backend.app(.token, device: phone)
        try await first.loginWithPassword(username: "ada", password: Backend.password)
        #expect(try await first.client.me().authMethod == .password)
        #expect(try await first.state() == .notEnabled)
        try await first.enable()
        #expect(try await first.state() == .enabled(.faceID))
        let storedAtEnable = try #require(await first.client.currentSession).refreshToken
        // Enabling shows no prompt: storing needs no verification, only reading does.
        #expect(await phone.snapshot().queuedOutcomes == 0)

        // Relaunch: a new client with no session; the item is all there is.
        let relaunched = try backend.app(.token, device: phone)
        #expect(await relaunched.client.currentSession == nil)
        #expect(try await relaunched.state() == .enabled(.faceID))
        await phone.present(.match)
        let resumed = try await relaunched.unlock()
        let me = try await relaunched.client.me()
        #expect(me.userID == userID)
        #expect(me.username == "ada")
        #expect(resumed.userID == userID)

        // The refresh token in the item was rotated by the unlock: it now holds the new one.
        #expect(resumed.refreshToken != storedAtEnable)
        let items = ProtectedStore(store: phone, verifier: phone)
        await phone.present(.match)
        let verification = try await phone.verify(
            .biometryCurrentSet, prompt: try VerificationPrompt(reason: "Inspect the stored token"))
        let stored = try await items.read(
            "acme-token.refresh-token", as: String.self, verification: verification)
        #expect(stored == resumed.refreshToken)

        // Turning it off removes the item (and its marker): not enabled, not "invalidated".
        try await relaunched.disable()
        #expect(try await relaunched.state() == .notEnabled)
        #expect(await phone.snapshot().items.contains("acme-token.refresh-token") == false)
        await expectKeyboundError(.itemNotFound, recovery: KeyboundError.Recovery.none) {
            try await backend.app(.token, device: phone).unlock()
        }
    }

    /// Bearer sessions (no DPoP key): the server cannot tell the thief from the owner, and ends
    /// the family. (A DPoP-bound session refuses the thief and stays: EndToEndTests' DPoP suite.)
    @Test func theOldRefreshTokenReplayedAfterUnlockKillsTheWholeFamily() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let first = try await backend.enabledApp(.token, device: phone, dpop: false)
        // An attacker copied the item's value (say, from a backup) before the next launch.
        let stolen = try #require(await first.client.currentSession).refreshToken

        let relaunched = try backend.app(.token, device: phone, dpop: false)
        await phone.present(.match)
        try await relaunched.unlock()
        let sessionID = try await relaunched.client.me().sessionID

        // The attacker replays the old token: refused, and the server treats the reuse as theft.
        await expectKeyboundError(.server, recovery: .usePassword, serverCode: .tokenInvalid) {
            try await backend.client().resume(refreshToken: stolen)
        }
        // The family is dead: the user's own, newer session too. The client sees its access
        // token refused, tries its (rotated) refresh token once, and reports the session over.
        await expectKeyboundError(.sessionExpired, recovery: .usePassword) {
            try await relaunched.client.me()
        }
        #expect(await relaunched.client.currentSession == nil)

        // The way back is the password; the new session is a different one.
        try await relaunched.loginWithPassword(username: "ada", password: Backend.password)
        let me = try await relaunched.client.me()
        #expect(me.sessionID != sessionID)
        #expect(try await relaunched.client.audit().contains { $0.type == .refreshReuse })
    }

    @Test func cancelIsSilentAndFallbackGoesToThePasswordPath() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        _ = try await backend.enabledApp(.token, device: phone)

        let relaunched = try backend.app(.token, device: phone)
        // The user dismisses Face ID: nothing to show, no session, biometric login stays on.
        await phone.present(.userCancel)
        let cancelled = await expectKeyboundError(.userCancel, recovery: .silent) {
            try await relaunched.unlock()
        }
        #expect(cancelled?.isCancellation == true)
        #expect(await relaunched.client.currentSession == nil)
        #expect(try await relaunched.state() == .enabled(.faceID))

        // The system takes the prompt away (a call): silent too.
        await phone.present(.systemCancel)
        await expectKeyboundError(.systemCancel, recovery: .silent) { try await relaunched.unlock() }

        // "Use Password" (Face ID shows it after two failed matches): the app's own password
        // path, which works.
        await phone.present(.noMatch, .noMatch, .userFallback)
        await expectKeyboundError(.userFallback, recovery: .usePassword) { try await relaunched.unlock() }
        #expect(await relaunched.client.currentSession == nil)
        try await relaunched.loginWithPassword(username: "ada", password: Backend.password)
        #expect(try await relaunched.client.me().authMethod == .password)

        // Biometric login still works afterwards, although that password login ended the
        // session whose refresh token the item held: the item now holds the new session's.
        let later = try backend.app(.token, device: phone)
        await phone.present(.match)
        try await later.unlock()
        #expect(try await later.client.me().username == "ada")
    }

    /// "No biometric verification, no token": an app patched to skip the prompt (Frida,
    /// Objection) still cannot get the refresh token out of the item.
    @Test func aPatchedAppGetsNoTokenWithoutTheOS() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        _ = try await backend.enabledApp(.token, device: phone)
        let items = ProtectedStore(store: phone, verifier: phone)
        let name: ItemName = "acme-token.refresh-token"

        // "authenticated = true", and no verification at all.
        await expectKeyboundError(.authenticationFailed) {
            try await items.read(name, verification: nil)
        }
        // A verification the device never issued, claiming Face ID with a long reuse window.
        let forged = Verification(
            id: "00112233445566778899aabbccddeeff", factors: [.biometry], verifiedAt: Date(),
            reuseDuration: 300)
        await expectKeyboundError(.authenticationFailed) {
            try await items.read(name, verification: forged)
        }
        // A thief who knows the passcode: a passcode verification does not open a Face ID item.
        await phone.present(.passcode("123456"))
        let byPasscode = try await phone.verify(
            .devicePasscode, prompt: try VerificationPrompt(reason: "Enter your passcode"))
        await expectKeyboundError(.authenticationFailed) {
            try await items.read(name, verification: byPasscode)
        }
        // A real Face ID verification opens it once; a second read with it is refused.
        await phone.present(.match)
        let real = try await phone.verify(
            .biometryCurrentSet, prompt: try VerificationPrompt(reason: "Log in to Acme"))
        _ = try await items.read(name, verification: real)
        await expectKeyboundError(.authenticationFailed) {
            try await items.read(name, verification: real)
        }
    }
}
