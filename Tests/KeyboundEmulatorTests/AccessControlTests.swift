import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundTestSupport
import Testing

/// Reuse windows, UI-gate bypass attempts, and the typed invalidation signal.
@Suite struct AccessControlTests {
    @Test func reuseWindowBoundsAreZeroToThreeHundredSeconds() throws {
        #expect(try AccessPolicy.biometryCurrentSet.reusing(for: 0).reuseDuration == 0)
        #expect(try AccessPolicy.biometryCurrentSet.reusing(for: 300).reuseDuration == 300)
        #expect(throws: KeyboundError.invalidInput) {
            try AccessPolicy.biometryCurrentSet.reusing(for: 300.5)
        }
        #expect(throws: KeyboundError.invalidInput) { try AccessPolicy.biometryCurrentSet.reusing(for: -1) }
        #expect(throws: KeyboundError.invalidInput) {
            try AccessPolicy.biometryCurrentSet.reusing(for: .infinity)
        }
    }

    @Test func aSingleUseVerificationWorksOnceAndExpires() async throws {
        let (device, time) = try makeDevice()
        try await device.store(Data("v".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        await device.present(.match, .match)
        let once = try await device.verify(.biometryCurrentSet, prompt: prompt)
        #expect(try await device.read("t", verification: once) == Data("v".utf8))
        await expectKeyboundError(.authenticationFailed) { try await device.read("t", verification: once) }

        let late = try await device.verify(.biometryCurrentSet, prompt: prompt)
        time.advance(by: Verification.singleUseLifetime + 1)
        await expectKeyboundError(.authenticationFailed) { try await device.read("t", verification: late) }
    }

    @Test func aReusableVerificationWorksWithinItsWindowOnly() async throws {
        let (device, time) = try makeDevice()
        try await device.store(Data("v".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        await device.present(.match)
        let verification = try await device.verify(
            try AccessPolicy.biometryCurrentSet.reusing(for: 300), prompt: prompt)
        for _ in 0..<3 {
            #expect(try await device.read("t", verification: verification) == Data("v".utf8))
        }
        time.advance(by: 299)
        #expect(try await device.read("t", verification: verification) == Data("v".utf8))
        time.advance(by: 2)
        await expectKeyboundError(.authenticationFailed) {
            try await device.read("t", verification: verification)
        }
    }

    @Test func aVerificationForAnotherPolicyDoesNotUnlockBiometricMaterial() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("v".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        _ = try await device.createKey("k", policy: .biometryCurrentSet)
        // The user typed the passcode: that satisfies a passcode policy, not a biometric one.
        await device.present(.passcode("123456"))
        let byPasscode = try await device.verify(
            try AccessPolicy.devicePasscode.reusing(for: 60), prompt: prompt)
        await expectKeyboundError(.authenticationFailed) {
            try await device.read("t", verification: byPasscode)
        }
        await expectKeyboundError(.authenticationFailed) {
            try await device.sign(Data(), with: "k", verification: byPasscode)
        }
        // And a biometric verification does not open a passcode-only item.
        try await device.store(Data("p".utf8), as: "p", policy: .devicePasscode, verification: nil)
        await device.present(.match)
        let byFace = try await device.verify(.biometryAny, prompt: prompt)
        await expectKeyboundError(.authenticationFailed) { try await device.read("p", verification: byFace) }
    }

    @Test func noVerificationPolicyReadsWithoutPrompt() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("pref".utf8), as: "p", policy: .noVerification, verification: nil)
        #expect(try await device.read("p", verification: nil) == Data("pref".utf8))
    }

    @Test func storingTwiceReplacesTheItem() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("1".utf8), as: "p", policy: .noVerification, verification: nil)
        try await device.store(Data("2".utf8), as: "p", policy: .noVerification, verification: nil)
        #expect(try await device.read("p", verification: nil) == Data("2".utf8))
    }

    @Test func updateNeedsTheSameVerificationAsRead() async throws {
        let (device, _) = try makeDevice()
        try await device.store(Data("1".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        await expectKeyboundError(.authenticationFailed) {
            try await device.update(Data("2".utf8), as: "t", verification: nil)
        }
        await expectKeyboundError(.itemNotFound) {
            try await device.update(Data("2".utf8), as: "none", verification: nil)
        }
        await device.present(.match, .match)
        try await device.update(
            Data("2".utf8), as: "t",
            verification: try await device.verify(.biometryCurrentSet, prompt: prompt))
        #expect(
            try await device.read(
                "t", verification: try await device.verify(.biometryCurrentSet, prompt: prompt))
                == Data("2".utf8))
    }

    @Test func applicationPasswordMustMatch() async throws {
        let (device, _) = try makeDevice()
        let policy = try AccessPolicy(constraints: [.applicationPassword])
        let right = try VerificationPrompt(reason: "Unlock", applicationPassword: "correct horse")
        let wrong = try VerificationPrompt(reason: "Unlock", applicationPassword: "battery staple")
        await expectKeyboundError(.authenticationFailed) {
            try await device.store(Data("x".utf8), as: "a", policy: policy, verification: nil)
        }
        try await device.store(
            Data("x".utf8), as: "a", policy: policy,
            verification: try await device.verify(policy, prompt: right))
        await expectKeyboundError(.authenticationFailed) {
            try await device.read("a", verification: try await device.verify(policy, prompt: wrong))
        }
        #expect(
            try await device.read("a", verification: try await device.verify(policy, prompt: right))
                == Data("x".utf8))
    }

    @Test func sealedDataOpensOnlyAfterVerification() async throws {
        let (device, _) = try makeDevice()
        _ = try await device.createKey("seal", policy: .biometryCurrentSet)
        let sealed = try await device.encrypt(Data("large secret".utf8), for: "seal")
        await expectKeyboundError(.authenticationFailed) {
            try await device.decrypt(sealed, with: "seal", verification: nil)
        }
        await device.present(.match, .match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        #expect(
            try await device.decrypt(sealed, with: "seal", verification: verification)
                == Data("large secret".utf8))
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        let again = try await device.verify(.biometryCurrentSet, prompt: prompt)
        await expectKeyboundError(.invalidInput) {
            try await device.decrypt(tampered, with: "seal", verification: again)
        }
    }

    // The typed invalidation signal through ProtectedStore / ProtectedKeys.
    @Test func protectedStoreTellsInvalidatedFromNeverStored() async throws {
        let (device, _) = try makeDevice()
        let store = ProtectedStore(store: device, verifier: device)
        try await store.store("refresh-123", as: "refresh", policy: .biometryCurrentSet)
        #expect(try await store.status("refresh") == .present)
        #expect(try await store.status("never") == .absent)
        await device.present(.match)
        let token = try await store.read(
            "refresh", as: String.self,
            verification: try await device.verify(.biometryCurrentSet, prompt: prompt))
        #expect(token == "refresh-123")

        try await device.enroll()
        #expect(try await store.status("refresh") == .invalidated)
        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        let error = await expectKeyboundError(.invalidated) {
            try await store.read("refresh", verification: verification)
        }
        #expect(error?.recovery == .reenroll)
        // The dead material and its marker are gone: now it reads as never stored.
        #expect(try await store.status("refresh") == .absent)
        await expectKeyboundError(.itemNotFound) { try await store.read("refresh", verification: nil) }
        await expectKeyboundError(.itemNotFound) { try await store.read("never", verification: nil) }
    }

    @Test func passcodeRemovalIsReportedAsInvalidated() async throws {
        let (device, _) = try makeDevice()
        let store = ProtectedStore(store: device, verifier: device)
        try await store.store(Data("t".utf8), as: "t", policy: .devicePasscode)
        await device.removePasscode()
        await expectKeyboundError(.invalidated) { try await store.read("t", verification: nil) }
    }

    @Test func deliberateDeleteIsNotInvalidation() async throws {
        let (device, _) = try makeDevice()
        let store = ProtectedStore(store: device, verifier: device)
        try await store.store(Data("t".utf8), as: "t", policy: .biometryCurrentSet)
        try await store.delete("t")
        try await device.enroll()
        #expect(try await store.status("t") == .absent)
        await expectKeyboundError(.itemNotFound) { try await store.read("t", verification: nil) }
    }

    @Test func protectedKeysReportInvalidationAfterEnrollmentChange() async throws {
        let (device, _) = try makeDevice()
        let keys = ProtectedKeys(vault: device, markers: device, verifier: device)
        _ = try await keys.createKey("device-key", policy: .biometryCurrentSet)
        #expect(try await keys.status("device-key") == .present)
        await device.unenrollAll()
        try await device.enroll()
        #expect(try await keys.status("device-key") == .invalidated)
        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        await expectKeyboundError(.invalidated) {
            try await keys.sign(Data(), with: "device-key", verification: verification)
        }
        #expect(try await keys.status("device-key") == .absent)
    }

    /// Rule 6: `invalidated` carries what a real Keychain answers for dead material,
    /// errSecItemNotFound (-25300) — whether the marker saw the enrollment change before any
    /// call, or the backend answered "not found" (the passcode's removal), for items and keys.
    @Test func invalidatedCarriesErrSecItemNotFound() async throws {
        let itemNotFound = KeyboundError.NativeCode.osStatus(-25300)
        let (device, _) = try makeDevice()
        let store = ProtectedStore(store: device, verifier: device)
        let keys = ProtectedKeys(vault: device, markers: device, verifier: device)
        try await store.store(Data("t".utf8), as: "current", policy: .biometryCurrentSet)
        try await store.store(Data("u".utf8), as: "updated", policy: .biometryCurrentSet)
        try await store.store(Data("p".utf8), as: "pin", policy: .devicePasscode)
        _ = try await keys.createKey("device-key", policy: .biometryCurrentSet)
        _ = try await keys.createKey("presence-key", policy: .userPresence)

        try await device.enroll()
        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        let read = await expectKeyboundError(.invalidated) {
            try await store.read("current", verification: verification)
        }
        #expect(read?.native == itemNotFound, "\(String(describing: read))")
        let update = await expectKeyboundError(.invalidated) {
            try await store.update(Data("v".utf8), as: "updated", verification: nil)
        }
        #expect(update?.native == itemNotFound, "\(String(describing: update))")
        let sign = await expectKeyboundError(.invalidated) {
            try await keys.sign(Data("challenge".utf8), with: "device-key", verification: nil)
        }
        #expect(sign?.native == itemNotFound, "\(String(describing: sign))")

        await device.removePasscode()
        let pin = await expectKeyboundError(.invalidated) { try await store.read("pin", verification: nil) }
        #expect(pin?.native == itemNotFound, "\(String(describing: pin))")
        let presence = await expectKeyboundError(.invalidated) {
            try await keys.sign(Data("challenge".utf8), with: "presence-key", verification: nil)
        }
        #expect(presence?.native == itemNotFound, "\(String(describing: presence))")
    }

    /// Every code of the error table that a device can produce, produced by the emulator.
    @Test func everyDeviceErrorCodeIsReachable() async throws {
        var seen: Set<KeyboundError.Code> = []
        func record(_ error: KeyboundError?) { if let error { seen.insert(error.code) } }
        let (device, _) = try makeDevice()
        for outcome in [PresentationOutcome.userCancel, .systemCancel, .appCancel] {
            await device.present(outcome)
            record(await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) })
        }
        // Face ID: two failed matches, then the fallback button; then twice more and a retry
        // (authenticationFailed); the fifth failed match locks out.
        await device.present(.noMatch, .noMatch, .userFallback)
        record(await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) })
        await device.present(.noMatch, .noMatch, .match)
        record(await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) })
        await device.present(.noMatch)
        record(await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) })
        record(await expectKeyboundError { try await device.read("missing", verification: nil) })
        await device.lock()
        record(await expectKeyboundError { try await device.read("missing-but-locked", verification: nil) })
        record(await expectKeyboundError { try await device.verify(.biometryCurrentSet, prompt: prompt) })
        let (noSensor, _) = try makeDevice(biometry: .none, enrolled: 0)
        record(await expectKeyboundError { try await noSensor.verify(.biometryAny, prompt: prompt) })
        let (unenrolled, _) = try makeDevice(enrolled: 0)
        record(await expectKeyboundError { try await unenrolled.verify(.biometryAny, prompt: prompt) })
        let (noPasscode, _) = try makeDevice(passcode: nil)
        record(await expectKeyboundError { try await noPasscode.verify(.devicePasscode, prompt: prompt) })
        let (changing, _) = try makeDevice()
        let store = ProtectedStore(store: changing, verifier: changing)
        try await store.store(Data(), as: "x", policy: .biometryCurrentSet)
        try await changing.enroll()
        record(await expectKeyboundError { try await store.read("x", verification: nil) })
        let badName = "not a valid name!"
        record(await expectKeyboundError { try ItemName(badName) })

        let expected: Set<KeyboundError.Code> = [
            .userCancel, .systemCancel, .appCancel, .userFallback, .authenticationFailed, .biometryLockout,
            .biometryNotAvailable, .biometryNotEnrolled, .passcodeNotSet, .invalidated, .itemNotFound,
            .interactionNotAllowed, .invalidInput,
        ]
        #expect(seen == expected)
    }
}

