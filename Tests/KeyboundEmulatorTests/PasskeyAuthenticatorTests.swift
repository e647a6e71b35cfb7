import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundTestSupport
import KeyboundWebAuthn
import Testing

/// The emulated platform authenticator: what it makes verifies with KeyboundWebAuthn's relying
/// party, and the device's sensor decides every ceremony as it decides a key's use.
@Suite("Emulated passkeys")
struct PasskeyAuthenticatorTests {
    let rp = RelyingParty(id: "acme.example", origins: ["https://acme.example"])
    let userHandle = Data("user-ada-0001".utf8)
    let challenge = Data(repeating: 0xC7, count: 32)

    func creation(excluding excluded: [Data] = [], algorithms: [Int] = [-7, -8, -257])
        -> PasskeyRegistrationRequest
    {
        PasskeyRegistrationRequest(
            relyingPartyID: "acme.example", relyingPartyName: "Acme", userID: userHandle, userName: "ada",
            userDisplayName: "Ada", challenge: challenge, algorithms: algorithms,
            excludedCredentialIDs: excluded)
    }

    func request(_ challenge: Data, allowing allowed: [Data] = []) -> PasskeyAssertionRequest {
        PasskeyAssertionRequest(
            relyingPartyID: "acme.example", challenge: challenge, allowedCredentialIDs: allowed)
    }

    /// Registers a passkey (Face ID matches) and returns the relying party's record of it.
    func register(_ authenticator: EmulatedPasskeyAuthenticator, on device: EmulatedDevice, time: ManualClock)
        async throws -> (PasskeyRegistration, VerifiedRegistration)
    {
        await device.present(.match)
        let registration = try await authenticator.createCredential(creation())
        let verified = try rp.verifyRegistration(
            RegistrationResponse(json: registration.jsonData), challenge: challenge, at: time.now)
        return (registration, verified)
    }

    func record(_ verified: VerifiedRegistration, signCount: UInt32? = nil) -> CredentialRecord {
        CredentialRecord(
            id: verified.credentialId, publicKey: verified.publicKey,
            signCount: signCount ?? verified.signCount,
            userHandle: userHandle, backupEligible: verified.backupEligible)
    }

    func login(_ assertion: PasskeyAssertion, _ record: CredentialRecord, challenge: Data) throws
        -> VerifiedAuthentication
    {
        try rp.verifyAuthentication(
            AuthenticationResponse(json: assertion.jsonData), challenge: challenge,
            credential: record,
            identification: .beforeCeremony)
    }

    @Test("a registration and its assertions verify with the relying party")
    func registrationAndAssertionsVerify() async throws {
        let (device, time) = try makeDevice()
        let authenticator = try EmulatedPasskeyAuthenticator(device: device, random: .seeded(1))
        let (registration, verified) = try await register(authenticator, on: device, time: time)
        #expect(verified.attestation.format == .none && verified.aaguid == Data(count: 16))
        #expect(verified.userVerified && verified.backupEligible && verified.backedUp)
        #expect(verified.signCount == 0 && verified.publicKey.algorithm == .es256)
        #expect(verified.credentialId == registration.credentialID)
        let clientData = try RegistrationResponse(json: registration.jsonData).clientData()
        #expect(clientData.type == "webauthn.create" && clientData.origin == "https://acme.example")

        for round in 0..<2 {
            let fresh = Data(repeating: UInt8(round), count: 32)
            await device.present(.match)
            let assertion = try await authenticator.getAssertion(request(fresh))
            let result = try login(assertion, record(verified), challenge: fresh)
            #expect(result.userHandle == userHandle && result.userVerified && result.signCount == 0)
            #expect(assertion.userHandle == userHandle && assertion.credentialID == registration.credentialID)
        }
        // The private key is the device's, under the device's policy: it signs nothing unverified.
        let keyName = try ItemName("passkeys.key.\(Hex.encode(registration.credentialID))")
        #expect(try await device.keyPolicy(keyName) == .biometryCurrentSet)
        await expectKeyboundError(.authenticationFailed) {
            try await device.sign(Data(), with: keyName, verification: nil)
        }
    }

    @Test("backup flags and the counter follow the settings")
    func settingsShapeTheAuthenticatorData() async throws {
        let (device, time) = try makeDevice()
        let authenticator = try EmulatedPasskeyAuthenticator(
            device: device, settings: .init(backup: .notEligible, signCounter: .incrementing),
            random: .seeded(2))
        let (_, verified) = try await register(authenticator, on: device, time: time)
        #expect(!verified.backupEligible && !verified.backedUp)
        var record = record(verified)
        for expected: UInt32 in 1...3 {
            let fresh = Data(repeating: UInt8(expected), count: 32)
            await device.present(.match)
            let result = try login(
                try await authenticator.getAssertion(request(fresh)), record, challenge: fresh)
            #expect(result.signCount == expected)
            record.signCount = result.signCount
        }
        // An assertion replayed against the newer record is a cloned authenticator to the RP.
        let replayChallenge = Data(repeating: 9, count: 32)
        await device.present(.match)
        let assertion = try await authenticator.getAssertion(request(replayChallenge))
        record.signCount = 10
        #expect(throws: WebAuthnError.clonedAuthenticator) {
            try login(assertion, record, challenge: replayChallenge)
        }

