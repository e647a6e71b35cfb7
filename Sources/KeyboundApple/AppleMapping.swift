// The Apple-specific mappings, written without any Apple framework so that they compile and are
// tested on every platform. The gated files (Keychain, LocalAuthentication, Secure Enclave)
// convert these descriptions into Security types and nothing else decides them.

import Foundation
import Keybound

/// One member of `SecAccessControlCreateFlags`, by the name the Security framework gives it.
package enum AccessControlFlag: String, Sendable, Hashable, CaseIterable {
    case biometryCurrentSet
    case biometryAny
    case userPresence
    case devicePasscode
    case applicationPassword
    /// Any one constraint suffices (`.or`).
    case or
    /// Every constraint must be satisfied (`.and`).
    case and
    /// The private key may be used (sign, decrypt) only under the other constraints.
    case privateKeyUsage

    init(_ constraint: AccessPolicy.Constraint) {
        switch constraint {
        case .biometryCurrentSet: self = .biometryCurrentSet
        case .biometryAny: self = .biometryAny
        case .userPresence: self = .userPresence
        case .devicePasscode: self = .devicePasscode
        case .applicationPassword: self = .applicationPassword
        }
    }
}

/// What a Keychain item or Secure Enclave key is given for an ``AccessPolicy``: the
/// `kSecAttrAccessible…` class and, when the policy asks for a user verification, the flags
/// of its `SecAccessControl`. The one place that decides it (the Apple files only convert).
package struct AppleAccessControl: Sendable, Hashable {
    /// The `kSecAttrAccessible…` constant's name, e.g. `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`.
    package let accessibility: String
    /// The access-control flags; nil when the item needs no `SecAccessControl` at all (plain
    /// `kSecAttrAccessible`). Never nil for keys: they always carry `privateKeyUsage`.
    package let flags: [AccessControlFlag]?
    /// Whether the item may be synchronized through iCloud Keychain.
    package let synchronizable: Bool

    /// A generic-password item protected by `policy`.
    /// - Parameter allowSynchronization: the store's opt-in; honoured only where the policy
    ///   allows it (no verification, not `…ThisDeviceOnly`).
    package static func item(_ policy: AccessPolicy, allowSynchronization: Bool = false) -> AppleAccessControl
    {
        AppleAccessControl(
            accessibility: accessibilityName(policy.accessibility),
            flags: policy.requiresVerification ? constraintFlags(policy) : nil,
            synchronizable: allowSynchronization && policy.isSynchronizable)
    }

    /// A Secure Enclave private key protected by `policy`: the policy's flags plus `privateKeyUsage`.
    /// - Throws: ``KeyboundError/invalidInput`` when the accessibility is not `…ThisDeviceOnly`
    ///   (a Secure Enclave key can never leave the device, so anything else would be a lie).
    package static func key(_ policy: AccessPolicy) throws -> AppleAccessControl {
        guard policy.accessibility.isThisDeviceOnly else {
            throw KeyboundError.invalidInput(
                "a Secure Enclave key never leaves the device: use a …ThisDeviceOnly accessibility, "
                    + "not \(policy.accessibility)")
        }
        return AppleAccessControl(
            accessibility: accessibilityName(policy.accessibility),
            flags: [.privateKeyUsage] + constraintFlags(policy),
            synchronizable: false)
    }

    /// The constraints, joined by the combination flag when there are several.
    private static func constraintFlags(_ policy: AccessPolicy) -> [AccessControlFlag] {
        var flags = policy.constraints.map(AccessControlFlag.init)
        if policy.constraints.count > 1 {
            flags.append(policy.combination == .and ? .and : .or)
        }
        return flags
    }

    /// The Security constant's name for an accessibility class.
    package static func accessibilityName(_ accessibility: AccessPolicy.Accessibility) -> String {
        switch accessibility {
        case .whenUnlocked: "kSecAttrAccessibleWhenUnlocked"
        case .whenUnlockedThisDeviceOnly: "kSecAttrAccessibleWhenUnlockedThisDeviceOnly"
        case .afterFirstUnlock: "kSecAttrAccessibleAfterFirstUnlock"
        case .afterFirstUnlockThisDeviceOnly: "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly"
        case .whenPasscodeSetThisDeviceOnly: "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly"
        }
    }
}

/// Which LocalAuthentication policy a verification for an ``AccessPolicy`` evaluates.
package enum LocalAuthenticationPolicy: String, Sendable, Hashable {
    /// `LAPolicy.deviceOwnerAuthenticationWithBiometrics`: biometrics only, "Enter Password"
    /// goes back to the app (`userFallback`).
    case deviceOwnerAuthenticationWithBiometrics
    /// `LAPolicy.deviceOwnerAuthentication`: biometrics with the device passcode as fallback
    /// (and the way out of a biometric lockout).
    case deviceOwnerAuthentication
    /// Nothing to evaluate: the only constraint is the application password, which the
    /// Keychain checks itself against the credential set on the context.
    case applicationPasswordOnly

    /// The policy to evaluate for `policy`.
    package init(_ policy: AccessPolicy) {
        if policy.constraints == [.applicationPassword] {
            self = .applicationPasswordOnly
        } else if policy.requiresBiometry {
            self = .deviceOwnerAuthenticationWithBiometrics
        } else {
            self = .deviceOwnerAuthentication
        }
    }
}

