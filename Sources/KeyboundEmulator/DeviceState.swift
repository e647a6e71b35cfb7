import Foundation
import Keybound

/// What the emulated device looks like from outside (for `keybound device state` and tests).
public struct DeviceSnapshot: Sendable, Hashable, Codable {
    /// The sensor (`.none` for a device without one).
    public let biometryType: BiometryType
    /// How many fingers or faces are enrolled (0–5).
    public let enrolledIdentities: Int
    /// Whether the device has a passcode (without one, biometrics are unavailable too).
    public let isPasscodeSet: Bool
    /// Whether the screen is locked (`whenUnlocked…` material answers `interactionNotAllowed`).
    public let isLocked: Bool
    /// Whether the device was unlocked since it booted (`afterFirstUnlock…` material needs it).
    public let hasUnlockedSinceBoot: Bool
    /// Failed biometric matches in a row, across evaluations (5 locks biometry out).
    public let consecutiveFailedMatches: Int
    /// Whether biometry is locked out until the passcode is entered.
    public let isBiometryLockedOut: Bool
    /// How many scripted ``PresentationOutcome``s wait for the next prompts.
    public let queuedOutcomes: Int
    /// The names of the stored items, sorted (invalidation markers included).
    public let items: [String]
    /// The names of the keys in the emulated secure element, sorted.
    public let keys: [String]
}

/// The whole persistent state of an emulated device. Codable so that the CLI can keep a
/// device across runs (encrypted, see ``EmulatedDevice/save(to:key:)``).
struct DeviceState: Codable, Sendable {
    struct Item: Codable, Sendable {
        var value: Data
        var policy: AccessPolicy
        var applicationPasswordHash: Data?
    }

    struct Key: Codable, Sendable {
        /// The private scalar: never leaves the emulated secure element.
        var privateKey: Data
        var policy: AccessPolicy
    }

    var biometryType: BiometryType
    var enrolledIdentities: Int
    /// Changes on every enrollment change; what `evaluatedPolicyDomainState` reports.
    var enrollmentState: Data
    /// SHA-256 of the passcode, or nil when none is set.
    var passcodeHash: Data?
    var isLocked: Bool
    var hasUnlockedSinceBoot: Bool
    var consecutiveFailedMatches: Int
    var queue: [PresentationOutcome]
    var items: [ItemName: Item]
    var keys: [ItemName: Key]
}
