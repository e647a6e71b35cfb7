import Foundation
import KeyboundWire

/// Message digests.
///
/// Named `Digest` by the package's API; an app that also imports CryptoKit (which has a `Digest`
/// protocol) writes `KeyboundCrypto.Digest`.
public enum Digest {
    /// The SHA-256 digest of `data` (FIPS 180-4).
    ///
    /// - Parameter data: The bytes to hash; any length, including empty.
    /// - Returns: 32 bytes.
    /// - Important: Traps only when the platform's crypto library cannot provide SHA-256 at all
    ///   (a broken installation); no input can make it fail.
    public static func sha256(_ data: Data) -> Data {
        DigestBackend.sha256(data)
    }

    /// The size of a SHA-256 digest in bytes.
    static let sha256ByteCount = 32
}

extension DPoP {
    /// `ath` of `accessToken` (RFC 9449 §4.2): base64url of SHA-256 of its ASCII.
    package static func accessTokenHash(_ accessToken: String) -> String {
        accessTokenHash(sha256: Digest.sha256(Data(accessToken.utf8)))
    }
}