extension KeyboundError {
    /// Error domains the Apple frameworks report through `NSError` / `CFError`.
    package enum NativeDomain {
        /// `LAErrorDomain`.
        package static let localAuthentication = "com.apple.LocalAuthentication"
        /// `NSOSStatusErrorDomain`: the code is an `OSStatus`.
        package static let osStatus = "NSOSStatusErrorDomain"
        /// `TKErrorDomain` (CryptoTokenKit): Secure Enclave key operations.
        package static let cryptoTokenKit = "CryptoTokenKit"
        /// `ASAuthorizationErrorDomain` (AuthenticationServices): passkey ceremonies.
        package static let authorization = "com.apple.AuthenticationServices.AuthorizationError"
        /// `DCErrorDomain` (DeviceCheck): App Attest.
        package static let deviceCheck = "com.apple.devicecheck.error"
    }

    /// `ASAuthorizationError.Code` raw values (ASAuthorizationError.h) that passkey ceremonies report.
    package enum ASAuthorizationErrorCode {
        package static let unknown = 1000
        package static let canceled = 1001
        package static let invalidResponse = 1002
        package static let notHandled = 1003
        package static let failed = 1004
        package static let notInteractive = 1005
        /// iOS 18 and macOS 15: the device holds one of the excluded credentials.
        package static let matchedExcludedCredential = 1006
    }

    /// `DCError.Code` raw values (DCError.h) that App Attest reports.
    package enum DCErrorCode {
        package static let unknownSystemFailure = 0
        package static let featureUnsupported = 1
        package static let invalidInput = 2
        package static let invalidKey = 3
        package static let serverUnavailable = 4
    }

    /// CryptoTokenKit `TKError.Code` raw values (TKError.h) that Secure Enclave operations report.
    package enum TKErrorCode {
        package static let canceledByUser = -4
        package static let authenticationFailed = -5
        package static let objectNotFound = -6
        package static let badParameter = -8
        package static let authenticationNeeded = -9
    }

    /// The Keybound error for an `NSError`/`CFError` given as domain and code: LocalAuthentication
    /// codes through ``init(laErrorCode:message:)``, `OSStatus` through
    /// ``init(osStatus:message:)``, CryptoTokenKit codes from the Secure Enclave as their
    /// Keychain equivalents, passkey (`ASAuthorizationError`) and App Attest (`DCError`) codes
    /// as the table in docs/apple-mapping.md says; anything else is `unexpected`.
    package init(nativeDomain domain: String, code: Int, message: String? = nil) {
        let mapped: Code
        switch domain {
        case NativeDomain.localAuthentication:
            self.init(laErrorCode: code, message: message)
            return
        case NativeDomain.osStatus:
            if let status = Int32(exactly: code),
                let error = KeyboundError(osStatus: status, message: message)
            {
                self = error
            } else {
                self.init(.unexpected, message: message ?? "\(domain) \(code)")
            }
            return
        case NativeDomain.cryptoTokenKit:
            switch code {
            case TKErrorCode.canceledByUser: mapped = .userCancel
            case TKErrorCode.authenticationFailed, TKErrorCode.authenticationNeeded:
                mapped = .authenticationFailed
            case TKErrorCode.objectNotFound: mapped = .itemNotFound
            case TKErrorCode.badParameter: mapped = .invalidInput
            default: mapped = .unexpected
            }
        case NativeDomain.authorization:
            switch code {
            case ASAuthorizationErrorCode.canceled: mapped = .userCancel
            case ASAuthorizationErrorCode.failed: mapped = .authenticationFailed
            // Without the sheet (preferImmediatelyAvailableCredentials) there was nothing to offer.
            case ASAuthorizationErrorCode.notInteractive: mapped = .itemNotFound
            case ASAuthorizationErrorCode.notHandled: mapped = .notSupported
            case ASAuthorizationErrorCode.matchedExcludedCredential: mapped = .duplicateItem
            default: mapped = .unexpected
            }
        case NativeDomain.deviceCheck:
            switch code {
            case DCErrorCode.featureUnsupported: mapped = .notSupported
            case DCErrorCode.invalidInput: mapped = .invalidInput
            // Unknown, already attested, or rejected by Apple: the app makes a new key.
            case DCErrorCode.invalidKey: mapped = .invalidated
            // Apple asks to retry later with the same key and client data.
            case DCErrorCode.serverUnavailable: mapped = .network
            default: mapped = .unexpected
            }
        default:
            mapped = .unexpected
        }
        // The domain and code first, so logs show what the platform reported.
        self.init(mapped, message: "\(domain) \(code)" + (message.map { ": \($0)" } ?? ""))
    }
}

/// P-256 public keys in the two encodings that meet here.
package enum P256PublicKeyEncoding {
    /// The fixed DER prefix of a P-256 SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { id-ecPublicKey,
    /// prime256v1 }, BIT STRING (0 unused bits) } — everything before the 65-byte X9.63 point.
    package static let spkiHeader: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A,
        0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// SubjectPublicKeyInfo DER (what the server expects) from the X9.63 uncompressed point
    /// `04 || X || Y` that `SecKeyCopyExternalRepresentation` returns.
    /// - Throws: ``KeyboundError/unexpected`` when `x963` is not a 65-byte uncompressed point.
    package static func spki(fromX963 x963: Data) throws -> Data {
        guard x963.count == 65, x963.first == 0x04 else {
            throw KeyboundError(
                .unexpected, message: "not an uncompressed P-256 point (\(x963.count) bytes)")
        }
        return Data(spkiHeader) + x963
    }
}
