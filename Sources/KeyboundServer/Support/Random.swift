import Foundation
import KeyboundCrypto
import KeyboundWire

/// Opaque random identifiers and tokens.
enum SecureRandomBytes {
    /// base64url of `count` random bytes.
    static func make(_ count: Int) -> String { Base64URL.encode(SecureRandom.bytes(count)) }

    /// A random id with a readable prefix (`usr_`, `dev_`, …): 128 random bits.
    static func identifier(_ prefix: String) -> String { prefix + "_" + make(16) }

    /// An id with a readable prefix that sorts by its creation time (`milliseconds` since 1970,
    /// up to the year 2109) and then at random: 7 characters of time, then 88 random bits (15
    /// characters), 22 base64url characters like every id. For rows written on every login
    /// (sessions, audit events): a new key goes to the end of its index instead of onto a random
    /// page, so a group commit writes a few pages for its sessions, not one page each. Not for
    /// secrets: the time is readable.
    static func timeOrderedIdentifier(_ prefix: String, milliseconds: Int64) -> String {
        var time = UInt64(clamping: min(max(0, milliseconds), 1 << 42 - 1))
        var digits = [UInt8](repeating: 0, count: 7)
        for index in digits.indices.reversed() {
            digits[index] = orderedDigits[Int(time & 63)]
            time >>= 6
        }
        return prefix + "_" + String(decoding: digits, as: UTF8.self) + make(11)
    }

    /// The 64 base64url characters in byte order, so that digits in this order sort as their
    /// values do (SQLite compares text bytewise).
    private static let orderedDigits = Array(
        "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz".utf8)

    /// A bearer or refresh token: 256 random bits.
    static func token() -> String { make(32) }

    /// `count` random bytes.
    static func bytes(_ count: Int) -> Data { SecureRandom.bytes(count) }
}

/// Token hashing: tokens are stored only as SHA-256 hashes (hex).
package enum TokenHash {
    /// Lower-case hex of SHA-256 of the token's UTF-8: the key a token is stored and found under.
    package static func of(_ token: String) -> String {
        // `withUTF8` copies the bytes at once; `Data(token.utf8)` stepped through them.
        var token = token
        return Hex.encode(Digest.sha256(token.withUTF8 { Data($0) }))
    }
}

extension Int64 {
    /// The eight bytes of the value, most significant first (the challenges' layouts).
    var bigEndianBytes: [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: self >> ($0 * 8)) } }
}
