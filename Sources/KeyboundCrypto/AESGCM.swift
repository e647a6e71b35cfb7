import Foundation

/// AES-256 in Galois/Counter Mode (NIST SP 800-38D): authenticated encryption with associated
/// data.
///
/// The combined form is what to store or send: `nonce || ciphertext || tag`, with a fresh random
/// 12-byte nonce per message.
///
/// ```swift
/// let key = SecureRandom.bytes(AES256GCM.keyByteCount)
/// let box = try AES256GCM.seal(Data("refresh-token".utf8), key: key, authenticating: itemID)
/// let token = try AES256GCM.open(box, key: key, authenticating: itemID)
/// ```
///
/// - Important: Never reuse a nonce with the same key: that reveals the XOR of the two
///   plaintexts and lets an attacker forge tags. Leave `nonce` as `nil` unless a protocol fixes it.
public enum AES256GCM {
    /// The key size: AES-256 only.
    public static let keyByteCount = 32
    /// The nonce size of the combined form, and the recommended size everywhere.
    public static let nonceByteCount = 12
    /// The tag size: full 128-bit tags only.
    public static let tagByteCount = 16
    /// The nonce sizes the component form accepts. CryptoKit refuses nonces under 12 bytes;
    /// OpenSSL 3.0 refuses nonces over 128 bytes; both backends enforce the same range.
    static let nonceByteCounts = 12...128

    /// Encrypts and authenticates `plaintext`, returning `nonce || ciphertext || tag`.
    ///
    /// - Parameters:
    ///   - plaintext: The data to encrypt; may be empty.
    ///   - key: A 32-byte key.
    ///   - nonce: A 12-byte nonce, or `nil` (recommended) for a fresh random one.
    ///   - aad: Associated data that is authenticated but not encrypted; ``open(_:key:authenticating:)``
    ///     must be given the same bytes.
    /// - Returns: The combined box: 12-byte nonce, ciphertext (as long as `plaintext`), 16-byte tag.
    /// - Throws: ``CryptoError/invalidParameter`` for a key that is not 32 bytes or a nonce that is
    ///   not 12 bytes (use the component form for longer nonces).
    public static func seal(
        _ plaintext: Data, key: Data, nonce: Data? = nil, authenticating aad: Data = Data()
    ) throws -> Data {
        if let nonce, nonce.count != nonceByteCount {
            throw CryptoError.invalidParameter.with(
                detail: "the combined form needs a \(nonceByteCount)-byte nonce, not \(nonce.count)")
        }
        let nonce = nonce ?? SecureRandom.bytes(nonceByteCount)
        let sealed = try seal(plaintext, key: key, nonce: nonce, aad: aad)
        var combined = Data(capacity: nonce.count + sealed.ciphertext.count + sealed.tag.count)
        combined.append(nonce)
        combined.append(sealed.ciphertext)
        combined.append(sealed.tag)
        return combined
    }

    /// Verifies and decrypts a combined box made by ``seal(_:key:nonce:authenticating:)``.
    ///
    /// - Parameters:
    ///   - combined: `nonce || ciphertext || tag`, at least 28 bytes.
    ///   - key: The 32-byte key it was sealed with.
    ///   - aad: The associated data it was sealed with.
    /// - Returns: The plaintext.
    /// - Throws: ``CryptoError/authenticationFailure`` when the key, box or associated data do not
    ///   match (no plaintext is released); ``CryptoError/invalidParameter`` for a key that is not
    ///   32 bytes or a box shorter than a nonce and a tag.
    public static func open(_ combined: Data, key: Data, authenticating aad: Data = Data()) throws -> Data {
        guard combined.count >= nonceByteCount + tagByteCount else {
            throw CryptoError.invalidParameter.with(
                detail:
                    "a sealed box holds at least \(nonceByteCount + tagByteCount) bytes, not \(combined.count)"
            )
        }
        let nonce = combined.prefix(nonceByteCount)
        let ciphertext = combined.dropFirst(nonceByteCount).dropLast(tagByteCount)
        let tag = combined.suffix(tagByteCount)
        return try open(ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, aad: aad)
    }

    /// Encrypts and authenticates `plaintext` under an explicit nonce, returning the parts.
    ///
    /// - Parameters:
    ///   - plaintext: The data to encrypt; may be empty.
    ///   - key: A 32-byte key.
    ///   - nonce: 12 to 128 bytes; 12 is the standard size, longer nonces are hashed by GCM.
    ///   - aad: Associated data that is authenticated but not encrypted.
    /// - Returns: The ciphertext (as long as `plaintext`) and the 16-byte tag.
    /// - Throws: ``CryptoError/invalidParameter`` for a key that is not 32 bytes or a nonce outside
    ///   12...128 bytes.
    public static func seal(
        _ plaintext: Data, key: Data, nonce: Data, aad: Data
    ) throws -> (ciphertext: Data, tag: Data) {
        try checkParameters(key: key, nonce: nonce)
        return try AESGCMBackend.seal(plaintext, key: key, nonce: nonce, aad: aad)
    }

    /// Verifies and decrypts the parts made by ``seal(_:key:nonce:aad:)``.
    ///
    /// - Parameters:
    ///   - ciphertext: The ciphertext.
    ///   - tag: The 16-byte tag.
    ///   - key: The 32-byte key.
    ///   - nonce: The nonce it was sealed with, 12 to 128 bytes.
    ///   - aad: The associated data it was sealed with.
    /// - Returns: The plaintext.
    /// - Throws: ``CryptoError/authenticationFailure`` when the tag does not match (no plaintext
    ///   is released); ``CryptoError/invalidParameter`` for a key that is not 32 bytes, a nonce
    ///   outside 12...128 bytes or a tag that is not 16 bytes.
    public static func open(ciphertext: Data, tag: Data, key: Data, nonce: Data, aad: Data) throws -> Data {
        try checkParameters(key: key, nonce: nonce)
        guard tag.count == tagByteCount else {
            throw CryptoError.invalidParameter.with(
                detail: "AES-GCM tags must be \(tagByteCount) bytes, not \(tag.count)")
        }
        return try AESGCMBackend.open(ciphertext: ciphertext, tag: tag, key: key, nonce: nonce, aad: aad)
    }

    private static func checkParameters(key: Data, nonce: Data) throws {
        guard key.count == keyByteCount else {
            throw CryptoError.invalidParameter.with(
                detail: "AES-256-GCM keys must be \(keyByteCount) bytes, not \(key.count)")
        }
        guard nonceByteCounts.contains(nonce.count) else {
            throw CryptoError.invalidParameter.with(
                detail: "AES-GCM nonces must be \(nonceByteCounts) bytes, not \(nonce.count)")
        }
    }
}
