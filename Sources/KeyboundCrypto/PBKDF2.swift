import Foundation

/// PBKDF2 with HMAC-SHA-256 (RFC 8018 §5.2): a salted derivation from a password, made slow on
/// purpose by its iteration count, so that each guess at the password costs as much.
public enum PBKDF2SHA256 {
    /// The iteration counts accepted: at least 1, at most what CommonCrypto takes (`UInt32`).
    static let iterationRange = 1...Int(UInt32.max)
    /// The output lengths accepted: a key or a verifier, never a keystream.
    static let outputRange = 1...1024

    /// Derives `outputByteCount` bytes from `password`.
    ///
    /// ```swift
    /// let salt = SecureRandom.bytes(16)
    /// let verifier = try PBKDF2SHA256.deriveKey(
    ///     password: Data(passcode.utf8), salt: salt, iterations: 100_000, outputByteCount: 32)
    /// ```
    ///
    /// - Parameters:
    ///   - password: The password's bytes; any length, including empty.
    ///   - salt: A random, non-secret value stored beside the output (16 bytes or more).
    ///   - iterations: How many times HMAC is applied per output block, `1...4294967295`.
    ///   - outputByteCount: How many bytes to derive, `1...1024`.
    /// - Returns: `outputByteCount` bytes.
    /// - Throws: ``CryptoError/invalidParameter`` for an iteration count or output length outside
    ///   those ranges; ``CryptoError/backend(_:)`` when the crypto library fails.
    public static func deriveKey(password: Data, salt: Data, iterations: Int, outputByteCount: Int) throws
        -> Data
    {
        guard iterationRange.contains(iterations) else {
            throw CryptoError.invalidParameter.with(
                detail: "PBKDF2 iterations must be 1...2^32-1, not \(iterations)")
        }
        guard outputRange.contains(outputByteCount) else {
            throw CryptoError.invalidParameter.with(
                detail: "PBKDF2 output must be 1...1024 bytes, not \(outputByteCount)")
        }
        return try PBKDF2Backend.deriveKey(
            password: password, salt: salt, iterations: iterations, outputByteCount: outputByteCount)
    }
}
