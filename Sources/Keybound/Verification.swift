import Foundation

/// The kind of biometric sensor a device has.
public enum BiometryType: String, Sendable, Hashable, Codable, CaseIterable {
    /// No biometric sensor: only the passcode can verify the user.
    case none
    /// A fingerprint sensor.
    case touchID
    /// Face recognition.
    case faceID
    /// Iris recognition (Apple Vision Pro).
    case opticID

    /// The name to show the user ("Face ID").
    public var displayName: String {
        switch self {
        case .none: "Biometrics"
        case .touchID: "Touch ID"
        case .faceID: "Face ID"
        case .opticID: "Optic ID"
        }
    }
}

/// What the device can verify right now, without prompting.
public struct VerificationAvailability: Sendable, Hashable {
    /// The sensor the device has (even when it cannot be used right now).
    public let biometryType: BiometryType
    /// Why biometrics cannot be used now (`biometryNotAvailable`, `biometryNotEnrolled`,
    /// `biometryLockout`, `passcodeNotSet`), or nil when they can.
    public let biometryError: KeyboundError?
    /// Whether the device has a passcode.
    public let isPasscodeSet: Bool
    /// An opaque value that changes on every enrollment change (LAContext's
    /// `evaluatedPolicyDomainState`); nil when nothing is enrolled.
    public let enrollmentState: Data?

    /// Describes what a device can verify; made by ``UserVerifier`` implementations.
    public init(
        biometryType: BiometryType, biometryError: KeyboundError?, isPasscodeSet: Bool, enrollmentState: Data?
    ) {
        self.biometryType = biometryType
        self.biometryError = biometryError
        self.isPasscodeSet = isPasscodeSet
        self.enrollmentState = enrollmentState
    }

    /// Whether a biometric prompt can succeed now.
    public var canUseBiometry: Bool { biometryError == nil }
}

/// The text of a verification prompt.
public struct VerificationPrompt: Sendable, Hashable {
    /// Why the app asks ("Log in to Acme", "Send 0.5 ETH to 0x12 a4c8 …"). Shown by the system:
    /// by Touch ID while it waits for a finger, by Face ID only after a failed match (a face that
    /// matches at once never sees it).
    public let reason: String
    /// The fallback button's title; nil for the system default, "" to hide it.
    public let fallbackTitle: String?
    /// The cancel button's title; nil for the system default.
    public let cancelTitle: String?
    /// The app's own password, for policies with ``AccessPolicy/Constraint/applicationPassword``.
    public let applicationPassword: String?

    /// The prompt's texts. The reason is what the user reads, so say what they are agreeing to.
    /// - Throws: ``KeyboundError/invalidInput`` for an empty reason or one over 256 characters
    ///   (room for an approval's whole recipient, grouped).
    public init(
        reason: String, fallbackTitle: String? = nil, cancelTitle: String? = nil,
        applicationPassword: String? = nil
    ) throws {
        let trimmed = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, reason.count <= 256 else {
            throw KeyboundError.invalidInput("a prompt reason is 1–256 characters")
        }
        self.reason = reason
        self.fallbackTitle = fallbackTitle
        self.cancelTitle = cancelTitle
        self.applicationPassword = applicationPassword
    }
}

/// Proof that the OS verified the user, handed to a store or vault call that needs it.
///
/// Only a ``UserVerifier`` can make one. The store or key enforces its own policy against it
/// (factor, enrollment, age), so an app that fakes "verified = true" still gets nothing.
public struct Verification: Sendable {
    /// How the user was verified.
    public enum Factor: String, Sendable, Hashable, Codable {
        /// A biometric match (Face ID, Touch ID, Optic ID).
        case biometry
        /// The device passcode.
        case passcode
        /// The app's own password (``VerificationPrompt/applicationPassword``).
        case applicationPassword
    }

    /// A unique id for this verification.
    public let id: String
    /// The factors the user presented.
    public let factors: Set<Factor>
    /// When the verification happened.
    public let verifiedAt: Date
    /// How long it may be reused (0: a single use).
    public let reuseDuration: TimeInterval
    /// Backend data (the `LAContext` on Apple platforms); nil in the emulator.
    package let context: (any Sendable)?

    package init(
        id: String, factors: Set<Factor>, verifiedAt: Date, reuseDuration: TimeInterval,
        context: (any Sendable)? = nil
    ) {
        self.id = id
        self.factors = factors
        self.verifiedAt = verifiedAt
        self.reuseDuration = reuseDuration
        self.context = context
    }

    /// How long a single-use verification (reuse window 0) stays usable: the time between the
    /// prompt and the Keychain or key call it was made for. The same on every backend.
    public static let singleUseLifetime: TimeInterval = 30

    /// The one rule for how long a verification lives, which every backend applies to the
    /// verifications it issued: with no reuse window it serves one use within
    /// ``singleUseLifetime``; with one it serves any number of uses until `reuseDuration`
    /// seconds after it was made. A verification from the future (the clock was set back)
    /// serves nothing: its age cannot be told.
    ///
    /// On Apple platforms the reuse window is also the `LAContext`'s
    /// `touchIDAuthenticationAllowableReuseDuration`, so a device unlock by Face ID or Touch ID
    /// within the window counts as the verification itself: no prompt is shown.
    ///
    /// - Parameters:
    ///   - verifiedAt: when the verification happened, by the backend's own record.
    ///   - reuseDuration: its reuse window, by the backend's own record.
    ///   - previousUses: how many operations it has already served.
    ///   - now: the current time.
    package static func admits(
        verifiedAt: Date, reuseDuration: TimeInterval, previousUses: Int, now: Date
    ) -> Bool {
        let age = now.timeIntervalSince(verifiedAt)
        guard age >= 0 else { return false }
        if reuseDuration == 0 { return previousUses == 0 && age <= singleUseLifetime }
        return age <= reuseDuration
    }
}
