import Foundation

/// Whether protected material is there, as far as can be told without prompting.
public enum ProtectedItemStatus: String, Sendable, Hashable, Codable {
    /// Never stored, or deleted on purpose.
    case absent
    /// Stored and, as far as the device can tell, usable.
    case present
    /// It was stored, but an enrollment change or passcode removal destroyed it.
    case invalidated
}

/// The small unprotected record Keybound keeps beside each protected item or key: that it
/// exists, and the enrollment state it was bound to. It lets every backend tell
/// "invalidated" from "never stored", which the platforms themselves do not.
struct InvalidationMarkers: Sendable {
    private struct Marker: Codable {
        let boundToCurrentEnrollment: Bool
        let enrollmentState: Data?
    }

    let store: any SecureStore
    let verifier: any UserVerifier
    /// "item" or "key": markers of items and keys live apart.
    let kind: String

    private func markerName(_ name: ItemName) -> ItemName {
        ItemName(reserved: "\(ItemName.reservedPrefix)\(kind).\(name.rawValue)")
    }

    /// Records that `name` now exists under `policy`.
    func record(_ name: ItemName, policy: AccessPolicy) async throws {
        let state = await verifier.availability().enrollmentState
        let marker = Marker(
            boundToCurrentEnrollment: policy.isBoundToCurrentEnrollment, enrollmentState: state)
        try await store.store(
            try JSONEncoder().encode(marker), as: markerName(name), policy: .noVerification, verification: nil
        )
    }

    func forget(_ name: ItemName) async throws {
        try await store.delete(markerName(name))
    }

    /// Whether material recorded under `name` is known to be dead: its enrollment changed.
    func isStale(_ name: ItemName) async throws -> Bool {
        guard let marker = try await load(name) else { return false }
        guard marker.boundToCurrentEnrollment else { return false }
        let availability = await verifier.availability()
        // No state while biometrics are only unusable (lockout, turned off for the app) proves
        // nothing: LocalAuthentication then reports none. Only "nothing enrolled" means it is gone.
        if availability.enrollmentState == nil, availability.biometryError != .biometryNotEnrolled {
            return false
        }
        return availability.enrollmentState != marker.enrollmentState
    }

    /// Present, absent or invalidated, given whether the backend still has the material.
    func status(_ name: ItemName, exists: Bool) async throws -> ProtectedItemStatus {
        if try await isStale(name) { return .invalidated }
        if exists { return .present }
        return try await wasRecorded(name) ? .invalidated : .absent
    }

    /// Whether `name` was ever recorded (and not deliberately deleted).
    func wasRecorded(_ name: ItemName) async throws -> Bool {
        try await load(name) != nil
    }

    private func load(_ name: ItemName) async throws -> Marker? {
        let data: Data
        do {
            data = try await store.read(markerName(name), verification: nil)
        } catch let error as KeyboundError where error == .itemNotFound {
            return nil
        }
        return try? JSONDecoder().decode(Marker.self, from: data)
    }

    /// Turns the backend's not-found into the typed `invalidated`, removing what is left of the
    /// dead material and its marker; a truly absent item stays `itemNotFound`.
    func invalidatedError(
        _ name: ItemName, notFound: KeyboundError, removing remove: () async throws -> Void
    ) async throws -> KeyboundError {
        guard try await wasRecorded(name) else { return notFound }
        try await remove()
        try await forget(name)
        return Self.invalidated(name)
    }

    /// The typed `invalidated` for material whose marker says its enrollment changed, reported
    /// before any prompt. Nothing is deleted on the marker's word: it is unprotected, and anyone
    /// who can write the store can forge one. The marker goes only once the backend no longer
    /// has the material either; material the backend still holds stays (a store under the same
    /// name replaces it, and a real Keychain refuses it anyway if it is dead).
    func staleError(_ name: ItemName, backendHasIt: () async throws -> Bool) async throws -> KeyboundError {
        if try await !backendHasIt() { try await forget(name) }
        return Self.invalidated(name)
    }

    /// The one `invalidated` of items and keys. Its native code is what a real Keychain answers
    /// for material an enrollment change or the passcode's removal destroyed, errSecItemNotFound
    /// (-25300), on every path: told by the marker before any call, or by the backend's not-found.
    private static func invalidated(_ name: ItemName) -> KeyboundError {
        KeyboundError(
            .invalidated, native: .osStatus(KeyboundError.OSStatusCode.itemNotFound),
            message: "\(name) was invalidated by an enrollment or passcode change")
    }
}

/// The app-facing secret store: typed `Codable` values on any ``SecureStore``, with the typed
/// invalidation signal.
///
/// A read of an item that an enrollment change destroyed throws ``KeyboundError/invalidated``
/// (recovery `reenroll`) — not `itemNotFound` — and the dead item is removed. Its
/// ``KeyboundError/native`` code is errSecItemNotFound (-25300), what a real Keychain answers then.
///
/// ```swift
/// let store = ProtectedStore(store: device, verifier: device)
/// try await store.store(refreshToken, as: "refresh-token", policy: .biometryCurrentSet)
/// let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
/// let token: String = try await store.read("refresh-token", as: String.self, verification: verification)
/// ```
public struct ProtectedStore: Sendable {
    /// The backend.
    public let store: any SecureStore
    private let markers: InvalidationMarkers

    /// A store on `store`, with its invalidation markers kept in the same backend.
    ///
    /// - Parameters:
    ///   - store: the backend that holds items and enforces their policies.
    ///   - verifier: tells the current enrollment state, to detect invalidation without a prompt.
    public init(store: any SecureStore, verifier: any UserVerifier) {
        self.store = store
        markers = InvalidationMarkers(store: store, verifier: verifier, kind: "item")
    }

