import Foundation

/// HMAC with SHA-256 (RFC 2104, FIPS 198-1): a message authentication code under a secret key.
///
/// ```swift
/// let tag = try HMACSHA256.authenticationCode(for: message, key: secret)
/// // later, on what comes back:
/// guard try HMACSHA256.isValid(tag, for: message, key: secret) else { … }
/// ```
public enum HMACSHA256 {
    /// The size of a tag in bytes.
    public static let byteCount = 32

    /// The HMAC-SHA-256 of `message` under `key`.
    ///
    /// - Parameters:
    ///   - message: The bytes to authenticate; any length, including empty.
    ///   - key: The secret key; any length (longer than 64 bytes is hashed first, as RFC 2104
    ///     says). Use 32 random bytes.
    /// - Returns: 32 bytes.
    /// - Throws: ``CryptoError/backend(_:)`` when the crypto library fails.
    public static func authenticationCode(for message: Data, key: Data) throws -> Data {
        try HMACBackend.sha256(message, key: key)
    }

    /// Whether `code` is the HMAC-SHA-256 of `message` under `key`, compared in constant time.
    ///
    /// - Parameters:
    ///   - code: The tag to check; anything but 32 bytes is not valid.
    ///   - message: The bytes it claims to authenticate.
    ///   - key: The secret key.
    /// - Throws: ``CryptoError/backend(_:)`` when the crypto library fails.
    public static func isValid(_ code: Data, for message: Data, key: Data) throws -> Bool {
        ConstantTime.equals(code, try authenticationCode(for: message, key: key))
    }
}
