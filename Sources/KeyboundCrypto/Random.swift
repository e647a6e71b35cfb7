import Foundation

/// Cryptographically secure random bytes from the operating system's generator.
public enum SecureRandom {
    /// Returns `count` random bytes for keys, nonces, challenges and tokens.
    ///
    /// Linux uses OpenSSL's `RAND_bytes` (seeded from the kernel); Apple platforms use
    /// `SecRandomCopyBytes`.
    ///
    /// - Parameter count: How many bytes; zero or a negative count returns empty data.
    /// - Returns: `count` bytes.
    /// - Important: Traps if the system generator itself fails, because no caller can recover
    ///   from a missing source of randomness and must not continue with predictable bytes.
    public static func bytes(_ count: Int) -> Data {
        guard count > 0 else { return Data() }
        var bytes = Data(count: count)
        bytes.withUnsafeMutableBytes { buffer in
            RandomBackend.fill(buffer)
        }
        return bytes
    }
}
