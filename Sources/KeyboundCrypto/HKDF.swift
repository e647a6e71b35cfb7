import Foundation

/// HKDF with HMAC-SHA-256 (RFC 5869): extract-then-expand key derivation.
public enum HKDFSHA256 {
    /// The largest output RFC 5869 allows: 255 blocks of 32 bytes.
    static let maximumOutputByteCount = 255 * Digest.sha256ByteCount

    /// Derives `outputByteCount` bytes of key material.
    ///
    /// ```swift
    /// let key = try HKDFSHA256.deriveKey(
    ///     inputKeyMaterial: sharedSecret, salt: salt,
    ///     info: Data("keybound token v1".utf8), outputByteCount: AES256GCM.keyByteCount)
    /// ```
    ///
    /// - Parameters:
    ///   - inputKeyMaterial: The secret to derive from; any length, including empty.
    ///   - salt: A non-secret random value; empty means RFC 5869's default (32 zero bytes).
    ///   - info: Context that binds the output to its purpose; may be empty.
    ///   - outputByteCount: How many bytes to derive, `1...8160`.
    /// - Returns: `outputByteCount` bytes.
    /// - Throws: ``CryptoError/invalidParameter`` when `outputByteCount` is outside `1...8160`;
    ///   ``CryptoError/backend(_:)`` when the crypto library fails.
    public static func deriveKey(
        inputKeyMaterial: Data, salt: Data, info: Data, outputByteCount: Int
    ) throws -> Data {
        guard (1...maximumOutputByteCount).contains(outputByteCount) else {
            throw CryptoError.invalidParameter.with(
                detail:
                    "HKDF-SHA256 output must be 1...\(maximumOutputByteCount) bytes, not \(outputByteCount)")
        }
        return try HKDFBackend.deriveKey(
            inputKeyMaterial: inputKeyMaterial, salt: salt, info: info, outputByteCount: outputByteCount)
    }
}
