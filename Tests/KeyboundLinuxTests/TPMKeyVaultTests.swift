#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundCrypto
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    @Suite("TPMKeyVault on swtpm", .softwareTPM)
    struct TPMKeyVaultTests {
        @Test func aPINBoundKeySignsOnlyAfterTheTPMCheckedThePIN() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            let spki = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            let message = Data("challenge".utf8)
            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            let signature = try await fixture.vault.sign(
                message, with: "device-key", verification: verification)
            let publicKey = try P256PublicKey(spkiDER: spki)
            #expect(publicKey.isValidSignature(try P256Signature(derRepresentation: signature), for: message))
            #expect(try await fixture.vault.isValidSignature(signature, for: message, by: "device-key"))
        }
    }
#endif
