import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundTestSupport
import Testing

/// docs/design.md, "The emulator", rule by rule.
@Suite struct EmulatorRulesTests {
    // Rule 1: state — biometry type, enrollment, domain state changing on every change, lock state.
    @Test func stateReportsBiometryEnrollmentAndDomainStateChanges() async throws {
        let (device, _) = try makeDevice(biometry: .touchID, enrolled: 2)
        let before = await device.availability()
        #expect(before.biometryType == .touchID)
        #expect(before.canUseBiometry)
        #expect(before.isPasscodeSet)
        let firstState = try #require(before.enrollmentState)
        try await device.enroll()
        let afterEnroll = try #require(await device.availability().enrollmentState)
        #expect(afterEnroll != firstState)
        await device.unenrollAll()
        #expect(await device.availability().enrollmentState == nil)
        #expect(await device.snapshot().enrolledIdentities == 0)
        await device.lock()
        #expect(await device.snapshot().isLocked)
    }

    @Test func invalidConfigurationsAreRefused() {
        #expect(throws: KeyboundError.invalidInput) { try EmulatedDevice(enrolledIdentities: 6) }
        #expect(throws: KeyboundError.invalidInput) {
            try EmulatedDevice(biometry: .none, enrolledIdentities: 1)
        }
        #expect(throws: KeyboundError.invalidInput) { try EmulatedDevice(passcode: "12") }
    }

    // Rule 2: outcomes are scripted; with nothing queued a prompt ends as a cancel.
    @Test func scriptedOutcomesAreConsumedInOrderAndEmptyQueueCancels() async throws {
        let (device, _) = try makeDevice()
        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        #expect(verification.factors == [.biometry])
        let error = await expectKeyboundError(.userCancel) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(error?.native == .laError(-2))
        #expect(error?.recovery == .silent)
    }

    @Test func cancelFallbackSystemAndAppCancelEachHaveTheirCode() async throws {
        let (device, _) = try makeDevice(biometry: .touchID)
        let cases: [(PresentationOutcome, KeyboundError, Int, KeyboundError.Recovery)] = [
            (.userCancel, .userCancel, -2, .silent),
            (.userFallback, .userFallback, -3, .usePassword),
            (.systemCancel, .systemCancel, -4, .silent),
            (.appCancel, .appCancel, -9, .silent),
        ]
        for (outcome, expected, native, recovery) in cases {
            // Touch ID shows the fallback button after the first failed match.
            await device.present(.noMatch, outcome)
            let error = await expectKeyboundError(expected.code, recovery: recovery, "\(outcome)") {
                try await device.verify(.biometryCurrentSet, prompt: prompt)
            }
            #expect(error?.native == .laError(native), "\(outcome)")
        }
    }

    // Rule 3: attempts per evaluation, when the fallback button shows, lockout after 5 across
    // evaluations, the passcode clears it.
    @Test func touchIDFailsAnEvaluationAfterThreeNonMatches() async throws {
        let (device, _) = try makeDevice(biometry: .touchID)
        await device.present(.noMatch, .noMatch, .noMatch, .match)
        let error = await expectKeyboundError(.authenticationFailed) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(error?.native == .laError(-1))
        #expect(await device.snapshot().queuedOutcomes == 1)  // the match was not consumed
        #expect(await device.snapshot().consecutiveFailedMatches == 3)
    }

    @Test func touchIDOffersTheFallbackButtonFromTheFirstNonMatch() async throws {
        let (device, _) = try makeDevice(biometry: .touchID)
        // Before any failed match there is no fallback button: the tap does nothing.
        await device.present(.userFallback, .match)
        #expect(try await device.verify(.biometryCurrentSet, prompt: prompt).factors == [.biometry])
        await device.present(.userFallback)
        #expect(
            await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) }
                == .userCancel)
        // After one, and after two, it is there.
        for failures in 1...2 {
            await device.present(Array(repeating: .noMatch, count: failures) + [.userFallback])
            let error = await expectKeyboundError {
                try await device.verify(.biometryCurrentSet, prompt: prompt)
            }
            #expect(error == .userFallback, "after \(failures) failed matches")
            #expect(error?.native == .laError(-3))
        }
    }

    @Test func faceIDShowsTheFallbackButtonOnlyAfterTwoNonMatches() async throws {
        let (device, _) = try makeDevice(biometry: .faceID)
        // No button before the first failed match, nor after one: the taps do nothing.
        await device.present(.userFallback, .noMatch, .userFallback, .match)
        #expect(try await device.verify(.biometryCurrentSet, prompt: prompt).factors == [.biometry])
        #expect(await device.snapshot().queuedOutcomes == 0)
        // After two, the fallback button is there.
        await device.present(.noMatch, .noMatch, .userFallback)
        let error = await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) }
        #expect(error == .userFallback)
        #expect(error?.native == .laError(-3))
        #expect(error?.recovery == .usePassword)
    }

    /// After two failed matches the next outcome decides: fallback → userFallback, cancel →
    /// userCancel, anything else ends the evaluation with authenticationFailed (and nothing
    /// queued is a cancel, as for every prompt).
    @Test(arguments: [
        (PresentationOutcome.userFallback, KeyboundError.userFallback),
        (.userCancel, .userCancel), (.match, .authenticationFailed), (.noMatch, .authenticationFailed),
        (.passcode("123456"), .userFallback),
    ])
    func faceIDHonoursTheOutcomeAfterTwoNonMatches(_ next: PresentationOutcome, _ expected: KeyboundError)
        async throws
    {
        let (device, _) = try makeDevice(biometry: .faceID)
        await device.present(.noMatch, .noMatch, next, .match)
        let error = await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) }
        #expect(error == expected)
        #expect(await device.snapshot().queuedOutcomes == 1, "the deciding outcome is consumed, no more")
        #expect(await device.snapshot().consecutiveFailedMatches == 2, "the decision is no match attempt")
    }

    @Test func faceIDWithNothingQueuedAfterTwoNonMatchesIsACancel() async throws {
        let (device, _) = try makeDevice(biometry: .faceID)
        await device.present(.noMatch, .noMatch)
        await expectKeyboundError(.userCancel) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
    }

    @Test func faceIDFallbackGoesToThePasscodeWhenThePolicyAcceptsIt() async throws {
        let (device, _) = try makeDevice(biometry: .faceID)
        await device.present(.noMatch, .noMatch, .passcode("123456"))
        #expect(try await device.verify(.biometryOrPasscode, prompt: prompt).factors == [.passcode])
        await device.present(.noMatch, .noMatch, .userFallback, .passcode("123456"))
        #expect(try await device.verify(.biometryOrPasscode, prompt: prompt).factors == [.passcode])
        await device.present(.noMatch, .noMatch, .userCancel)
        #expect(
            await expectKeyboundError { try await device.verify(.biometryOrPasscode, prompt: prompt) }
                == .userCancel)
    }

    @Test func fiveFailedMatchesAcrossEvaluationsLockBiometryUntilThePasscode() async throws {
        let (device, _) = try makeDevice(biometry: .touchID)
        await device.present(.noMatch, .noMatch, .noMatch)
        await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) }
        await device.present(.noMatch, .noMatch)
        let lockout = await expectKeyboundError(.biometryLockout) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(lockout?.native == .laError(-8))
        #expect(lockout?.recovery == .usePasscode)
        #expect(await device.snapshot().isBiometryLockedOut)
        // Biometrics-only: even a match is not evaluated while locked out.
        await device.present(.match)
        await expectKeyboundError(.biometryLockout) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(await device.availability().biometryError == .biometryLockout)
        // The passcode clears it.
        await device.present(.passcode("123456"))
        _ = try await device.verify(.devicePasscode, prompt: prompt)
        #expect(await device.snapshot().isBiometryLockedOut == false)
        await device.present(.match)
        #expect(try await device.verify(.biometryCurrentSet, prompt: prompt).factors == [.biometry])
    }

    @Test func lockoutWithBiometryOrPasscodePolicyFallsToThePasscode() async throws {
        let (device, _) = try makeDevice(biometry: .faceID)
        for _ in 0..<2 {
            await device.present(.noMatch, .noMatch)
            await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) }
        }
        await device.present(.noMatch)  // the fifth
        await expectKeyboundError(.biometryLockout) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        await device.present(.passcode("000000"), .passcode("123456"))
        let verification = try await device.verify(.biometryOrPasscode, prompt: prompt)
        #expect(verification.factors == [.passcode])
        #expect(await device.snapshot().consecutiveFailedMatches == 0)
    }

    @Test func aMatchResetsTheConsecutiveFailureCount() async throws {
        let (device, _) = try makeDevice(biometry: .touchID)
        await device.present(.noMatch, .noMatch, .match)
        _ = try await device.verify(.biometryCurrentSet, prompt: prompt)
        await device.present(.noMatch, .noMatch, .match)
        _ = try await device.verify(.biometryCurrentSet, prompt: prompt)
        #expect(await device.snapshot().isBiometryLockedOut == false)
    }

    // Rule 4: availability.
    @Test func availabilityErrors() async throws {
        let (noSensor, _) = try makeDevice(biometry: .none, enrolled: 0)
        let notAvailable = await expectKeyboundError(.biometryNotAvailable) {
            try await noSensor.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(notAvailable?.native == .laError(-6))
        #expect(notAvailable?.recovery == .usePassword)

        let (nothingEnrolled, _) = try makeDevice(enrolled: 0)
        let notEnrolled = await expectKeyboundError(.biometryNotEnrolled) {
            try await nothingEnrolled.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(notEnrolled?.native == .laError(-7))
        #expect(notEnrolled?.recovery == .enrollBiometrics)

        let (noPasscode, _) = try makeDevice(passcode: nil)
        let passcodeNotSet = await expectKeyboundError(.passcodeNotSet) {
            try await noPasscode.verify(.biometryCurrentSet, prompt: prompt)
        }
        #expect(passcodeNotSet?.native == .laError(-5))
        #expect(passcodeNotSet?.recovery == .setPasscode)
        #expect(await noPasscode.availability().biometryError == .passcodeNotSet)
        #expect(await noPasscode.availability().canUseBiometry == false)
    }

    // Rule 5: items and keys enforce their own access control.
    @Test func aProtectedReadNeedsAVerificationTheDeviceIssued() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("token".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        let missing = await expectKeyboundError(.authenticationFailed) {
            try await device.read("t", verification: nil)
        }
        #expect(missing?.native == .osStatus(-25293))

        // A verification made by another device (a forgery as far as this one knows).
        let (other, _) = try makeDevice()
        await other.present(.match)
        let foreign = try await other.verify(.biometryCurrentSet, prompt: prompt)
        await expectKeyboundError(.authenticationFailed) { try await device.read("t", verification: foreign) }

        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        #expect(try await device.read("t", verification: verification) == Data("token".utf8))
    }

    @Test func aKeySignsOnlyAfterVerificationAndItsPrivatePartNeverLeaves() async throws {
        let (device, _) = try makeDevice()
        let spki = try await device.createKey("k", policy: .biometryCurrentSet)
        let publicKey = try P256PublicKey(spkiDER: spki)
        let message = Data("challenge".utf8)
        await expectKeyboundError(.authenticationFailed) {
            try await device.sign(message, with: "k", verification: nil)
        }
        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        let signature = try await device.sign(message, with: "k", verification: verification)
        #expect(publicKey.isValidSignature(try P256Signature(derRepresentation: signature), for: message))
        #expect(
            !publicKey.isValidSignature(
                try P256Signature(derRepresentation: signature), for: Data("other".utf8)))
        #expect(try await device.publicKey("k") == spki)
        // The snapshot lists names only, no key material.
        let snapshot = try JSONEncoder().encode(await device.snapshot())
        #expect(String(decoding: snapshot, as: UTF8.self).contains("privateKey") == false)
    }

    // Rule 6: enrollment changes and passcode removal.
    @Test func enrollmentChangeDestroysCurrentSetMaterialButNotBiometryAny() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("a".utf8), as: "current", policy: .biometryCurrentSet, verification: nil)
        try await device.store(Data("b".utf8), as: "any", policy: .biometryAny, verification: nil)
        try await device.store(Data("c".utf8), as: "presence", policy: .userPresence, verification: nil)
        _ = try await device.createKey("current-key", policy: .biometryCurrentSet)
        _ = try await device.createKey("any-key", policy: .biometryAny)
        try await device.enroll()
        #expect(await device.exists("current") == false)
        #expect(await device.keyExists("current-key") == false)
        let error = await expectKeyboundError(.itemNotFound) {
            try await device.read("current", verification: nil)
        }
        #expect(error?.native == .osStatus(-25300))
        await device.present(.match, .match)
        let verification = try await device.verify(
            try AccessPolicy.biometryAny.reusing(for: 10), prompt: prompt)
        #expect(try await device.read("any", verification: verification) == Data("b".utf8))
        #expect(try await device.read("presence", verification: verification) == Data("c".utf8))
        #expect(await device.keyExists("any-key"))
    }

    @Test func aVerificationFromBeforeAnEnrollmentChangeNoLongerSatisfiesCurrentSet() async throws {
        let (device, _) = try makeDevice()
        await device.present(.match)
        let old = try await device.verify(.biometryCurrentSet, prompt: prompt)
        try await device.enroll()
        try await device.store(Data("x".utf8), as: "new", policy: .biometryCurrentSet, verification: nil)
        await expectKeyboundError(.authenticationFailed) { try await device.read("new", verification: old) }
    }

    @Test func removingThePasscodeDeletesWhenPasscodeSetMaterial() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("a".utf8), as: "strict", policy: .biometryCurrentSet, verification: nil)
        _ = try await device.createKey("strict-key", policy: .devicePasscode)
        let loose = try AccessPolicy(accessibility: .afterFirstUnlockThisDeviceOnly, constraints: [])
        try await device.store(Data("b".utf8), as: "loose", policy: loose, verification: nil)
        await device.removePasscode()
        #expect(await device.exists("strict") == false)
        #expect(await device.keyExists("strict-key") == false)
        #expect(try await device.read("loose", verification: nil) == Data("b".utf8))
        await expectKeyboundError(.passcodeNotSet) {
            try await device.store(
                Data("c".utf8), as: "strict", policy: .biometryCurrentSet, verification: nil)
        }
    }

    // Rule 7: a locked device.
    @Test func lockedDeviceRefusesWhenUnlockedItemsButReadsAfterFirstUnlockItems() async throws {
        let (device, _) = try makeDevice()
        let whenUnlocked = try AccessPolicy(accessibility: .whenUnlockedThisDeviceOnly, constraints: [])
        let afterFirst = try AccessPolicy(accessibility: .afterFirstUnlockThisDeviceOnly, constraints: [])
        try await device.store(Data("u".utf8), as: "u", policy: whenUnlocked, verification: nil)
        try await device.store(Data("f".utf8), as: "f", policy: afterFirst, verification: nil)
        await device.lock()
        let locked = await expectKeyboundError(.interactionNotAllowed) {
            try await device.read("u", verification: nil)
        }
        #expect(locked?.native == .osStatus(-25308))
        #expect(locked?.recovery == .waitForUnlock)
        #expect(try await device.read("f", verification: nil) == Data("f".utf8))
        // No prompt can show on a locked device.
        await expectKeyboundError(.interactionNotAllowed) {
            try await device.verify(.biometryCurrentSet, prompt: prompt)
        }
        // After a reboot, nothing until the first unlock.
        await device.reboot()
        await expectKeyboundError(.interactionNotAllowed) { try await device.read("f", verification: nil) }
        await device.unlock()
        #expect(try await device.read("u", verification: nil) == Data("u".utf8))
        #expect(try await device.read("f", verification: nil) == Data("f".utf8))
    }

    // Rule 8: Apple-native codes — checked throughout; itemNotFound here.
    @Test func missingItemsReportErrSecItemNotFound() async throws {
        let (device, _) = try makeDevice()
        let error = await expectKeyboundError(.itemNotFound) {
            try await device.read("nothing", verification: nil)
        }
        #expect(error?.native == .osStatus(-25300))
        await expectKeyboundError(.itemNotFound) { try await device.publicKey("nothing") }
        // Deleting what is not there succeeds.
        await device.delete("nothing")
        await device.deleteKey("nothing")
    }

    // Rule 9: persistence, encrypted and atomic.
    @Test func aDeviceSurvivesSaveAndLoadAndTheFileIsSealed() async throws {
        let (device, _) = try makeDevice()
        try await device.store(
            Data("secret-token".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        let spki = try await device.createKey("k", policy: .biometryCurrentSet)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("device.state")
        let key = SecureRandom.bytes(32)
        try await device.save(to: file, key: key)
        let bytes = try Data(contentsOf: file)
        #expect(bytes.range(of: Data("secret-token".utf8)) == nil)
        #expect(bytes.range(of: Data("biometryCurrentSet".utf8)) == nil)

        let loaded = try EmulatedDevice.load(from: file, key: key)
        #expect(try await loaded.publicKey("k") == spki)
        await loaded.present(.match)
        let verification = try await loaded.verify(.biometryCurrentSet, prompt: prompt)
        #expect(try await loaded.read("t", verification: verification) == Data("secret-token".utf8))

        #expect(throws: KeyboundError.invalidInput) {
            try EmulatedDevice.load(from: file, key: SecureRandom.bytes(32))
        }
        var tampered = bytes
        tampered[tampered.count / 2] ^= 1
        try tampered.write(to: file)
        #expect(throws: KeyboundError.invalidInput) { try EmulatedDevice.load(from: file, key: key) }
    }
}