    /// Stores raw bytes, replacing any item of that name.
    public func store(
        _ value: Data, as name: ItemName, policy: AccessPolicy, verification: Verification? = nil
    ) async throws {
        try await store.store(value, as: name, policy: policy, verification: verification)
        try await markers.record(name, policy: policy)
    }

    /// Stores a `Codable` value as JSON.
    public func store<Value: Encodable>(
        _ value: Value, as name: ItemName, policy: AccessPolicy, verification: Verification? = nil
    ) async throws {
        let data: Data
        do { data = try JSONEncoder().encode(value) } catch {
            throw KeyboundError.invalidInput("the value cannot be encoded: \(error)")
        }
        try await store(data, as: name, policy: policy, verification: verification)
    }

    /// Reads raw bytes.
    /// - Throws: ``KeyboundError/invalidated`` when an enrollment or passcode change destroyed
    ///   the item; ``KeyboundError/itemNotFound`` when it never existed; else as the backend.
    public func read(_ name: ItemName, verification: Verification?) async throws -> Data {
        if try await markers.isStale(name) {
            throw try await markers.staleError(name) { try await store.exists(name) }
        }
        do {
            return try await store.read(name, verification: verification)
        } catch let error as KeyboundError where error == .itemNotFound {
            throw try await markers.invalidatedError(name, notFound: error) { try await store.delete(name) }
        }
    }

    /// Reads a `Codable` value stored with ``store(_:as:policy:verification:)-(Value,_,_,_)``.
    public func read<Value: Decodable>(
        _ name: ItemName, as type: Value.Type, verification: Verification?
    ) async throws -> Value {
        let data = try await read(name, verification: verification)
        do { return try JSONDecoder().decode(type, from: data) } catch {
            throw KeyboundError(.unexpected, message: "\(name) does not hold a \(type): \(error)")
        }
    }

    /// Replaces the value of an existing item.
    public func update(_ value: Data, as name: ItemName, verification: Verification?) async throws {
        do {
            try await store.update(value, as: name, verification: verification)
        } catch let error as KeyboundError where error == .itemNotFound {
            throw try await markers.invalidatedError(name, notFound: error) { try await store.delete(name) }
        }
    }

    /// Deletes the item on purpose (it then reads as `itemNotFound`, not `invalidated`).
    public func delete(_ name: ItemName) async throws {
        try await store.delete(name)
        try await markers.forget(name)
    }

    /// Present, absent or invalidated — without prompting.
    public func status(_ name: ItemName) async throws -> ProtectedItemStatus {
        try await markers.status(name, exists: try await store.exists(name))
    }
}

/// Signing keys on any ``KeyVault``, with the typed invalidation signal (see ``ProtectedStore``).
public struct ProtectedKeys: Sendable {
    /// The backend.
    public let vault: any KeyVault
    private let markers: InvalidationMarkers

    /// Keys on `vault`, with their invalidation markers kept in `markers`.
    ///
    /// - Parameters:
    ///   - vault: holds the keys and enforces their policies.
    ///   - markers: where the small unprotected invalidation markers live.
    ///   - verifier: tells the current enrollment state.
    public init(vault: any KeyVault, markers: any SecureStore, verifier: any UserVerifier) {
        self.vault = vault
        self.markers = InvalidationMarkers(store: markers, verifier: verifier, kind: "key")
    }

    /// Creates a key, replacing any of that name. Returns its public key (SPKI DER).
    public func createKey(_ name: ItemName, policy: AccessPolicy) async throws -> Data {
        let publicKey = try await vault.createKey(name, policy: policy)
        try await markers.record(name, policy: policy)
        return publicKey
    }

    /// The public key (SPKI DER).
    public func publicKey(_ name: ItemName) async throws -> Data {
        try await withInvalidation(name) { try await vault.publicKey(name) }
    }

    /// Signs `message` (ECDSA P-256 SHA-256, DER).
    /// - Throws: ``KeyboundError/invalidated`` when the key was destroyed by an enrollment change.
    public func sign(_ message: Data, with name: ItemName, verification: Verification?) async throws -> Data {
        try await withInvalidation(name) {
            try await vault.sign(message, with: name, verification: verification)
        }
    }

    /// Encrypts to the key's public part (no verification needed).
    public func encrypt(_ plaintext: Data, for name: ItemName) async throws -> Data {
        try await withInvalidation(name) { try await vault.encrypt(plaintext, for: name) }
    }

    /// Decrypts what ``encrypt(_:for:)`` made, after a verification.
    /// - Throws: ``KeyboundError/invalidated`` when the key was destroyed by an enrollment change.
    public func decrypt(_ ciphertext: Data, with name: ItemName, verification: Verification?) async throws
        -> Data
    {
        try await withInvalidation(name) {
            try await vault.decrypt(ciphertext, with: name, verification: verification)
        }
    }

    /// Deletes the key on purpose.
    public func deleteKey(_ name: ItemName) async throws {
        try await vault.deleteKey(name)
        try await markers.forget(name)
    }

    /// Present, absent or invalidated — without prompting.
    public func status(_ name: ItemName) async throws -> ProtectedItemStatus {
        try await markers.status(name, exists: try await vault.keyExists(name))
    }

    private func withInvalidation<Result>(
        _ name: ItemName, _ body: () async throws -> Result
    ) async throws -> Result {
        if try await markers.isStale(name) {
            throw try await markers.staleError(name) { try await vault.keyExists(name) }
        }
        do {
            return try await body()
        } catch let error as KeyboundError where error == .itemNotFound {
            throw try await markers.invalidatedError(name, notFound: error) {
                try await vault.deleteKey(name)
            }
        }
    }
}
