import Foundation
import KeyboundCrypto
import KeyboundWire

/// Opaque random identifiers and tokens.
enum SecureRandomBytes {
    /// base64url of `count` random bytes.
    static func make(_ count: Int) -> String { Base64URL.encode(SecureRandom.bytes(count)) }

    /// A random id with a readable prefix (`usr_`, `dev_`, …): 128 random bits.
    static func identifier(_ prefix: String) -> String { prefix + "_" + make(16) }

    /// A bearer or refresh token: 256 random bits.
    static func token() -> String { make(32) }

    /// `count` random bytes.
    static func bytes(_ count: Int) -> Data { SecureRandom.bytes(count) }
}

/// Token hashing: tokens are stored only as SHA-256 hashes (hex).
package enum TokenHash {
    /// Lower-case hex of SHA-256 of the token's UTF-8: the key a token is stored and found under.
    package static func of(_ token: String) -> String {
        Hex.encode(Digest.sha256(Data(token.utf8)))
    }
}
