import Foundation
import Keybound
import KeyboundCrypto

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
    struct Item: Codable, Sendable, ProtectedMaterial {
        static let noun = "item"
        var value: Data
        var policy: AccessPolicy
        /// The application password the item was stored with, salted and stretched.
        var applicationPassword: SecretVerifier?
    }

    struct Key: Codable, Sendable, ProtectedMaterial {
        static let noun = "key"
        /// The private scalar: never leaves the emulated secure element.
        var privateKey: Data
        var policy: AccessPolicy
        /// None: secure element keys do not take an application password (as the Secure Enclave).
        var applicationPassword: SecretVerifier? { nil }
    }

    var biometryType: BiometryType
    var enrolledIdentities: Int
    /// Changes on every enrollment change; what `evaluatedPolicyDomainState` reports.
    var enrollmentState: Data
    /// The passcode, salted and stretched; nil when none is set.
    var passcode: SecretVerifier?
    var isLocked: Bool
    var hasUnlockedSinceBoot: Bool
    var consecutiveFailedMatches: Int
    var queue: [PresentationOutcome]
    var items: [ItemName: Item]
    var keys: [ItemName: Key]
}

/// What the device keeps under a name and guards with an ``AccessPolicy``: an item or a key.
/// Both are looked up and checked before use the same way (``EmulatedDevice``'s `usable`).
protocol ProtectedMaterial {
    /// What the material is called in errors (`no item …`, `no key …`).
    static var noun: String { get }
    var policy: AccessPolicy { get }
    /// The application password the material was stored with, salted and stretched; nil for none.
    var applicationPassword: SecretVerifier? { get }
}

/// A passcode or application password as the emulator keeps it (and writes it to a state
/// file): PBKDF2-HMAC-SHA-256 with a random salt, never the secret itself. The stretching makes
/// each guess cost ``iterations`` HMACs; it cannot make a short passcode strong.
struct SecretVerifier: Codable, Sendable {
    /// Iterations for new verifiers. An emulated passcode is a test value, and every emulated
    /// device derives one when it is made: far above a bare hash, far below what would slow the
    /// test suites down. A real passcode does not belong in an emulator at all.
    static let defaultIterations = 100_000
    /// The most iterations a state file may ask for: ten times what the emulator writes, room to
    /// raise ``defaultIterations`` later. Without a bound, a file asking for billions makes every
    /// passcode check run for minutes (found with the `emulator-state` fuzz harness).
    static let maximumIterations = 10 * defaultIterations
    static let saltByteCount = 16

    let salt: Data
    let iterations: Int
    let derived: Data

    private enum CodingKeys: String, CodingKey {
        case salt, iterations, derived
    }

    init(_ secret: String, random: RandomSource) throws {
        salt = random.bytes(Self.saltByteCount)
        iterations = Self.defaultIterations
        derived = try Self.derive(secret, salt: salt, iterations: iterations)
    }

    /// Decodes a verifier from a state file, refusing an iteration count outside
    /// 1…``maximumIterations``.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        iterations = try container.decode(Int.self, forKey: .iterations)
        guard (1...Self.maximumIterations).contains(iterations) else {
            throw DecodingError.dataCorruptedError(
                forKey: .iterations, in: container,
                debugDescription: "\(iterations) iterations, not 1…\(Self.maximumIterations)")
        }
        salt = try container.decode(Data.self, forKey: .salt)
        derived = try container.decode(Data.self, forKey: .derived)
    }

    /// A device passcode: 4–64 characters.
    /// - Throws: ``KeyboundError/invalidInput`` for a passcode outside 4–64 characters.
    static func passcode(_ passcode: String, random: RandomSource) throws -> SecretVerifier {
        guard (4...64).contains(passcode.count) else {
            throw KeyboundError.invalidInput("a passcode is 4–64 characters")
        }
        return try SecretVerifier(passcode, random: random)
    }

    /// Whether `typed` is this secret (compared in constant time).
    func matches(_ typed: String) -> Bool {
        guard let candidate = try? Self.derive(typed, salt: salt, iterations: iterations) else {
            return false
        }
        return ConstantTime.equals(candidate, derived)
    }

    private static func derive(_ secret: String, salt: Data, iterations: Int) throws -> Data {
        do {
            return try PBKDF2SHA256.deriveKey(
                password: Data(secret.utf8), salt: salt, iterations: iterations, outputByteCount: 32)
        } catch {
            throw KeyboundError(.unexpected, message: "cannot derive a secret verifier: \(error)")
        }
    }
}
