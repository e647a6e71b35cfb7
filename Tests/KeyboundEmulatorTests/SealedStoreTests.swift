import Foundation
import Keybound
import KeyboundEmulator
import KeyboundTestSupport
import Testing

/// `SealedStore` on the emulated secure element: blobs are bound to their name and signed by
/// the device, so neither a blob moved to another name nor one made with only the public
/// operation (what anyone holding the sealing key's public key can do) is ever decrypted.
@Suite struct SealedStoreTests {
    struct Statement: Codable, Equatable {
        let iban: String
        let balance: String
    }

    let device: EmulatedDevice
    let sealed: SealedStore
    let statement = Statement(iban: "DE00 1234", balance: "1200.50")

    init() async throws {
        (device, _) = try makeDevice()
        sealed = SealedStore(keyName: "acme.seal", vault: device, store: device, verifier: device)
        try await sealed.prepare()
    }

    func verification() async throws -> Verification {
        await device.present(.match)
        return try await device.verify(.biometryCurrentSet, prompt: prompt)
    }

    @Test func sealThenOpenAfterAVerification() async throws {
        try await sealed.seal(statement, as: "acme.statement")
        let opened = try await sealed.open(
            "acme.statement", as: Statement.self, verification: try await verification())
        #expect(opened == statement)
        // Opening needs the verification: the sealing key enforces it.
        #expect(
            await expectKeyboundError {
                try await sealed.open("acme.statement", as: Statement.self, verification: nil)
            }
                == .authenticationFailed)
    }

    @Test func aBlobMovedToAnotherNameIsRefused() async throws {
        try await sealed.seal(statement, as: "acme.statement")
        try await sealed.seal(Statement(iban: "DE99", balance: "0.01"), as: "acme.other")
        let blob = try await device.read("acme.statement", verification: nil)
        try await device.store(blob, as: "acme.other", policy: .noVerification, verification: nil)

        let verification = try await verification()
        let error = await expectKeyboundError {
            try await sealed.open("acme.other", as: Statement.self, verification: verification)
        }
        #expect(error == .invalidInput)
        // Nothing was decrypted: the single-use verification is still unspent.
        #expect(
            try await sealed.open("acme.statement", as: Statement.self, verification: verification)
                == statement)
    }

    @Test func aBlobForgedWithOnlyThePublicOperationIsRefused() async throws {
        let forgedStatement = Statement(iban: "ATTACKER", balance: "1000000")
        let plaintext = try JSONEncoder().encode(forgedStatement)
        // Encrypting to the sealing key needs no verification and, on Apple platforms (ECIES),
        // only its public key.
        let ciphertext = try await device.encrypt(plaintext, for: "acme.seal")
        // As a bare ciphertext, and wrapped like a sealed blob with a made-up signature.
        let fakeSignature = Data(repeating: 0x30, count: 70)
        let candidates = [
            ciphertext, Data([1, 0, UInt8(fakeSignature.count)]) + fakeSignature + ciphertext,
            Data([1, 0, 0]) + ciphertext, Data([1]),
        ]
        for candidate in candidates {
            try await device.store(
                candidate, as: "acme.statement", policy: .noVerification, verification: nil)
            let error = await expectKeyboundError {
                try await sealed.open(
                    "acme.statement", as: Statement.self, verification: try await verification())
            }
            #expect(error == .invalidInput, "\(candidate.count) bytes")
        }
    }

    @Test func oneAlteredByteOfTheBlobIsRefused() async throws {
        try await sealed.seal(statement, as: "acme.statement")
        let blob = try await device.read("acme.statement", verification: nil)
        for index in [0, 1, 2, 3, blob.count / 2, blob.count - 1] {
            var altered = blob
            altered[index] ^= 0x01
            try await device.store(altered, as: "acme.statement", policy: .noVerification, verification: nil)
            let error = await expectKeyboundError {
                try await sealed.open(
                    "acme.statement", as: Statement.self, verification: try await verification())
            }
            #expect(error == .invalidInput, "byte \(index)")
        }
    }

    @Test func preparingAgainMakesOldBlobsUnreadable() async throws {
        try await sealed.seal(statement, as: "acme.statement")
        try await sealed.prepare()
        #expect(
            await expectKeyboundError {
                try await sealed.open(
                    "acme.statement", as: Statement.self, verification: try await verification())
            } == .invalidInput)
    }

    @Test func anEnrollmentChangeReportsInvalidated() async throws {
        try await sealed.seal(statement, as: "acme.statement")
        try await device.enroll()
        #expect(try await sealed.status() == .invalidated)
        #expect(
            await expectKeyboundError {
                try await sealed.open(
                    "acme.statement", as: Statement.self, verification: try await verification())
            } == .invalidated)
    }
}
