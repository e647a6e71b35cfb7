import Keybound
import KeyboundEmulator
import Testing

/// The README's example, verbatim in substance, so the documentation cannot rot.
@Suite struct ReadmeExampleTests {
    @Test func theReadmeExampleRunsAsDescribed() async throws {
        let device = try EmulatedDevice(biometry: .faceID)
        let store = ProtectedStore(store: device, verifier: device)
        try await store.store("refresh-token-value", as: "refresh", policy: .biometryCurrentSet)

        await device.present(.match)
        let prompt = try VerificationPrompt(reason: "Log in to Acme")
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        let token = try await store.read("refresh", as: String.self, verification: verification)
        #expect(token == "refresh-token-value")

        try await device.enroll()
        var recovery: KeyboundError.Recovery?
        do { _ = try await store.read("refresh", verification: nil) } catch let error as KeyboundError
            where error == .invalidated
        {
            recovery = error.recovery
        }
        #expect(recovery == .reenroll)
    }
}
