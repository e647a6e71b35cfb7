import Foundation

/// `Codable` payloads of any size, encrypted to a key in secure hardware, so that large
/// secrets get the same biometric binding as a Keychain item.
///
/// Sealing needs no verification (it uses the public key); opening needs one that satisfies
/// the key's policy. The ciphertext lives in the ``SecureStore`` as an unprotected item: it is
/// useless without the key. An enrollment change that destroys the key reports `invalidated`.
public struct SealedStore: Sendable {
    private let keys: ProtectedKeys
    private let blobs: any SecureStore
    private let keyName: ItemName

    /// A store for payloads sealed to the key `keyName`; call ``prepare(policy:)`` once first.
    ///
    /// - Parameters:
    ///   - keyName: the sealing key's name; it is created by ``prepare(policy:)``.
    ///   - vault: the secure hardware holding the key.
    ///   - store: where the ciphertexts (and invalidation markers) live.
    ///   - verifier: tells the enrollment state, for the invalidation signal.
    public init(keyName: ItemName, vault: any KeyVault, store: any SecureStore, verifier: any UserVerifier) {
        keys = ProtectedKeys(vault: vault, markers: store, verifier: verifier)
        blobs = store
        self.keyName = keyName
    }

    /// Creates the sealing key (replacing an old one, whose payloads become unreadable).
    public func prepare(policy: AccessPolicy = .biometryCurrentSet) async throws {
        _ = try await keys.createKey(keyName, policy: policy)
    }

    /// Whether the sealing key is present, absent or invalidated.
    public func status() async throws -> ProtectedItemStatus { try await keys.status(keyName) }

    /// Encrypts and stores `value` under `name`.
    public func seal<Value: Encodable>(_ value: Value, as name: ItemName) async throws {
        let plaintext: Data
        do { plaintext = try JSONEncoder().encode(value) } catch {
            throw KeyboundError.invalidInput("the value cannot be encoded: \(error)")
        }
        let ciphertext = try await keys.encrypt(plaintext, for: keyName)
        try await blobs.store(ciphertext, as: name, policy: .noVerification, verification: nil)
    }

    /// Reads and decrypts the value under `name`.
    /// - Throws: `itemNotFound`, `invalidated` (the key died with an enrollment change),
    ///   `authenticationFailed`, …
    public func open<Value: Decodable>(
        _ name: ItemName, as type: Value.Type, verification: Verification?
    ) async throws -> Value {
        let ciphertext = try await blobs.read(name, verification: nil)
        let plaintext = try await keys.decrypt(ciphertext, with: keyName, verification: verification)
        do { return try JSONDecoder().decode(type, from: plaintext) } catch {
            throw KeyboundError(.unexpected, message: "\(name) does not hold a \(type)")
        }
    }

    /// Deletes the payload under `name`.
    public func delete(_ name: ItemName) async throws { try await blobs.delete(name) }
}
