import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundTestSupport
import KeyboundWebAuthn
import Testing

/// The emulated App Attest service: its attestations and assertions verify with
/// KeyboundWebAuthn's App Attest verifier under the test CA, and are refused for what a real
/// one is refused for.
@Suite("Emulated App Attest")
struct AppAttestServiceTests {
    static let appID = "TEAMID1234.com.acme.bank"
    let clientData = Data("binding challenge and device key".utf8)

    func make() throws -> (EmulatedAppAttestService, EmulatedAppAttestAuthority, EmulatedDevice, ManualClock)
    {
        let (device, time) = try makeDevice()
        let authority = try EmulatedAppAttestAuthority(clock: time.clock, random: .seeded(11))
        let service = try EmulatedAppAttestService(
            device: device, appID: Self.appID, authority: authority, random: .seeded(12))
        return (service, authority, device, time)
    }

    func verifier(
        _ authority: EmulatedAppAttestAuthority, appIDs: [String] = [appID],
        environment: AppAttest.Environment = .development
    ) -> AppAttest {
        AppAttest(appIds: appIDs, environment: environment, roots: [authority.rootCertificate])
    }

    @Test("an attestation verifies under the test root, and its assertions count up")
    func attestationAndAssertionsVerify() async throws {
        let (service, authority, device, time) = try make()
        #expect(service.isSupported)
        let keyID = try await service.generateKey()
        let attestation = try await service.attestKey(keyID, clientData: clientData)
        let key = try verifier(authority).verifyAttestation(
            attestation, keyId: keyID, clientDataHash: Digest.sha256(clientData), at: time.now)
        #expect(key.appId == Self.appID && key.keyId == keyID)
        // The attested key is a key of the device's secure element.
        let keys = await device.snapshot().keys
        #expect(keys.count == 1)
        #expect(try await device.publicKey(try ItemName(try #require(keys.first))) == key.publicKey.spkiDER)

        var counter: UInt32 = 0
        for request in 1...3 {
            let data = Data("request \(request)".utf8)
            let assertion = try await service.generateAssertion(keyID, clientData: data)
            let next = try verifier(authority).verifyAssertion(
                assertion, clientData: data, publicKey: key.publicKey, appId: Self.appID,
                previousCounter: counter)
            #expect(next == counter + 1)
            counter = next
        }
        let replayed = try await service.generateAssertion(keyID, clientData: clientData)
        _ = try verifier(authority).verifyAssertion(
            replayed, clientData: clientData, publicKey: key.publicKey, appId: Self.appID,
            previousCounter: counter)
        #expect(throws: WebAuthnError.replayedAssertion) {
            try verifier(authority).verifyAssertion(
                replayed, clientData: clientData, publicKey: key.publicKey, appId: Self.appID,
                previousCounter: counter + 1)
        }
        #expect(throws: WebAuthnError.invalidSignature) {
            try verifier(authority).verifyAssertion(
                replayed, clientData: Data("other".utf8), publicKey: key.publicKey, appId: Self.appID,
                previousCounter: counter)
        }
    }

    @Test("refused for another app, the other environment, another root, other data, and late")
    func attestationRefusals() async throws {
        let (service, authority, device, time) = try make()
        let keyID = try await service.generateKey()
        let attestation = try await service.attestKey(keyID, clientData: clientData)
        let hash = Digest.sha256(clientData)
        let now = time.now
        #expect(throws: WebAuthnError.rpIdMismatch) {
            try verifier(authority, appIDs: ["TEAMID1234.com.other.app"]).verifyAttestation(
                attestation, keyId: keyID, clientDataHash: hash, at: now)
        }
        #expect(throws: WebAuthnError.environmentMismatch) {
            try verifier(authority, environment: .production).verifyAttestation(
                attestation, keyId: keyID, clientDataHash: hash, at: now)
        }
        #expect(throws: WebAuthnError.certificateChainInvalid) {
            try AppAttest(appIds: [Self.appID], environment: .development).verifyAttestation(
                attestation, keyId: keyID, clientDataHash: hash, at: now)
        }
        #expect(throws: WebAuthnError.nonceMismatch) {
            try verifier(authority).verifyAttestation(
                attestation, keyId: keyID, clientDataHash: Digest.sha256(Data("other".utf8)), at: now)
        }
        #expect(throws: WebAuthnError.keyIdMismatch) {
            try verifier(authority).verifyAttestation(
                attestation, keyId: Digest.sha256(keyID), clientDataHash: hash, at: now)
        }
        #expect(throws: WebAuthnError.certificateChainInvalid) {
            try verifier(authority).verifyAttestation(
                attestation, keyId: keyID, clientDataHash: hash, at: now.addingTimeInterval(4 * 24 * 3600))
        }

        // The same CA serves another app on the same device: its attestation is refused by a
        // verifier of this app for the app id alone.
        let other = try EmulatedAppAttestService(
            device: device, appID: "TEAMID1234.com.other.app", environment: .production, authority: authority)
        let otherKey = try await other.generateKey()
        let otherAttestation = try await other.attestKey(otherKey, clientData: clientData)
        _ = try verifier(authority, appIDs: ["TEAMID1234.com.other.app"], environment: .production)
            .verifyAttestation(otherAttestation, keyId: otherKey, clientDataHash: hash, at: now)
        #expect(throws: WebAuthnError.rpIdMismatch) {
            try verifier(authority, environment: .production).verifyAttestation(
                otherAttestation, keyId: otherKey, clientDataHash: hash, at: now)
        }
        #expect(authority.rootCertificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(try Certificate(pemRepresentation: authority.rootCertificatePEM) == authority.rootCertificate)
    }

    @Test("the app relaunched asserts with the key it attested before; another app cannot")
    func keysOutliveTheServiceAsDCAppAttestServiceKeysDo() async throws {
        let (service, authority, device, time) = try make()
        let keyID = try await service.generateKey()
        let key = try verifier(authority).verifyAttestation(
            try await service.attestKey(keyID, clientData: clientData), keyId: keyID,
            clientDataHash: Digest.sha256(clientData), at: time.now)
        let first = try verifier(authority).verifyAssertion(
            try await service.generateAssertion(keyID, clientData: clientData), clientData: clientData,
            publicKey: key.publicKey, appId: Self.appID, previousCounter: 0)

        // Relaunched: a new service of the same app on the same device.
        let relaunched = try EmulatedAppAttestService(device: device, appID: Self.appID, authority: authority)
        let data = Data("after the relaunch".utf8)
        let next = try verifier(authority).verifyAssertion(
            try await relaunched.generateAssertion(keyID, clientData: data), clientData: data,
            publicKey: key.publicKey, appId: Self.appID, previousCounter: first)
        #expect(first == 1 && next == 2)
        await expectKeyboundError(.invalidated) { try await relaunched.attestKey(keyID, clientData: data) }

        // Another app on the same device has keys of its own, and none of this one's.
        let other = try EmulatedAppAttestService(
            device: device, appID: "TEAMID1234.com.other.app", authority: authority)
        await expectKeyboundError(.invalidated) { try await other.generateAssertion(keyID, clientData: data) }
    }

    @Test("where App Attest is not supported it says so, and makes no key")
    func unsupportedServiceRefusesEveryCall() async throws {
        let (device, time) = try makeDevice()
        let service = try EmulatedAppAttestService(
            device: device, appID: Self.appID, authority: try EmulatedAppAttestAuthority(clock: time.clock),
            isSupported: false)
        #expect(!service.isSupported)
        await expectKeyboundError(.notSupported) { try await service.generateKey() }
        await expectKeyboundError(.notSupported) {
            try await service.attestKey(Data(count: 32), clientData: clientData)
        }
        await expectKeyboundError(.notSupported) {
            try await service.generateAssertion(Data(count: 32), clientData: clientData)
        }
        #expect(await device.snapshot().keys.isEmpty)
    }

    @Test("a key is attested once, and only attested keys assert")
    func keyLifecycle() async throws {
        let (service, _, _, _) = try make()
        let keyID = try await service.generateKey()
        await expectKeyboundError(.invalidated) {
            try await service.generateAssertion(keyID, clientData: clientData)
        }
        _ = try await service.attestKey(keyID, clientData: clientData)
        await expectKeyboundError(.invalidated) { try await service.attestKey(keyID, clientData: clientData) }
        await expectKeyboundError(.invalidated) {
            try await service.attestKey(Data(count: 32), clientData: clientData)
        }
    }
}