        let eligible = try EmulatedPasskeyAuthenticator(
            device: device, settings: .init(backup: .eligible, namespace: "other"), random: .seeded(3))
        let (_, onlyEligible) = try await register(eligible, on: device, time: time)
        #expect(onlyEligible.backupEligible && !onlyEligible.backedUp)
    }

    @Test("a dismissed prompt creates and signs nothing")
    func cancelIsSilentAndLeavesNothing() async throws {
        let (device, time) = try makeDevice()
        let authenticator = try EmulatedPasskeyAuthenticator(device: device, random: .seeded(4))
        await expectKeyboundError(.userCancel, recovery: .silent) {
            try await authenticator.createCredential(creation())
        }
        #expect(try await authenticator.passkeys().isEmpty)

        _ = try await register(authenticator, on: device, time: time)
        await device.present(.userCancel)
        await expectKeyboundError(.userCancel, recovery: .silent) {
            try await authenticator.getAssertion(request(challenge))
        }
    }

    @Test("a locked-out sensor refuses the passkey as it refuses a key")
    func lockoutRefusesThePasskey() async throws {
        let (device, time) = try makeDevice()
        let authenticator = try EmulatedPasskeyAuthenticator(device: device, random: .seeded(5))
        _ = try await register(authenticator, on: device, time: time)
        _ = try await device.createKey("k", policy: .biometryCurrentSet)
        // Five failed matches across three ceremonies (Face ID counts two per prompt before it
        // offers the fallback button): the third ends in lockout.
        await device.present(.noMatch, .noMatch, .noMatch)
        await expectKeyboundError(.authenticationFailed) {
            try await authenticator.getAssertion(request(challenge))
        }
        await device.present(.noMatch, .noMatch, .userCancel)
        await expectKeyboundError(.userCancel) { try await authenticator.getAssertion(request(challenge)) }
        await device.present(.noMatch)
        await expectKeyboundError(.biometryLockout, recovery: .usePasscode) {
            try await authenticator.getAssertion(request(challenge))
        }
        // Now nothing reaches the passkey, nor the device's own key; the passcode clears it.
        await device.present(.match)
        await expectKeyboundError(.biometryLockout) {
            try await authenticator.getAssertion(request(challenge))
        }
        await expectKeyboundError(.biometryLockout) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        await device.present(.passcode("123456"))
        _ = try await device.verify(.devicePasscode, prompt: prompt)
        await device.present(.match)
        _ = try await authenticator.getAssertion(request(challenge))
    }

    @Test("an enrollment change invalidates the passkey and removes it")
    func enrollmentChangeInvalidatesThePasskey() async throws {
        let (device, time) = try makeDevice()
        let authenticator = try EmulatedPasskeyAuthenticator(device: device, random: .seeded(6))
        _ = try await register(authenticator, on: device, time: time)
        try await device.enroll()
        await device.present(.match)
        await expectKeyboundError(.invalidated, recovery: .reenroll) {
            try await authenticator.getAssertion(request(challenge))
        }
        // No prompt was shown for a dead passkey: the queued match is still there.
        #expect(await device.snapshot().queuedOutcomes == 1)
        #expect(try await authenticator.passkeys().isEmpty)
        await expectKeyboundError(.itemNotFound) { try await authenticator.getAssertion(request(challenge)) }
    }

    @Test("excluded and disallowed credentials, and algorithms it cannot make")
    func credentialListsAndAlgorithms() async throws {
        let (device, time) = try makeDevice()
        let authenticator = try EmulatedPasskeyAuthenticator(device: device, random: .seeded(7))
        let (registration, _) = try await register(authenticator, on: device, time: time)
        await expectKeyboundError(.duplicateItem) {
            try await authenticator.createCredential(creation(excluding: [registration.credentialID]))
        }
        await expectKeyboundError(.itemNotFound) {
            try await authenticator.getAssertion(request(challenge, allowing: [Data(count: 16)]))
        }
        await expectKeyboundError(.notSupported) {
            try await authenticator.createCredential(creation(algorithms: [-8, -257]))
        }
        // A new passkey for the same account replaces the old one.
        let (second, _) = try await register(authenticator, on: device, time: time)
        #expect(try await authenticator.passkeys().map(\.credentialID) == [second.credentialID])
    }
}
