import Foundation
import Keybound
import KeyboundCrypto

/// An emulated Apple device — biometric sensor, passcode, Keychain and Secure Enclave — that
/// behaves as Apple documents, so every edge case of biometric login runs on Linux CI.
///
/// It implements all three backend protocols, and enforces each item's and key's
/// ``AccessPolicy`` itself: a read or a signature needs a ``Verification`` this device issued,
/// with the right factor, the current enrollment, and within its reuse window.
///
/// The rules (docs/design.md, "The emulator"):
/// - Touch ID shows the fallback button from the first failed match and ends an evaluation
///   after 3; Face ID and Optic ID show it only after 2 failed matches, and the next outcome
///   then decides (fallback → `userFallback`, cancel → `userCancel`, anything else →
///   `authenticationFailed`). Five failed matches in a row, across evaluations, lock biometry
///   out until the passcode is entered. Policies that accept the passcode fall back to it;
///   biometrics-only ones report `biometryLockout` (or `authenticationFailed`, `userFallback`).
/// - No sensor → `biometryNotAvailable`; nothing enrolled → `biometryNotEnrolled`; no passcode
///   → `passcodeNotSet` (and biometrics are unavailable too).
/// - Any enrollment change destroys `biometryCurrentSet` items and keys; `biometryAny` and
///   `userPresence` ones survive. Removing the passcode destroys every
///   `whenPasscodeSetThisDeviceOnly` item and key.
/// - While locked, `whenUnlocked…` material answers `interactionNotAllowed`; `afterFirstUnlock…`
///   material is readable once the device was unlocked after boot.
/// - Every error carries the Apple-native code (`LAError`, `OSStatus`) a real device gives.
///
/// ```swift
/// let device = try EmulatedDevice(biometry: .faceID)
/// await device.present(.match)
/// let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
/// ```
public actor EmulatedDevice: UserVerifier, SecureStore, KeyVault {
    /// Failed matches in a row that lock biometry out.
    public static let lockoutThreshold = 5
    /// Apple's limits on enrolled identities (Touch ID: 5 fingers; Face ID: 2 appearances).
    public static let maximumEnrolledIdentities = 5

    private struct IssuedVerification {
        let factors: Set<Verification.Factor>
        let verifiedAt: Date
        let reuseDuration: TimeInterval
        let enrollmentState: Data
        /// The application password typed at the prompt. In memory only: issued verifications
        /// are never persisted.
        let applicationPassword: String?
        var uses = 0
    }

    private var state: DeviceState
    /// Verifications this device issued; anything else is refused. Not persisted: a prompt
    /// lives no longer than the process that showed it.
    private var issued: [String: IssuedVerification] = [:]
    private let clock: Clock
    private let random: RandomSource

    /// A new device, unlocked.
    ///
    /// - Parameters:
    ///   - biometry: the sensor (`.none` for a device without one).
    ///   - passcode: the device passcode (4–64 characters), or nil for none.
    ///   - enrolledIdentities: enrolled fingers or faces, 0–5 (0 when `biometry` is `.none`).
    ///   - clock: time, for reuse windows.
    ///   - random: randomness, for enrollment states and ids.
    /// - Throws: ``KeyboundError/invalidInput`` for values outside those ranges.
    public init(
        biometry: BiometryType = .faceID, passcode: String? = "123456", enrolledIdentities: Int = 1,
        clock: Clock = .system, random: RandomSource = .system
    ) throws {
        guard (0...Self.maximumEnrolledIdentities).contains(enrolledIdentities) else {
            throw KeyboundError.invalidInput("enrolled identities must be 0…5, not \(enrolledIdentities)")
        }
        guard biometry != .none || enrolledIdentities == 0 else {
            throw KeyboundError.invalidInput("a device without biometry has no enrolled identities")
        }
        state = DeviceState(
            biometryType: biometry, enrolledIdentities: enrolledIdentities,
            enrollmentState: random.bytes(16),
            passcode: try passcode.map { try SecretVerifier.passcode($0, random: random) },
            isLocked: false, hasUnlockedSinceBoot: true, consecutiveFailedMatches: 0, queue: [],
            items: [:], keys: [:])
        self.clock = clock
        self.random = random
    }

    private init(state: DeviceState, clock: Clock, random: RandomSource) {
        self.state = state
        self.clock = clock
        self.random = random
    }

    // MARK: - Scripting the user

    /// Queues what the user does at the next prompt attempts, in order.
    public func present(_ outcomes: PresentationOutcome...) { state.queue.append(contentsOf: outcomes) }

    /// Queues what the user does at the next prompt attempts, in order.
    public func present(_ outcomes: [PresentationOutcome]) { state.queue.append(contentsOf: outcomes) }

    // MARK: - Changing the device

    /// Enrolls one more finger or face: an enrollment change.
    /// - Throws: `biometryNotAvailable` without a sensor, `passcodeNotSet` without a passcode
    ///   (Apple requires one), `invalidInput` past the maximum.
    public func enroll() throws {
        guard state.biometryType != .none else { throw la(KeyboundError.LAErrorCode.biometryNotAvailable) }
        guard state.passcode != nil else { throw la(KeyboundError.LAErrorCode.passcodeNotSet) }
        guard state.enrolledIdentities < Self.maximumEnrolledIdentities else {
            throw KeyboundError.invalidInput(
                "at most \(Self.maximumEnrolledIdentities) identities can be enrolled")
        }
        state.enrolledIdentities += 1
        enrollmentChanged()
    }

    /// Removes every enrolled finger or face: an enrollment change.
    public func unenrollAll() {
        state.enrolledIdentities = 0
        enrollmentChanged()
    }

    /// Locks the device.
    public func lock() { state.isLocked = true }

    /// Unlocks the device (the first unlock since boot, if it was not yet).
    public func unlock() {
        state.isLocked = false
        state.hasUnlockedSinceBoot = true
    }

    /// Restarts the device: locked, and not unlocked since boot.
    public func reboot() {
        state.isLocked = true
        state.hasUnlockedSinceBoot = false
        issued = [:]
    }

    /// Sets or changes the device passcode.
    public func setPasscode(_ passcode: String) throws {
        state.passcode = try SecretVerifier.passcode(passcode, random: random)
    }

    /// Removes the passcode: every `whenPasscodeSetThisDeviceOnly` item and key is destroyed,
    /// and biometrics become unavailable until a passcode is set again.
    public func removePasscode() {
        state.passcode = nil
        state.consecutiveFailedMatches = 0
        state.items = state.items.filter { $0.value.policy.accessibility != .whenPasscodeSetThisDeviceOnly }
        state.keys = state.keys.filter { $0.value.policy.accessibility != .whenPasscodeSetThisDeviceOnly }
        issued = [:]
    }

    /// What the device looks like now.
    public func snapshot() -> DeviceSnapshot {
        DeviceSnapshot(
            biometryType: state.biometryType, enrolledIdentities: state.enrolledIdentities,
            isPasscodeSet: state.passcode != nil, isLocked: state.isLocked,
            hasUnlockedSinceBoot: state.hasUnlockedSinceBoot,
            consecutiveFailedMatches: state.consecutiveFailedMatches, isBiometryLockedOut: isLockedOut,
            queuedOutcomes: state.queue.count, items: state.items.keys.map(\.rawValue).sorted(),
            keys: state.keys.keys.map(\.rawValue).sorted())
    }

    private var isLockedOut: Bool { state.consecutiveFailedMatches >= Self.lockoutThreshold }

    private func enrollmentChanged() {
        state.enrollmentState = random.bytes(16)
        state.items = state.items.filter { !$0.value.policy.isBoundToCurrentEnrollment }
        state.keys = state.keys.filter { !$0.value.policy.isBoundToCurrentEnrollment }
    }

    // MARK: - UserVerifier

    /// The sensor, why biometrics cannot be used now (no sensor, no passcode, nothing enrolled,
    /// lockout — in that order), and the enrollment state, which is nil while nothing is
    /// enrolled or no passcode is set (rule 4).
    public func availability() -> VerificationAvailability {
        VerificationAvailability(
            biometryType: state.biometryType, biometryError: biometryUnavailableReason(),
            isPasscodeSet: state.passcode != nil,
            enrollmentState: state.enrolledIdentities > 0 && state.passcode != nil
                ? state.enrollmentState : nil)
    }

    private func biometryUnavailableReason() -> KeyboundError? {
        if state.biometryType == .none { return la(KeyboundError.LAErrorCode.biometryNotAvailable) }
        if state.passcode == nil { return la(KeyboundError.LAErrorCode.passcodeNotSet) }
        if state.enrolledIdentities == 0 { return la(KeyboundError.LAErrorCode.biometryNotEnrolled) }
        if isLockedOut { return la(KeyboundError.LAErrorCode.biometryLockout) }
        return nil
    }

    /// Runs the emulated prompt for `policy`, consuming queued ``PresentationOutcome``s one
    /// attempt at a time (rules 2 and 3); an empty queue ends it as a user cancel.
    ///
    /// A policy that accepts the passcode falls back to it on lockout or fallback; a
    /// biometrics-only policy reports the failure. The verification it returns is accepted only
    /// by this device, for this policy's factors, the current enrollment and its reuse window.
    /// - Throws: ``KeyboundError`` with the `LAError` code a real device gives: `userCancel`,
    ///   `userFallback`, `authenticationFailed`, `biometryLockout`, `passcodeNotSet`,
    ///   `interactionNotAllowed` (the device is locked), …
    public func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) throws -> Verification {
        var factors: Set<Verification.Factor> = []
        if prompt.applicationPassword != nil { factors.insert(.applicationPassword) }
        let needsUser = policy.constraints.contains { $0 != .applicationPassword }
        if needsUser {
            guard !state.isLocked else {
                throw la(KeyboundError.LAErrorCode.notInteractive, "the device is locked: no prompt can show")
            }
            guard state.passcode != nil else { throw la(KeyboundError.LAErrorCode.passcodeNotSet) }
            switch policy.combination {
            case .or:
                if policy.acceptsBiometry {
                    factors.insert(try biometricStage(passcodeFallback: policy.acceptsPasscodeAlone))
                } else {
                    factors.insert(try passcodeStage())
                }
            case .and:
                let needsBiometry = policy.constraints.contains { $0.acceptsBiometry && !$0.acceptsPasscode }
                let needsPasscode = policy.constraints.contains { $0.acceptsPasscode && !$0.acceptsBiometry }
                if needsBiometry { factors.insert(try biometricStage(passcodeFallback: false)) }
                if needsPasscode { factors.insert(try passcodeStage()) }
                if !needsBiometry && !needsPasscode {
                    factors.insert(try biometricStage(passcodeFallback: true))
                }
            }
        } else if policy.requiresVerification && prompt.applicationPassword == nil {
            throw la(
                KeyboundError.LAErrorCode.authenticationFailed, "this policy needs the application password")
        }
        let id = random.bytes(16).map { String(format: "%02x", $0) }.joined()
        let now = clock.now()
        issued[id] = IssuedVerification(
            factors: factors, verifiedAt: now, reuseDuration: policy.reuseDuration,
            enrollmentState: state.enrollmentState,
            applicationPassword: prompt.applicationPassword)
        return Verification(id: id, factors: factors, verifiedAt: now, reuseDuration: policy.reuseDuration)
    }

    /// One biometric evaluation (docs/design.md, emulator rule 3). Returns the factor that satisfied
    /// it (`.passcode` after the passcode screen).
    ///
    /// - Touch ID shows the fallback button from the first failed match and ends the
    ///   evaluation after 3 failed matches.
    /// - Face ID (and Optic ID) shows the fallback button only after 2 failed matches; the next
    ///   outcome then decides: the fallback button (or typing the passcode behind it), Cancel, or
    ///   anything else, which ends the evaluation as failed without being a match attempt.
    /// - A tap on a fallback button that is not shown yet does nothing (the outcome is consumed).
    /// - The fallback button leads to the passcode screen when the policy accepts the passcode,
    ///   otherwise to `userFallback` (the app's own password path); a failed evaluation likewise
    ///   goes to the passcode screen, or is `authenticationFailed`.
    /// - The fifth failed match in a row, across evaluations, locks biometry out at once.
    /// - The system or the app can dismiss the prompt at any point (`systemCancel`, `appCancel`).
    private func biometricStage(passcodeFallback: Bool) throws -> Verification.Factor {
        if let reason = biometryUnavailableReason() {
            if passcodeFallback { return try passcodeStage() }
            throw reason
        }
        let isTouchID = state.biometryType == .touchID
        func fallback(_ outcome: PresentationOutcome) throws -> Verification.Factor {
            guard passcodeFallback else { throw la(KeyboundError.LAErrorCode.userFallback) }
            // Typing the passcode is tapping the fallback button, then entering it.
            if case .passcode = outcome { state.queue.insert(outcome, at: 0) }
            return try passcodeStage()
        }
        func failed() throws -> Verification.Factor {
            if passcodeFallback { return try passcodeStage() }
            throw la(KeyboundError.LAErrorCode.authenticationFailed)
        }
        var failedMatches = 0
        while true {
            guard let outcome = nextOutcome() else { throw la(KeyboundError.LAErrorCode.userCancel) }
            let fallbackShown = failedMatches >= (isTouchID ? 1 : 2)
            switch outcome {
            case .userCancel: throw la(KeyboundError.LAErrorCode.userCancel)
            case .systemCancel: throw la(KeyboundError.LAErrorCode.systemCancel)
            case .appCancel: throw la(KeyboundError.LAErrorCode.appCancel)
            case .userFallback, .passcode:
                if fallbackShown { return try fallback(outcome) }
            case .match, .noMatch:
                // Face ID after two failed matches: only the fallback button or Cancel remain.
                if !isTouchID && fallbackShown { return try failed() }
                if outcome == .match {
                    state.consecutiveFailedMatches = 0
                    return .biometry
                }
                state.consecutiveFailedMatches += 1
                failedMatches += 1
                if isLockedOut {
                    if passcodeFallback { return try passcodeStage() }
                    throw la(KeyboundError.LAErrorCode.biometryLockout)
                }
                if isTouchID && failedMatches >= 3 { return try failed() }
            }
        }
    }

    /// The passcode screen. A right passcode clears a biometric lockout.
    private func passcodeStage() throws -> Verification.Factor {
        var wrongEntries = 0
        while true {
            guard let outcome = nextOutcome() else { throw la(KeyboundError.LAErrorCode.userCancel) }
            switch outcome {
            case .passcode(let code):
                if state.passcode?.matches(code) == true {
                    state.consecutiveFailedMatches = 0
                    return .passcode
                }
                wrongEntries += 1
                if wrongEntries >= Self.lockoutThreshold {
                    throw la(
                        KeyboundError.LAErrorCode.authenticationFailed, "wrong passcode \(wrongEntries) times"
                    )
                }
            case .userCancel, .userFallback: throw la(KeyboundError.LAErrorCode.userCancel)
            case .systemCancel: throw la(KeyboundError.LAErrorCode.systemCancel)
            case .appCancel: throw la(KeyboundError.LAErrorCode.appCancel)
            case .match, .noMatch: continue  // no sensor on the passcode screen
            }
        }
    }

    private func nextOutcome() -> PresentationOutcome? {
        state.queue.isEmpty ? nil : state.queue.removeFirst()
    }

    // MARK: - Enforcement, inside the device

    /// Whether the data class is readable in the device's lock state.
    private func checkAccessible(_ policy: AccessPolicy) throws {
        let accessibility = policy.accessibility
        if accessibility.requiresUnlockedDevice && state.isLocked {
            throw os(KeyboundError.OSStatusCode.interactionNotAllowed, "the device is locked")
        }
        if !state.hasUnlockedSinceBoot {
            throw os(KeyboundError.OSStatusCode.interactionNotAllowed, "not unlocked since boot")
        }
        if accessibility == .whenPasscodeSetThisDeviceOnly && state.passcode == nil {
            throw KeyboundError(
                .passcodeNotSet, native: .osStatus(KeyboundError.OSStatusCode.authFailed),
                message: "whenPasscodeSetThisDeviceOnly needs a device passcode")
        }
    }

    /// The access-control check of the Keychain and Secure Enclave: the verification must be
    /// one this device issued, fresh, unused when single-use, and satisfy the policy.
    private func authorize(
        _ policy: AccessPolicy, applicationPassword: SecretVerifier?, verification: Verification?
    ) throws {
        guard policy.requiresVerification else { return }
        guard let verification, var record = issued[verification.id] else {
            throw os(KeyboundError.OSStatusCode.authFailed, "no verification this device issued")
        }
        guard
            Verification.admits(
                verifiedAt: record.verifiedAt, reuseDuration: record.reuseDuration,
                previousUses: record.uses, now: clock.now())
        else {
            throw os(
                KeyboundError.OSStatusCode.authFailed,
                "the verification was already used or its reuse window is over")
        }
        func satisfies(_ constraint: AccessPolicy.Constraint) -> Bool {
            switch constraint {
            case .biometryCurrentSet:
                record.factors.contains(.biometry) && record.enrollmentState == state.enrollmentState
            case .biometryAny: record.factors.contains(.biometry)
            case .userPresence: record.factors.contains(.biometry) || record.factors.contains(.passcode)
            case .devicePasscode: record.factors.contains(.passcode)
            case .applicationPassword:
                record.applicationPassword.map { applicationPassword?.matches($0) == true } ?? false
            }
        }
        let satisfied =
            switch policy.combination {
            case .or: policy.constraints.contains(where: satisfies)
            case .and: policy.constraints.allSatisfy(satisfies)
            }
        guard satisfied else {
            throw os(KeyboundError.OSStatusCode.authFailed, "the verification does not satisfy \(policy)")
        }
        record.uses += 1
        issued[verification.id] = record
    }

    /// The item or key stored under `name` in `store` (`\.items` or `\.keys`).
    /// - Throws: `itemNotFound` (-25300).
    private func existing<Material: ProtectedMaterial>(
        _ store: KeyPath<DeviceState, [ItemName: Material]>, _ name: ItemName
    ) throws -> Material {
        guard let material = state[keyPath: store][name] else {
            throw os(KeyboundError.OSStatusCode.itemNotFound, "no \(Material.noun) \(name)")
        }
        return material
    }

    /// The item or key stored under `name`, once its accessibility allows it in the device's
    /// state and `verification` satisfies its policy (spending a single-use verification).
    private func usable<Material: ProtectedMaterial>(
        _ store: KeyPath<DeviceState, [ItemName: Material]>, _ name: ItemName, verification: Verification?
    ) throws -> Material {
        let material = try existing(store, name)
        try checkAccessible(material.policy)
        try authorize(
            material.policy, applicationPassword: material.applicationPassword, verification: verification)
        return material
    }

    /// Refuses to create material that a real device would refuse.
    private func checkCreatable(_ policy: AccessPolicy) throws {
        try checkAccessible(policy)
        if policy.requiresBiometry, let reason = biometryUnavailableReason(), reason != .biometryLockout {
            throw reason
        }
    }

    // MARK: - SecureStore

    /// Stores an item, refusing what a real Keychain refuses: a locked device (except for
    /// `afterFirstUnlock…` classes), no passcode for `whenPasscodeSetThisDeviceOnly`, a
    /// biometric policy while biometrics are unavailable (a lockout does not count).
    /// - Throws: ``KeyboundError`` with the `OSStatus` or `LAError` a device gives.
    public func store(_ value: Data, as name: ItemName, policy: AccessPolicy, verification: Verification?)
        throws
    {
        try checkCreatable(policy)
        var applicationPassword: SecretVerifier?
        if policy.constraints.contains(.applicationPassword) {
            guard let verification, let record = issued[verification.id],
                let typed = record.applicationPassword
            else {
                throw os(KeyboundError.OSStatusCode.authFailed, "this policy needs the application password")
            }
            applicationPassword = try SecretVerifier(typed, random: random)
        }
        state.items[name] = DeviceState.Item(
            value: value, policy: policy, applicationPassword: applicationPassword)
    }

    /// Reads an item after checking, inside the device, its accessibility and that
    /// `verification` satisfies its policy (rule 5). A single-use verification is spent.
    /// - Throws: `itemNotFound` (-25300, also for an item an enrollment change destroyed),
    ///   `authenticationFailed` (-25293), `interactionNotAllowed` (-25308), `passcodeNotSet`.
    public func read(_ name: ItemName, verification: Verification?) throws -> Data {
        try usable(\.items, name, verification: verification).value
    }

    /// Replaces an item's value under the same checks as ``read(_:verification:)``.
    public func update(_ value: Data, as name: ItemName, verification: Verification?) throws {
        var item = try usable(\.items, name, verification: verification)
        item.value = value
        state.items[name] = item
    }

    /// Deletes the item; deleting what is not there succeeds.
    public func delete(_ name: ItemName) {
        state.items[name] = nil
    }

    /// Whether the item exists; never prompts and needs no verification.
    public func exists(_ name: ItemName) -> Bool {
        state.items[name] != nil
    }

    /// The policy an item was stored with — what the emulated OS evaluates when it prompts.
    public func itemPolicy(_ name: ItemName) throws -> AccessPolicy { try existing(\.items, name).policy }

    // MARK: - KeyVault

    /// Creates a P-256 key inside the emulated secure element, replacing any of that name.
    /// - Returns: the public key, SubjectPublicKeyInfo DER.
    /// - Throws: `invalidInput` for a policy with an application password (as the Secure
    ///   Enclave); otherwise as ``store(_:as:policy:verification:)``.
    public func createKey(_ name: ItemName, policy: AccessPolicy) throws -> Data {
        guard !policy.constraints.contains(.applicationPassword) else {
            throw KeyboundError.invalidInput("secure element keys do not take an application password")
        }
        try checkCreatable(policy)
        let key = try P256SigningKey()
        state.keys[name] = DeviceState.Key(privateKey: key.rawRepresentation, policy: policy)
        return key.publicKey.spkiDER
    }

    /// The key's public part (SPKI DER); needs no verification.
    /// - Throws: `itemNotFound` (-25300).
    public func publicKey(_ name: ItemName) throws -> Data {
        try signingKey(try existing(\.keys, name)).publicKey.spkiDER
    }

    /// Signs `message` (ECDSA P-256 over SHA-256, DER) after the same checks as
    /// ``read(_:verification:)``; the private key never leaves the device.
    public func sign(_ message: Data, with name: ItemName, verification: Verification?) throws -> Data {
        let key = try usable(\.keys, name, verification: verification)
        return try signingKey(key).signature(for: message).derRepresentation
    }

    /// Checks a signature with the key's public part (no verification needed; a malformed
    /// signature is simply not valid).
    public func isValidSignature(_ signature: Data, for message: Data, by name: ItemName) throws -> Bool {
        let publicKey = try signingKey(try existing(\.keys, name)).publicKey
        guard let parsed = try? P256Signature(derRepresentation: signature) else { return false }
        return publicKey.isValidSignature(parsed, for: message)
    }

    /// The emulated secure element seals with an AES-256-GCM key it derives inside itself from
    /// the private key; the bytes differ from Apple's ECIES, the contract is the same: anyone
    /// may encrypt, only a verified user can decrypt.
    public func encrypt(_ plaintext: Data, for name: ItemName) throws -> Data {
        try AES256GCM.seal(plaintext, key: try sealingKey(try existing(\.keys, name)))
    }

    /// Opens what ``encrypt(_:for:)`` sealed, after the same checks as ``read(_:verification:)``.
    /// - Throws: `invalidInput` for a ciphertext not sealed to this key, or altered.
    public func decrypt(_ ciphertext: Data, with name: ItemName, verification: Verification?) throws -> Data {
        let key = try usable(\.keys, name, verification: verification)
        do {
            return try AES256GCM.open(ciphertext, key: try sealingKey(key))
        } catch {
            throw KeyboundError.invalidInput("the ciphertext was not sealed to \(name), or was altered")
        }
    }

    /// Deletes the key; deleting what is not there succeeds.
    public func deleteKey(_ name: ItemName) {
        state.keys[name] = nil
    }

    /// Whether the key exists; never prompts.
    public func keyExists(_ name: ItemName) -> Bool {
        state.keys[name] != nil
    }

    /// SHA-256 by KeyboundCrypto (OpenSSL here, CryptoKit on Apple platforms).
    public nonisolated func sha256(_ message: Data) -> Data { Digest.sha256(message) }

    /// The policy a key was created with — what the emulated OS evaluates when it prompts.
    public func keyPolicy(_ name: ItemName) throws -> AccessPolicy { try existing(\.keys, name).policy }

    private func signingKey(_ key: DeviceState.Key) throws -> P256SigningKey {
        try P256SigningKey(rawRepresentation: key.privateKey)
    }

    private func sealingKey(_ key: DeviceState.Key) throws -> Data {
        try HKDFSHA256.deriveKey(
            inputKeyMaterial: key.privateKey, salt: Data("keybound-emulator-seal".utf8), info: Data(),
            outputByteCount: AES256GCM.keyByteCount)
    }

    // MARK: - Persistence

    /// Binds the sealed file to its format: files of the first format (an unsalted passcode
    /// hash) do not open.
    private static let fileContext = Data("keybound-emulated-device-v2".utf8)

    /// Writes the device (AES-256-GCM under `key`, 32 bytes) atomically to `url`, as a new
    /// owner-only file (`0600`) renamed into place.
    ///
    /// The seal keeps the state unreadable and unchangeable for whoever has the file but not
    /// the key; whoever has both sees everything in it (item values, the emulated keys' private
    /// parts, the passcode's salted and stretched verifier).
    public func save(to url: URL, key: Data) throws {
        let plaintext = try JSONEncoder().encode(state)
        let sealed = try AES256GCM.seal(plaintext, key: key, authenticating: Self.fileContext)
        try OwnerOnlyFile.replace(sealed, at: url)
    }

    /// Reads a device written by ``save(to:key:)``.
    /// - Throws: ``KeyboundError/invalidInput`` when the file is not an owner-only regular file
    ///   of the current user, or not a device sealed with `key`.
    public static func load(
        from url: URL, key: Data, clock: Clock = .system, random: RandomSource = .system
    ) throws -> EmulatedDevice {
        let sealed = try OwnerOnlyFile.read(url)
        do {
            let plaintext = try AES256GCM.open(sealed, key: key, authenticating: fileContext)
            return try EmulatedDevice(statePlaintext: plaintext, clock: clock, random: random)
        } catch {
            throw KeyboundError.invalidInput("\(url.path) is not a device state sealed with this key")
        }
    }

    /// A device from the plaintext of a state file, as ``load(from:key:clock:random:)`` opens it.
    /// A seam of its own so that the `emulator-state` fuzz harness reaches the decoder without
    /// having to get past the seal.
    init(statePlaintext: Data, clock: Clock, random: RandomSource) throws {
        self.init(
            state: try JSONDecoder().decode(DeviceState.self, from: statePlaintext), clock: clock,
            random: random)
    }

    // MARK: - Helpers

    private nonisolated func la(_ code: Int, _ message: String? = nil) -> KeyboundError {
        KeyboundError(laErrorCode: code, message: message)
    }

    private nonisolated func os(_ status: Int32, _ message: String? = nil) -> KeyboundError {
        KeyboundError(osStatus: status, message: message) ?? .unexpected
    }
}
