import Foundation

/// Who may use a stored item or key, and when: the accessibility class (when the data is
/// readable at all) plus the user-verification constraints the OS enforces on every use.
///
/// Policies are validated once, when they are made: biometric-bound material is always
/// `…ThisDeviceOnly` (never synchronizable), and the reuse window is 0…300 s (Apple's maximum).
///
/// ```swift
/// let policy = AccessPolicy.biometryCurrentSet            // default for tokens and keys
/// let lenient = try AccessPolicy.biometryOrPasscode.reusing(for: 60)
/// ```
public struct AccessPolicy: Sendable, Hashable, Codable, CustomStringConvertible {
    /// When the item is readable at all (Keychain `kSecAttrAccessible…`). "Always" classes are
    /// deliberately not offered.
    public enum Accessibility: String, Sendable, Hashable, Codable, CaseIterable {
        /// Readable while the device is unlocked; may move to another device (backups, sync).
        case whenUnlocked
        /// Readable while the device is unlocked; stays on this device.
        case whenUnlockedThisDeviceOnly
        /// Readable once the device was unlocked after boot; may move to another device.
        case afterFirstUnlock
        /// Readable once the device was unlocked after boot; stays on this device.
        case afterFirstUnlockThisDeviceOnly
        /// Readable while unlocked, only while a passcode is set; removing the passcode
        /// deletes the item. The default for everything Keybound protects.
        case whenPasscodeSetThisDeviceOnly

        /// Never leaves this device (not in backups restored elsewhere, not synchronized).
        public var isThisDeviceOnly: Bool {
            switch self {
            case .whenUnlocked, .afterFirstUnlock: false
            default: true
            }
        }

        /// Readable only while the device is unlocked (otherwise only after the first unlock).
        public var requiresUnlockedDevice: Bool {
            switch self {
            case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: false
            default: true
            }
        }
    }

    /// A user-verification requirement (`SecAccessControlCreateFlags`).
    public enum Constraint: String, Sendable, Hashable, Codable, CaseIterable {
        /// A biometric match with the enrollment as it is now; any enrollment change
        /// permanently invalidates the item.
        case biometryCurrentSet
        /// A biometric match with any enrolled identity; survives enrollment changes.
        case biometryAny
        /// Biometrics or the device passcode.
        case userPresence
        /// The device passcode.
        case devicePasscode
        /// A password the app supplies (`VerificationPrompt.applicationPassword`).
        case applicationPassword

        /// Whether this constraint can be satisfied by a biometric match.
        public var acceptsBiometry: Bool {
            self == .biometryCurrentSet || self == .biometryAny || self == .userPresence
        }

        /// Whether this constraint can be satisfied by the device passcode.
        public var acceptsPasscode: Bool { self == .devicePasscode || self == .userPresence }
    }

    /// How several constraints combine.
    public enum Combination: String, Sendable, Hashable, Codable {
        /// Any one constraint suffices.
        case or
        /// Every constraint must be satisfied.
        case and
    }

    /// Apple's maximum reuse window (`LATouchIDAuthenticationMaximumAllowableReuseDuration`).
    public static let maximumReuseDuration: TimeInterval = 300

    /// When the item is readable.
    public let accessibility: Accessibility
    /// The verification constraints, in order, without repeats. Empty: no verification.
    public let constraints: [Constraint]
    /// How ``constraints`` combine.
    public let combination: Combination
    /// How long one verification may be reused, in seconds. 0 (the default) means every use
    /// needs its own fresh verification (see ``Verification/singleUseLifetime``).
    ///
    /// - Important: On Apple platforms a reuse window is also the `LAContext`'s
    ///   `touchIDAuthenticationAllowableReuseDuration`: a device unlock by Face ID or Touch ID
    ///   within the window counts as the verification, and no prompt is shown at all. Use a
    ///   window only where "the owner unlocked the phone a moment ago" is proof enough.
    public let reuseDuration: TimeInterval

    /// Creates a policy, checking it.
    ///
    /// - Throws: ``KeyboundError/invalidInput`` when a constraint is repeated, when a
    ///   constrained policy is not `…ThisDeviceOnly`, or when `reuseDuration` is outside 0…300.
    public init(
        accessibility: Accessibility = .whenPasscodeSetThisDeviceOnly, constraints: [Constraint],
        combination: Combination = .or, reuseDuration: TimeInterval = 0
    ) throws {
        guard Set(constraints).count == constraints.count else {
            throw KeyboundError.invalidInput("a constraint is repeated in \(constraints)")
        }
        guard constraints.isEmpty || accessibility.isThisDeviceOnly else {
            throw KeyboundError.invalidInput(
                "verification-bound items must be …ThisDeviceOnly, not \(accessibility)")
        }
        guard reuseDuration.isFinite, (0...Self.maximumReuseDuration).contains(reuseDuration) else {
            throw KeyboundError.invalidInput("reuseDuration must be within 0…300 s, not \(reuseDuration)")
        }
        self.accessibility = accessibility
        self.constraints = constraints
        self.combination = combination
        self.reuseDuration = reuseDuration
    }

