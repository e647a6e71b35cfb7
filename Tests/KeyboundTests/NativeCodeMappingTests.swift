import Foundation
import Keybound
import KeyboundApple
import Testing

/// The native-code and access-control mappings of the Apple backends, tested on every platform.
/// `docs/apple-mapping.md` lists the same table; a change here must change it too.
@Suite("Native code mapping")
struct NativeCodeMappingTests {
    /// Every LAError code Keybound handles, with the error and recovery it becomes.
    static let laErrors: [(code: Int, expected: KeyboundError.Code, recovery: KeyboundError.Recovery)] = [
        (-1, .authenticationFailed, .retry),
        (-2, .userCancel, .silent),
        (-3, .userFallback, .usePassword),
        (-4, .systemCancel, .silent),
        (-5, .passcodeNotSet, .setPasscode),
        (-6, .biometryNotAvailable, .usePassword),
        (-7, .biometryNotEnrolled, .enrollBiometrics),
        (-8, .biometryLockout, .usePasscode),
        (-9, .appCancel, .silent),
        (-10, .appCancel, .silent),
        (-11, .biometryNotAvailable, .usePassword),
        (-12, .biometryNotAvailable, .usePassword),
        (-13, .biometryNotAvailable, .usePassword),
        (-14, .biometryNotAvailable, .usePassword),
        (-1004, .interactionNotAllowed, .waitForUnlock),
    ]

    @Test("LAError codes", arguments: laErrors)
    func laError(_ row: (code: Int, expected: KeyboundError.Code, recovery: KeyboundError.Recovery)) {
        let error = KeyboundError(laErrorCode: row.code)
        #expect(error.code == row.expected, "LAError \(row.code)")
        #expect(error.recovery == row.recovery, "LAError \(row.code)")
        #expect(error.native == .laError(row.code))
    }

    @Test("Unknown LAError codes are unexpected, keeping the native code")
    func unknownLAError() {
        let error = KeyboundError(laErrorCode: -9999)
        #expect(error.code == .unexpected)
        #expect(error.native?.value == -9999)
    }

    /// Every OSStatus Keybound handles, with the error and recovery it becomes.
    static let osStatuses: [(status: Int32, expected: KeyboundError.Code, recovery: KeyboundError.Recovery)] =
        [
            (-25300, .itemNotFound, .none),
            (-25299, .duplicateItem, .none),
            (-25293, .authenticationFailed, .retry),
            (-25308, .interactionNotAllowed, .waitForUnlock),
            (-128, .userCancel, .silent),
            (-50, .invalidInput, .none),
            (-25291, .notSupported, .none),
            (-34018, .notSupported, .none),
            (-4, .notSupported, .none),
            (-26275, .unexpected, .none),
        ]

    @Test("OSStatus values", arguments: osStatuses)
    func osStatus(_ row: (status: Int32, expected: KeyboundError.Code, recovery: KeyboundError.Recovery))
        throws
    {
        let error = try #require(KeyboundError(osStatus: row.status))
        #expect(error.code == row.expected, "OSStatus \(row.status)")
        #expect(error.recovery == row.recovery, "OSStatus \(row.status)")
        #expect(error.native == .osStatus(row.status))
    }

    @Test("errSecSuccess is no error")
    func success() {
        #expect(KeyboundError(osStatus: 0) == nil)
    }

