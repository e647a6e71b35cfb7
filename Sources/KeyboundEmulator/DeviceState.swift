import Foundation
import Keybound

/// What the emulated device looks like from outside (for `keybound device state` and tests).
public struct DeviceSnapshot: Sendable, Hashable, Codable {
    public let biometryType: BiometryType
    public let enrolledIdentities: Int
    public let isPasscodeSet: Bool
    public let isLocked: Bool
    public let hasUnlockedSinceBoot: Bool
    /// Failed biometric matches in a row, across evaluations (5 locks biometry out).
    public let consecutiveFailedMatches: Int
    public let isBiometryLockedOut: Bool
    public let queuedOutcomes: Int
    public let items: [String]
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
