import Foundation
import Keybound
import KeyboundEmulator
import KeyboundTestSupport
import Testing

/// The examples of the DocC article "Testing with the emulator"
/// (Sources/Keybound/Keybound.docc/TestingWithTheEmulator.md), verbatim, so the article cannot
/// rot. The article's `ManualClock` is KeyboundTestSupport's, which has the same shape.
@Suite struct DocumentationExampleTests {
    @Test func theTokenNeedsAFace() async throws {
        let device = try EmulatedDevice(biometry: .faceID)
        let store = ProtectedStore(store: device, verifier: device)
        try await store.store("refresh-token-value", as: "refresh", policy: .biometryCurrentSet)

        await device.present(.match)  // the user looks at the phone
        let prompt = try VerificationPrompt(reason: "Log in to Acme")
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        let token = try await store.read("refresh", as: String.self, verification: verification)
        #expect(token == "refresh-token-value")

        // The device enforces the policy itself: no verification, no token.
        await #expect(throws: KeyboundError.authenticationFailed) {
            try await store.read("refresh", verification: nil)
        }

        await device.present(.userCancel)
        await #expect(throws: KeyboundError.userCancel) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
    }

    @Test func fiveFailedMatchesLockBiometryOut() async throws {
        let device = try EmulatedDevice(biometry: .touchID)
        let prompt = try VerificationPrompt(reason: "Log in to Acme")

        await device.present(.noMatch, .noMatch, .noMatch)  // Touch ID gives up after three
        await #expect(throws: KeyboundError.authenticationFailed) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        await device.present(.noMatch, .noMatch)  // five in a row, across prompts
        let lockout = await #expect(throws: KeyboundError.biometryLockout) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(lockout?.recovery == .usePasscode)
        #expect(lockout?.native == .laError(KeyboundError.LAErrorCode.biometryLockout))

        // A policy that accepts the passcode falls back to it; the right passcode lifts the lockout.
        await device.present(.passcode("123456"))
        _ = try await device.verify(.biometryOrPasscode, prompt: prompt)
        let snapshot = await device.snapshot()
        #expect(!snapshot.isBiometryLockedOut)
    }

    @Test func anEnrollmentChangeInvalidatesTheToken() async throws {
        let device = try EmulatedDevice(biometry: .faceID)
        let store = ProtectedStore(store: device, verifier: device)
        try await store.store("refresh-token-value", as: "refresh", policy: .biometryCurrentSet)

        await device.lock()
        await #expect(throws: KeyboundError.interactionNotAllowed) {
            try await store.read("refresh", verification: nil)
        }
        await device.unlock()

        try await device.enroll()  // someone adds a face
        let error = await #expect(throws: KeyboundError.invalidated) {
            try await store.read("refresh", verification: nil)
        }
        #expect(error?.recovery == .reenroll)
        #expect(error?.native == .osStatus(-25300))  // errSecItemNotFound, as a real Keychain says
        #expect(try await store.status("refresh") == .absent)  // the dead item is gone
    }

    @Test func aVerificationServesItsReuseWindowOnly() async throws {
        let time = ManualClock()
        let device = try EmulatedDevice(biometry: .faceID, clock: time.clock, random: .seeded(7))
        let store = ProtectedStore(store: device, verifier: device)
        let policy = try AccessPolicy.biometryCurrentSet.reusing(for: 60)
        try await store.store("4711", as: "pin", policy: policy)

        await device.present(.match)
        let prompt = try VerificationPrompt(reason: "Show the PIN")
        let verification = try await device.verify(policy, prompt: prompt)
        _ = try await store.read("pin", verification: verification)
        _ = try await store.read("pin", verification: verification)  // within 60 s: no new prompt

        time.advance(by: 61)
        await #expect(throws: KeyboundError.authenticationFailed) {
            try await store.read("pin", verification: verification)
        }
    }

    @Test func aPasskeyDiesWithTheEnrollment() async throws {
        let phone = try EmulatedDevice(biometry: .faceID)
        let passkeys = try EmulatedPasskeyAuthenticator(device: phone)
        let request = PasskeyRegistrationRequest(
            relyingPartyID: "acme.example", relyingPartyName: "Acme", userID: Data("user-1".utf8),
            userName: "ada", userDisplayName: "Ada", challenge: Data(repeating: 7, count: 32))

        await phone.present(.match)  // Face ID approves the new passkey
        let registration = try await passkeys.createCredential(request)

        try await phone.enroll()  // someone adds a face: the passkey's key is gone
        let signIn = PasskeyAssertionRequest(relyingPartyID: "acme.example", challenge: Data(count: 32))
        await #expect(throws: KeyboundError.invalidated) { try await passkeys.getAssertion(signIn) }
        #expect(try await passkeys.passkeys().allSatisfy { $0.credentialID != registration.credentialID })
    }
}
