import Foundation
import Keybound
import Testing

@Suite struct AccessPolicyTests {
    @Test func presetsMatchTheDesign() {
        #expect(AccessPolicy.biometryCurrentSet.constraints == [.biometryCurrentSet])
        #expect(AccessPolicy.biometryOrPasscode.constraints == [.biometryCurrentSet, .devicePasscode])
        #expect(AccessPolicy.biometryOrPasscode.combination == .or)
        #expect(AccessPolicy.userPresence.constraints == [.userPresence])
        #expect(AccessPolicy.devicePasscode.constraints == [.devicePasscode])
        for preset in [AccessPolicy.biometryCurrentSet, .biometryOrPasscode, .userPresence, .devicePasscode] {
            #expect(preset.accessibility == .whenPasscodeSetThisDeviceOnly)
            #expect(preset.reuseDuration == 0)
            #expect(preset.isSynchronizable == false)
        }
    }

    @Test func biometricMaterialIsNeverSynchronizableOrPortable() {
        #expect(throws: KeyboundError.invalidInput) {
            try AccessPolicy(accessibility: .whenUnlocked, constraints: [.biometryCurrentSet])
        }
        #expect(throws: KeyboundError.invalidInput) {
            try AccessPolicy(accessibility: .afterFirstUnlock, constraints: [.userPresence])
        }
        #expect(throws: KeyboundError.invalidInput) {
            try AccessPolicy(constraints: [.devicePasscode, .devicePasscode])
        }
        let preference = try? AccessPolicy(accessibility: .afterFirstUnlock, constraints: [])
        #expect(preference?.isSynchronizable == true)
    }

    @Test func passcodeFallbackAndBiometryRequirementAreDerivedFromConstraints() throws {
        #expect(AccessPolicy.biometryCurrentSet.requiresBiometry)
        #expect(AccessPolicy.biometryOrPasscode.acceptsPasscodeAlone)
        #expect(!AccessPolicy.biometryOrPasscode.requiresBiometry)
        let both = try AccessPolicy(constraints: [.biometryAny, .devicePasscode], combination: .and)
        #expect(!both.acceptsPasscodeAlone)
        #expect(AccessPolicy.biometryCurrentSet.isBoundToCurrentEnrollment)
        #expect(!AccessPolicy.biometryAny.isBoundToCurrentEnrollment)
        #expect(!AccessPolicy.userPresence.isBoundToCurrentEnrollment)
    }

    @Test func dataClassesMapToPresets() {
        #expect(DataClass.preferences.policy == .noVerification)
        #expect(DataClass.sessionToken.policy == .biometryCurrentSet)
        #expect(DataClass.signingKey.policy == .biometryCurrentSet)
    }

    @Test func policiesRoundTripThroughCodable() throws {
        let policy = try AccessPolicy.biometryOrPasscode.reusing(for: 30)
        let decoded = try JSONDecoder().decode(AccessPolicy.self, from: JSONEncoder().encode(policy))
        #expect(decoded == policy)
        #expect(AccessPolicy.named("biometryOrPasscode") == .biometryOrPasscode)
        #expect(AccessPolicy.named("always") == nil)
    }
}

@Suite struct ItemNameAndPromptTests {
    @Test func namesAreValidatedOnce() throws {
        let good = "refresh-token_v1.2"
        #expect(try ItemName(good).rawValue == good)
        // A literal is checked too: it goes through the literal initializer.
        #expect(ItemName("device-key").rawValue == "device-key")
        for bad in [
            "", "has space", "slash/name", String(repeating: "a", count: 129), "émoji", "~keybound.x",
        ] {
            #expect(throws: KeyboundError.invalidInput, "\(bad)") { try ItemName(bad) }
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(ItemName.self, from: Data("\"a b\"".utf8))
        }
    }

    @Test func promptsNeedAReason() {
        #expect(throws: KeyboundError.invalidInput) { try VerificationPrompt(reason: "  ") }
        #expect(throws: KeyboundError.invalidInput) {
            try VerificationPrompt(reason: String(repeating: "x", count: 257))
        }
    }
}

@Suite struct KeyboundErrorTests {
    @Test func recoveryFollowsTheErrorTable() {
        let table: [(KeyboundError, KeyboundError.Recovery)] = [
            (.userCancel, .silent), (.systemCancel, .silent), (.appCancel, .silent),
            (.userFallback, .usePassword), (.authenticationFailed, .retry), (.biometryLockout, .usePasscode),
            (.biometryNotAvailable, .usePassword), (.biometryNotEnrolled, .enrollBiometrics),
            (.passcodeNotSet, .setPasscode), (.invalidated, .reenroll), (.itemNotFound, .none),
            (.interactionNotAllowed, .waitForUnlock), (.duplicateItem, .none),
            (.sessionExpired, .usePassword), (.throttled, .retryLater), (.network, .retry),
        ]
        for (error, recovery) in table {
            #expect(error.recovery == recovery, "\(error)")
        }
    }

    @Test func equalityIsByCodeAndDescriptionNamesIt() {
        let native = KeyboundError(.biometryLockout, native: .laError(-8), message: "five failures")
        #expect(native == .biometryLockout)
        #expect(native != .userCancel)
        #expect(native.description == "KeyboundError.biometryLockout [LAError(-8)]: five failures")
        #expect(KeyboundError.userCancel.isCancellation)
        #expect(!KeyboundError.userFallback.isCancellation)
    }
}

@Suite struct DecodedPolicyTests {
    @Test func aDecodedPolicyIsValidatedLikeOneMadeInCode() throws {
        let tooLong = Data(
            #"{"accessibility":"whenPasscodeSetThisDeviceOnly","constraints":["biometryAny"],"combination":"or","reuseDuration":1000000}"#
                .utf8)
        #expect(throws: KeyboundError.invalidInput) {
            try JSONDecoder().decode(AccessPolicy.self, from: tooLong)
        }
        let portableBiometric = Data(
            #"{"accessibility":"whenUnlocked","constraints":["biometryCurrentSet"],"combination":"or","reuseDuration":0}"#
                .utf8)
        #expect(throws: KeyboundError.invalidInput) {
            try JSONDecoder().decode(AccessPolicy.self, from: portableBiometric)
        }
    }
}