/// One rule for how long a verification lives (`Verification.admits`), which the Apple backend
/// applies too: its age is measured on the device's clock, and a clock set back proves nothing.
@Suite struct VerificationLifetimeTests {
    @Test func aVerificationFromTheFutureIsRefused() async throws {
        let (device, time) = try makeDevice()
        try await device.store(Data("v".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        await device.present(.match, .match)
        let single = try await device.verify(.biometryCurrentSet, prompt: prompt)
        let reusable = try await device.verify(
            try AccessPolicy.biometryCurrentSet.reusing(for: 300), prompt: prompt)
        // The clock is set back an hour: neither verification can be shown to be fresh.
        time.advance(by: -3600)
        #expect(
            await expectKeyboundError { try await device.read("t", verification: single) }
                == .authenticationFailed)
        #expect(
            await expectKeyboundError { try await device.read("t", verification: reusable) }
                == .authenticationFailed)
    }

    @Test func theSingleUseLifetimeIsThirtySecondsOnEveryBackend() async throws {
        let (device, time) = try makeDevice()
        try await device.store(Data("v".utf8), as: "t", policy: .biometryCurrentSet, verification: nil)
        await device.present(.match, .match)
        #expect(Verification.singleUseLifetime == 30)
        let onTime = try await device.verify(.biometryCurrentSet, prompt: prompt)
        time.advance(by: 30)
        #expect(try await device.read("t", verification: onTime) == Data("v".utf8))
        let late = try await device.verify(.biometryCurrentSet, prompt: prompt)
        time.advance(by: 30.5)
        #expect(
            await expectKeyboundError { try await device.read("t", verification: late) }
                == .authenticationFailed)
    }
}