    private enum CodingKeys: String, CodingKey {
        case accessibility, constraints, combination, reuseDuration
    }

    /// Decodes a policy through the validating initializer: a stored or received policy is held
    /// to the same rules as one made in code.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            accessibility: container.decode(Accessibility.self, forKey: .accessibility),
            constraints: container.decode([Constraint].self, forKey: .constraints),
            combination: container.decode(Combination.self, forKey: .combination),
            reuseDuration: container.decode(TimeInterval.self, forKey: .reuseDuration))
    }

    /// For the presets, which are valid by construction.
    private init(_ accessibility: Accessibility, _ constraints: [Constraint]) {
        self.accessibility = accessibility
        self.constraints = constraints
        combination = .or
        reuseDuration = 0
    }

    /// Face ID / Touch ID with the current enrollment. The default for tokens and keys.
    public static let biometryCurrentSet = AccessPolicy(.whenPasscodeSetThisDeviceOnly, [.biometryCurrentSet])
    /// Biometrics with the current enrollment, or the device passcode.
    public static let biometryOrPasscode = AccessPolicy(
        .whenPasscodeSetThisDeviceOnly, [.biometryCurrentSet, .devicePasscode])
    /// Biometrics (any enrollment) or the device passcode.
    public static let userPresence = AccessPolicy(.whenPasscodeSetThisDeviceOnly, [.userPresence])
    /// The device passcode only.
    public static let devicePasscode = AccessPolicy(.whenPasscodeSetThisDeviceOnly, [.devicePasscode])
    /// Biometrics with any enrolled identity (survives enrollment changes).
    public static let biometryAny = AccessPolicy(.whenPasscodeSetThisDeviceOnly, [.biometryAny])
    /// No user verification: for preferences and other low-sensitivity data.
    public static let noVerification = AccessPolicy(.afterFirstUnlockThisDeviceOnly, [])

    /// The same policy with another reuse window.
    /// - Throws: ``KeyboundError/invalidInput`` outside 0…300 s.
    public func reusing(for seconds: TimeInterval) throws -> AccessPolicy {
        try AccessPolicy(
            accessibility: accessibility, constraints: constraints, combination: combination,
            reuseDuration: seconds)
    }

    /// Whether any use needs a user verification.
    public var requiresVerification: Bool { !constraints.isEmpty }

    /// Whether a biometric match can satisfy this policy.
    public var acceptsBiometry: Bool { constraints.contains { $0.acceptsBiometry } }

    /// Whether the device passcode alone can satisfy this policy (the lockout fallback).
    public var acceptsPasscodeAlone: Bool {
        switch combination {
        case .or: constraints.contains { $0.acceptsPasscode }
        case .and: !constraints.isEmpty && constraints.allSatisfy { $0.acceptsPasscode }
        }
    }

    /// Whether a biometric match is needed no matter what (the policy has no passcode way).
    public var requiresBiometry: Bool { acceptsBiometry && !acceptsPasscodeAlone }

    /// Whether an enrollment change invalidates material bound to this policy.
    public var isBoundToCurrentEnrollment: Bool { constraints.contains(.biometryCurrentSet) }

    /// Synchronizable (iCloud Keychain) only where no verification and no device binding apply.
    public var isSynchronizable: Bool { constraints.isEmpty && !accessibility.isThisDeviceOnly }

    /// The accessibility, constraints and reuse window, e.g.
    /// `whenPasscodeSetThisDeviceOnly[biometryCurrentSet, reuse 0s]`.
    public var description: String {
        let joined = constraints.map(\.rawValue).joined(separator: " \(combination.rawValue) ")
        return "\(accessibility.rawValue)[\(joined.isEmpty ? "none" : joined), reuse \(Int(reuseDuration))s]"
    }

    /// The presets by name, as the CLI and configuration files spell them.
    public static func named(_ name: String) -> AccessPolicy? {
        switch name {
        case "none", "noVerification": .noVerification
        case "biometryCurrentSet": .biometryCurrentSet
        case "biometryAny": .biometryAny
        case "userPresence": .userPresence
        case "devicePasscode": .devicePasscode
        case "biometryOrPasscode": .biometryOrPasscode
        default: nil
        }
    }
}

/// How sensitive a piece of data is, and the policy Keybound gives it.
public enum DataClass: Sendable, Hashable, CaseIterable {
    /// Preferences: readable after the first unlock, no verification.
    case preferences
    /// Session and refresh tokens: bound to the current biometric enrollment.
    case sessionToken
    /// Signing and payment keys: a Secure Enclave key bound to the current enrollment.
    case signingKey

    /// The policy for this class. Public configuration does not belong in Keybound at all.
    public var policy: AccessPolicy {
        switch self {
        case .preferences: .noVerification
        case .sessionToken, .signingKey: .biometryCurrentSet
        }
    }
}
