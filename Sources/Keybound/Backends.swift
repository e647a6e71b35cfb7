import Foundation

/// Verifies the user with biometrics or the device passcode (LocalAuthentication on Apple
/// platforms, `KeyboundEmulator`'s `EmulatedDevice` in tests).
public protocol UserVerifier: Sendable {
    /// What can be verified now, without prompting.
    func availability() async -> VerificationAvailability

    /// Shows the system prompt and returns a verification the store or vault will accept for
    /// material bound to `policy`.
    ///
    /// - Throws: ``KeyboundError`` — `userCancel`, `userFallback`, `authenticationFailed`,
    ///   `biometryLockout`, `biometryNotAvailable`, `biometryNotEnrolled`, `passcodeNotSet`, …
    func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification
}

/// Stores small secrets whose every read is guarded by the OS (the Keychain on Apple platforms).
///
/// The store enforces each item's ``AccessPolicy`` itself. Apps normally use
/// ``ProtectedStore`` on top, which adds typed values and tells "invalidated" from "never stored".
public protocol SecureStore: Sendable {
    /// Stores `value` under `name`, replacing any item of that name (its policy too).
    /// - Parameters:
    ///   - value: the bytes to keep.
    ///   - name: the item's name.
    ///   - policy: who may read the item, and when; enforced by the store on every read.
    ///   - verification: needed only for policies with an application password.
    /// - Throws: ``KeyboundError`` — `interactionNotAllowed` (locked), `passcodeNotSet`, …
    func store(_ value: Data, as name: ItemName, policy: AccessPolicy, verification: Verification?)
        async throws

    /// Reads the item. A protected item needs a verification that satisfies its policy.
    /// - Throws: `itemNotFound`, `authenticationFailed`, `interactionNotAllowed`, …
    func read(_ name: ItemName, verification: Verification?) async throws -> Data

    /// Replaces the value of an existing item, keeping its policy.
    /// - Throws: `itemNotFound` when there is no such item; otherwise as ``read(_:verification:)``.
    func update(_ value: Data, as name: ItemName, verification: Verification?) async throws

    /// Deletes the item. Deleting what is not there succeeds.
    func delete(_ name: ItemName) async throws

    /// Whether an item of that name exists (never prompts).
    func exists(_ name: ItemName) async throws -> Bool
}

/// Creates and uses P-256 signing keys whose private part never leaves secure hardware
/// (the Secure Enclave on Apple platforms, an emulated secure element in tests).
public protocol KeyVault: Sendable {
    /// Creates a key bound to `policy`, replacing any key of that name.
    /// - Returns: the public key as SubjectPublicKeyInfo DER.
    func createKey(_ name: ItemName, policy: AccessPolicy) async throws -> Data

    /// The public key (SPKI DER). Never prompts.
    func publicKey(_ name: ItemName) async throws -> Data

    /// Signs `message` with ECDSA P-256 over SHA-256; the DER signature
    /// `SecKeyCreateSignature(.ecdsaSignatureMessageX962SHA256)` produces.
    /// - Throws: `itemNotFound`, `authenticationFailed` (no or unsuitable verification), …
    func sign(_ message: Data, with name: ItemName, verification: Verification?) async throws -> Data

    /// Whether `signature` is a valid ECDSA P-256 SHA-256 signature (DER) over `message` by the
    /// key `name`. Uses the public part only: never prompts, needs no verification.
    /// - Throws: `itemNotFound` when there is no such key.
    func isValidSignature(_ signature: Data, for message: Data, by name: ItemName) async throws -> Bool

    /// Encrypts `plaintext` to the key's public part (no verification needed). On Apple
    /// platforms ECIES `eciesEncryptionCofactorVariableIVX963SHA256AESGCM`.
    func encrypt(_ plaintext: Data, for name: ItemName) async throws -> Data

    /// Decrypts what ``encrypt(_:for:)`` made; needs a verification as ``sign(_:with:verification:)``.
    /// - Throws: `itemNotFound`, `authenticationFailed`, `invalidInput` (not our ciphertext), …
    func decrypt(_ ciphertext: Data, with name: ItemName, verification: Verification?) async throws -> Data

    /// Deletes the key. Deleting what is not there succeeds.
    func deleteKey(_ name: ItemName) async throws

    /// Whether a key of that name exists (never prompts).
    func keyExists(_ name: ItemName) async throws -> Bool

    /// SHA-256 of `message`, by the platform's crypto (CryptoKit, OpenSSL): the SDK hashes
    /// nothing itself. For short public values, such as a DPoP proof's `ath`.
    func sha256(_ message: Data) -> Data
}

/// Wall-clock time, injected so tests control it.
public struct Clock: Sendable {
    /// The current time.
    public let now: @Sendable () -> Date

    /// A clock that reads the time from `now` (tests pass one they advance by hand).
    public init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// The system clock.
    public static let system = Clock { Date() }
}

/// Time that only moves forward, for measuring how long something took: setting the device's
/// clock (by hand, or by a network time change) does not move it. Injected so tests control it.
///
/// ```swift
/// let lock = try AppLock(verifier: verifier, clock: .live)
/// ```
public struct MonotonicClock: Sendable {
    /// Seconds since a fixed, arbitrary origin (within one process).
    public let now: @Sendable () -> TimeInterval

    /// - Parameter now: seconds since a fixed origin; a test value may go anywhere, and code
    ///   that measures with it treats a negative elapsed time as the worst case.
    public init(now: @escaping @Sendable () -> TimeInterval) { self.now = now }

    /// The system's continuous clock: it keeps counting while the device sleeps (unlike
    /// `ProcessInfo.systemUptime` on Apple platforms, which stops, so a phone left asleep in a
    /// pocket would never lock), and nobody can set it.
    public static let live: MonotonicClock = {
        let origin = ContinuousClock.now
        return MonotonicClock {
            let elapsed = ContinuousClock.now - origin
            return TimeInterval(elapsed.components.seconds)
                + TimeInterval(elapsed.components.attoseconds) / 1e18
        }
    }()
}

/// Random bytes, injected so tests can be deterministic.
public struct RandomSource: Sendable {
    /// Returns `count` random bytes.
    public let bytes: @Sendable (Int) -> Data

    /// A source that draws from `bytes`, which must return exactly the count asked for.
    public init(bytes: @escaping @Sendable (Int) -> Data) { self.bytes = bytes }

    /// The system's cryptographically secure generator.
    public static let system = RandomSource { count in
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// A deterministic, NOT cryptographically secure sequence (SplitMix64) for tests and demos.
    public static func seeded(_ seed: UInt64) -> RandomSource {
        let state = SeedState(seed)
        return RandomSource { count in state.next(count) }
    }

    /// The deterministic generator's state, shared by the closures of one seeded source.
    private final class SeedState: Sendable {
        private let state: Mutex<UInt64>
        init(_ seed: UInt64) { state = Mutex(seed) }
        func next(_ count: Int) -> Data {
            state.withLock { value in
                var out = Data(capacity: count)
                while out.count < count {
                    value &+= 0x9E37_79B9_7F4A_7C15
                    var mixed = value
                    mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
                    mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
                    mixed ^= mixed >> 31
                    withUnsafeBytes(of: mixed.littleEndian) {
                        out.append(contentsOf: $0.prefix(count - out.count))
                    }
                }
                return out
            }
        }
    }
}