    @Test("Error domains route to the right table")
    func domains() {
        #expect(
            KeyboundError(nativeDomain: "com.apple.LocalAuthentication", code: -8).code == .biometryLockout)
        #expect(
            KeyboundError(nativeDomain: "NSOSStatusErrorDomain", code: -25308).code == .interactionNotAllowed)
        #expect(KeyboundError(nativeDomain: "NSOSStatusErrorDomain", code: 0).code == .unexpected)
        #expect(KeyboundError(nativeDomain: "CryptoTokenKit", code: -4).code == .userCancel)
        #expect(KeyboundError(nativeDomain: "CryptoTokenKit", code: -9).code == .authenticationFailed)
        #expect(KeyboundError(nativeDomain: "CryptoTokenKit", code: -5).code == .authenticationFailed)
        #expect(KeyboundError(nativeDomain: "CryptoTokenKit", code: -6).code == .itemNotFound)
        #expect(KeyboundError(nativeDomain: "CryptoTokenKit", code: -8).code == .invalidInput)
        #expect(KeyboundError(nativeDomain: "NSCocoaErrorDomain", code: 4).code == .unexpected)
    }

    /// Every `ASAuthorizationError` code (passkey ceremonies), with the error and recovery it becomes.
    static let authorizationErrors:
        [(code: Int, expected: KeyboundError.Code, recovery: KeyboundError.Recovery)] =
            [
                (1000, .unexpected, .none),
                (1001, .userCancel, .silent),
                (1002, .unexpected, .none),
                (1003, .notSupported, .none),
                (1004, .authenticationFailed, .retry),
                (1005, .itemNotFound, .none),
                (1006, .duplicateItem, .none),
                (1099, .unexpected, .none),
            ]

    @Test("ASAuthorizationError codes", arguments: authorizationErrors)
    func authorizationError(
        _ row: (code: Int, expected: KeyboundError.Code, recovery: KeyboundError.Recovery)
    ) {
        let error = KeyboundError(
            nativeDomain: "com.apple.AuthenticationServices.AuthorizationError", code: row.code)
        #expect(error.code == row.expected, "ASAuthorizationError \(row.code)")
        #expect(error.recovery == row.recovery, "ASAuthorizationError \(row.code)")
        #expect(error.message?.contains("\(row.code)") == true)
    }

    /// Every `DCError` code (App Attest), with the error and recovery it becomes.
    static let deviceCheckErrors:
        [(code: Int, expected: KeyboundError.Code, recovery: KeyboundError.Recovery)] = [
            (0, .unexpected, .none),
            (1, .notSupported, .none),
            (2, .invalidInput, .none),
            (3, .invalidated, .reenroll),
            (4, .network, .retry),
            (99, .unexpected, .none),
        ]

    @Test("DCError codes", arguments: deviceCheckErrors)
    func deviceCheckError(_ row: (code: Int, expected: KeyboundError.Code, recovery: KeyboundError.Recovery))
    {
        let error = KeyboundError(nativeDomain: "com.apple.devicecheck.error", code: row.code)
        #expect(error.code == row.expected, "DCError \(row.code)")
        #expect(error.recovery == row.recovery, "DCError \(row.code)")
    }

    // MARK: AccessPolicy → SecAccessControl

    static let itemPresets: [(name: String, policy: AccessPolicy, flags: [AccessControlFlag]?)] = [
        ("biometryCurrentSet", .biometryCurrentSet, [.biometryCurrentSet]),
        ("biometryOrPasscode", .biometryOrPasscode, [.biometryCurrentSet, .devicePasscode, .or]),
        ("userPresence", .userPresence, [.userPresence]),
        ("devicePasscode", .devicePasscode, [.devicePasscode]),
        ("biometryAny", .biometryAny, [.biometryAny]),
        ("noVerification", .noVerification, nil),
    ]

    @Test("Every preset maps to its SecAccessControl flags (items)", arguments: itemPresets)
    func itemPreset(_ row: (name: String, policy: AccessPolicy, flags: [AccessControlFlag]?)) {
        let access = AppleAccessControl.item(row.policy)
        #expect(access.flags == row.flags, "\(row.name)")
        #expect(access.synchronizable == false, "\(row.name)")
        let expectedAccessibility =
            row.policy.requiresVerification
            ? "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly"
            : "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly"
        #expect(access.accessibility == expectedAccessibility, "\(row.name)")
    }

    @Test("Every preset maps to privateKeyUsage plus its flags (Secure Enclave keys)", arguments: itemPresets)
    func keyPreset(_ row: (name: String, policy: AccessPolicy, flags: [AccessControlFlag]?)) throws {
        let access = try AppleAccessControl.key(row.policy)
        #expect(access.flags == [.privateKeyUsage] + (row.flags ?? []), "\(row.name)")
        #expect(access.synchronizable == false, "\(row.name)")
    }

    @Test("Named presets and data classes use the same mapping")
    func namedPresets() throws {
        for name in [
            "none", "biometryCurrentSet", "biometryAny", "userPresence", "devicePasscode",
            "biometryOrPasscode",
        ] {
            let policy = try #require(AccessPolicy.named(name))
            #expect(AppleAccessControl.item(policy).accessibility.hasSuffix("ThisDeviceOnly"), "\(name)")
        }
        #expect(
            try AppleAccessControl.key(DataClass.signingKey.policy).flags == [
                .privateKeyUsage, .biometryCurrentSet,
            ])
    }

    @Test("The DPoP key: privateKeyUsage alone (no user presence), this device only, after the first unlock")
    func dpopKey() throws {
        let access = try AppleAccessControl.key(DPoPKey.policy)
        #expect(access.flags == [.privateKeyUsage])
        #expect(access.accessibility == "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly")
        #expect(!access.synchronizable && !DPoPKey.policy.requiresVerification)
    }

    @Test("An and-combination and the application password")
    func andCombination() throws {
        let policy = try AccessPolicy(
            constraints: [.biometryCurrentSet, .applicationPassword], combination: .and)
        #expect(AppleAccessControl.item(policy).flags == [.biometryCurrentSet, .applicationPassword, .and])
        #expect(LocalAuthenticationPolicy(policy) == .deviceOwnerAuthenticationWithBiometrics)
        let passwordOnly = try AccessPolicy(constraints: [.applicationPassword])
        #expect(LocalAuthenticationPolicy(passwordOnly) == .applicationPasswordOnly)
    }

    @Test("Every accessibility class has its Security constant")
    func accessibility() {
        let names = AccessPolicy.Accessibility.allCases.map(AppleAccessControl.accessibilityName)
        #expect(
            names == [
                "kSecAttrAccessibleWhenUnlocked", "kSecAttrAccessibleWhenUnlockedThisDeviceOnly",
                "kSecAttrAccessibleAfterFirstUnlock", "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly",
                "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly",
            ])
    }

    @Test("Synchronizable only when the store opts in and the policy allows it")
    func synchronizable() throws {
        let portable = try AccessPolicy(accessibility: .afterFirstUnlock, constraints: [])
        #expect(AppleAccessControl.item(portable, allowSynchronization: true).synchronizable)
        #expect(!AppleAccessControl.item(portable, allowSynchronization: false).synchronizable)
        #expect(!AppleAccessControl.item(.noVerification, allowSynchronization: true).synchronizable)
        #expect(!AppleAccessControl.item(.biometryCurrentSet, allowSynchronization: true).synchronizable)
    }

    @Test("Keys refuse accessibility that could leave the device")
    func keyNeedsThisDeviceOnly() throws {
        let portable = try AccessPolicy(accessibility: .whenUnlocked, constraints: [])
        #expect(throws: KeyboundError.invalidInput) { try AppleAccessControl.key(portable) }
    }

    @Test("LocalAuthentication policy: biometrics only, or with the passcode")
    func laPolicy() {
        #expect(LocalAuthenticationPolicy(.biometryCurrentSet) == .deviceOwnerAuthenticationWithBiometrics)
        #expect(LocalAuthenticationPolicy(.biometryAny) == .deviceOwnerAuthenticationWithBiometrics)
        #expect(LocalAuthenticationPolicy(.biometryOrPasscode) == .deviceOwnerAuthentication)
        #expect(LocalAuthenticationPolicy(.userPresence) == .deviceOwnerAuthentication)
        #expect(LocalAuthenticationPolicy(.devicePasscode) == .deviceOwnerAuthentication)
    }

    // MARK: Public key encoding

    @Test("X9.63 point → SPKI DER equals OpenSSL's encoding of the same key")
    func spki() throws {
        // `openssl ec -pubout -outform DER` of a fresh P-256 key.
        let expected = Data(
            hex: "3059301306072a8648ce3d020106082a8648ce3d030107034200047ccc61627acd5a3bc2f44f18ad1eedea"
                + "2bc6f609e48611a0289415158458e69244befe3654861a525650c71cf182ea745305b1af10f3bb4d91fd8c6c0f644089"
        )
        let x963 = expected.suffix(65)
        #expect(try P256PublicKeyEncoding.spki(fromX963: Data(x963)) == expected)
        #expect(throws: KeyboundError.unexpected) {
            try P256PublicKeyEncoding.spki(fromX963: Data(x963.dropFirst()))
        }
        #expect(throws: KeyboundError.unexpected) {
            try P256PublicKeyEncoding.spki(fromX963: Data([0x02]) + x963.dropFirst())
        }
    }
}

extension Data {
    fileprivate init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }
}
