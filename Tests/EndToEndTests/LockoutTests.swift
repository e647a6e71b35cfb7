import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// Story 6: five failed matches lock biometrics system-wide; the passcode clears it.
@Suite("Story 6: lockout and fallback")
struct LockoutTests {
    @Test(arguments: [BiometricLogin.Mode.deviceKey, .token])
    func biometricsOnlyReportsLockoutUntilThePasscodeClearsIt(mode: BiometricLogin.Mode) async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let first = try backend.app(mode, device: phone)
        try await first.loginWithPassword(username: "ada", password: Backend.password)
        try await first.enable()

        // Five failed matches across three unlocks (Face ID offers the fallback button after
        // two per prompt; trying again instead ends the evaluation, a cancel is silent).
        let app = try backend.app(mode, device: phone)
        await phone.present(.noMatch, .noMatch, .match)
        await expectKeyboundError(.authenticationFailed, recovery: .retry) { try await app.unlock() }
        await phone.present(.noMatch, .noMatch, .userCancel)
        await expectKeyboundError(.userCancel, recovery: .silent) { try await app.unlock() }
        await phone.present(.noMatch)
        let lockout = await expectKeyboundError(.biometryLockout, recovery: .usePasscode) {
            try await app.unlock()
        }
        #expect(lockout?.native == .laError(-8))
        #expect(await phone.snapshot().isBiometryLockedOut)
        #expect(await app.client.currentSession == nil)

        // The login screen knows without prompting; a match does not help while locked out.
        #expect(try await app.state() == .unavailable(.biometryLockout))
        await phone.present(.match)
        await expectKeyboundError(.biometryLockout, recovery: .usePasscode) { try await app.unlock() }
        #expect(await phone.snapshot().queuedOutcomes == 1)

        // A wrong passcode does not clear it; the right one does. (The passcode screen has no
        // sensor: the face still queued from before is ignored there.)
        await phone.present(.passcode("000000"), .userCancel)
        await expectKeyboundError(.userCancel) { try await app.clearLockout() }
        #expect(await phone.snapshot().isBiometryLockedOut)
        await phone.present(.passcode("123456"))
        try await app.clearLockout()
        #expect(await phone.snapshot().isBiometryLockedOut == false)
        #expect(try await app.state() == .enabled(.faceID))

        #expect(await phone.snapshot().queuedOutcomes == 0)

        // Face ID works again.
        await phone.present(.match)
        try await app.unlock()
        let me = try await app.client.me()
        #expect(me.authMethod == (mode == .deviceKey ? .device : .password))
        #expect(me.username == "ada")
    }

    /// With `.biometryOrPasscode`, the lockout falls to the passcode screen and the unlock
    /// succeeds there.
    @Test(arguments: [BiometricLogin.Mode.deviceKey, .token])
    func biometryOrPasscodeFallsBackToThePasscode(mode: BiometricLogin.Mode) async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let first = try backend.app(mode, device: phone, policy: .biometryOrPasscode)
        try await first.loginWithPassword(username: "ada", password: Backend.password)
        try await first.enable()

        let app = try backend.app(mode, device: phone, policy: .biometryOrPasscode)
        // Two failed matches bring the fallback button ("Enter Passcode"); the user cancels (twice).
        await phone.present(.noMatch, .noMatch, .userCancel)
        await expectKeyboundError(.userCancel, recovery: .silent) { try await app.unlock() }
        await phone.present(.noMatch, .noMatch, .userCancel)
        await expectKeyboundError(.userCancel, recovery: .silent) { try await app.unlock() }
        // The fifth failed match locks biometrics out: the same prompt goes to the passcode.
        await phone.present(.noMatch, .passcode("123456"))
        try await app.unlock()
        #expect(try await app.client.me().username == "ada")
        #expect(await phone.snapshot().isBiometryLockedOut == false, "the passcode cleared the lockout")
        #expect(await phone.snapshot().queuedOutcomes == 0)

        // Locked out again, the login screen still offers biometric login (the passcode works).
        await phone.present(.noMatch, .noMatch, .userCancel, .noMatch, .noMatch, .userCancel)
        let again = try backend.app(mode, device: phone, policy: .biometryOrPasscode)
        await expectKeyboundError(.userCancel) { try await again.unlock() }
        await expectKeyboundError(.userCancel) { try await again.unlock() }
        await phone.present(.noMatch, .userCancel)
        await expectKeyboundError(.userCancel) { try await again.unlock() }
        #expect(await phone.snapshot().isBiometryLockedOut)
        #expect(try await again.state() == .enabled(.faceID))
        await phone.present(.passcode("123456"))
        try await again.unlock()
        #expect(try await again.client.me().username == "ada")
    }
}
