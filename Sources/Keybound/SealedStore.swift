import Foundation

/// `Codable` payloads of any size, encrypted to a key in secure hardware, so that large
/// secrets get the same biometric binding as a Keychain item.
///
/// Sealing needs no verification: the payload is encrypted to the sealing key's public part,
/// and the result is signed, together with the item's name, by a second key in the same secure
/// hardware that needs no verification (the *signer*). Opening first checks that signature —
/// so a blob made anywhere else (encrypting to the public key is something anyone holding it
/// can do) or moved to another name is refused before any decryption — and then needs a
/// verification that satisfies the sealing key's policy. The blobs live in the
/// ``SecureStore`` as unprotected items: they are useless without both keys. An enrollment
/// change that destroys the sealing key reports `invalidated`.
///
/// What it does not stop: someone who can run code as the app on the unlocked device can seal
/// (as the app itself can), and can put back an older blob that was sealed under the same name.
///
/// ```swift
/// let vault = SealedStore(keyName: "acme.seal", vault: enclave, store: keychain, verifier: la)
/// try await vault.prepare()
/// try await vault.seal(statement, as: "acme.statement")
/// let verification = try await la.verify(.biometryCurrentSet, prompt: prompt)
/// let opened = try await vault.open("acme.statement", as: Statement.self, verification: verification)
/// ```
public struct SealedStore: Sendable {
    private let keys: ProtectedKeys
    private let vault: any KeyVault
    private let blobs: any SecureStore
    private let keyName: ItemName
    private let signerName: ItemName

    /// What the signer signs: a fixed context, the item's name (length-prefixed) and the
    /// ciphertext, so that a signature for one name never verifies for another.
    private static let context = Data("keybound sealed v1\u{0}".utf8)
    /// The blob's first byte: the format version.
    private static let version: UInt8 = 1

    /// A store for payloads sealed to the key `keyName`; call ``prepare(policy:)`` once first.
    ///
    /// - Parameters:
    ///   - keyName: the sealing key's name; it (and its signer) are created by ``prepare(policy:)``.
    ///   - vault: the secure hardware holding the keys.
    ///   - store: where the blobs (and invalidation markers) live.
    ///   - verifier: tells the enrollment state, for the invalidation signal.
    public init(keyName: ItemName, vault: any KeyVault, store: any SecureStore, verifier: any UserVerifier) {
        keys = ProtectedKeys(vault: vault, markers: store, verifier: verifier)
        self.vault = vault
        blobs = store
        self.keyName = keyName
        signerName = ItemName(reserved: "\(ItemName.reservedPrefix)signer.\(keyName.rawValue)")
    }

    /// Creates the sealing key and its signer (replacing old ones, whose blobs become
    /// unreadable).
    public func prepare(policy: AccessPolicy = .biometryCurrentSet) async throws {
        _ = try await vault.createKey(signerName, policy: .noVerification)
        _ = try await keys.createKey(keyName, policy: policy)
    }

    /// Whether the sealing key is present, absent or invalidated.
    public func status() async throws -> ProtectedItemStatus { try await keys.status(keyName) }

    /// Encrypts `value`, signs it with `name`, and stores it under `name`.
    public func seal<Value: Encodable>(_ value: Value, as name: ItemName) async throws {
        let plaintext: Data
        do { plaintext = try JSONEncoder().encode(value) } catch {
            throw KeyboundError.invalidInput("the value cannot be encoded: \(error)")
        }
        let ciphertext = try await keys.encrypt(plaintext, for: keyName)
        let signature = try await vault.sign(
            Self.signedMessage(ciphertext, name: name), with: signerName, verification: nil)
        guard let length = UInt16(exactly: signature.count) else {
            throw KeyboundError(.unexpected, message: "a \(signature.count)-byte signature")
        }
        let blob = Data([Self.version, UInt8(length >> 8), UInt8(length & 0xFF)]) + signature + ciphertext
        try await blobs.store(blob, as: name, policy: .noVerification, verification: nil)
    }

    /// Reads the blob under `name`, checks that this device sealed it under this name, and
    /// decrypts it.
    /// - Throws: `itemNotFound`; `invalidInput` for a blob this device did not seal under
    ///   `name` (forged, moved or altered; nothing is decrypted then); `invalidated` (the
    ///   key died with an enrollment change); `authenticationFailed`, …
    public func open<Value: Decodable>(
        _ name: ItemName, as type: Value.Type, verification: Verification?
    ) async throws -> Value {
        let blob = try await blobs.read(name, verification: nil)
        let refused = KeyboundError.invalidInput("\(name) was not sealed on this device under this name")
        guard blob.count > 3, blob[blob.startIndex] == Self.version else { throw refused }
        let length = Int(blob[blob.startIndex + 1]) << 8 | Int(blob[blob.startIndex + 2])
        let signatureStart = blob.startIndex + 3
        guard blob.endIndex - signatureStart > length else { throw refused }
        let signature = blob[signatureStart..<signatureStart + length]
        let ciphertext = blob[(signatureStart + length)...]
        guard
            try await vault.isValidSignature(
                Data(signature), for: Self.signedMessage(Data(ciphertext), name: name), by: signerName)
        else { throw refused }
        let plaintext = try await keys.decrypt(Data(ciphertext), with: keyName, verification: verification)
        do { return try JSONDecoder().decode(type, from: plaintext) } catch {
            throw KeyboundError(.unexpected, message: "\(name) does not hold a \(type)")
        }
    }

    /// Deletes the payload under `name`.
    public func delete(_ name: ItemName) async throws { try await blobs.delete(name) }

    private static func signedMessage(_ ciphertext: Data, name: ItemName) -> Data {
        // An item name is at most 128 bytes (``ItemName``): one length byte holds it.
        let nameBytes = Data(name.rawValue.utf8)
        return context + Data([UInt8(clamping: nameBytes.count)]) + nameBytes + ciphertext
    }
}
