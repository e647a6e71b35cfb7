import Foundation

// The little DER Keybound reads itself: ECDSA signatures (a Secure Enclave or OpenSSL signs DER,
// JWS ES256 carries `r || s`) and a few certificate extensions. One implementation for the SDK,
// which links no crypto library, and for KeyboundCrypto and KeyboundWebAuthn.

/// Reads DER tag–length–value items with single-byte tags and definite, minimal lengths,
/// refusing anything that is only BER.
package struct DERReader {
    private let bytes: [UInt8]
    private var offset = 0

    /// A reader at the start of `data`.
    package init(_ data: Data) {
        self.bytes = [UInt8](data)
    }

    /// Whether every item was read.
    package var isAtEnd: Bool { offset == bytes.count }

    /// The contents of the next item if its tag is `tag` and its length is definite and minimal;
    /// nil for another tag or a bad encoding (nothing is consumed then).
    package mutating func read(tag: UInt8) -> Data? {
        guard bytes.count - offset >= 2, bytes[offset] == tag else { return nil }
        var cursor = offset + 1
        let first = bytes[cursor]
        cursor += 1
        var length = Int(first)
        if first >= 0x80 {
            // Long form: 1 to 3 length bytes (more is never needed here), no leading zero, and
            // only for lengths the short form cannot hold. 0x80 alone (indefinite) is BER.
            let count = Int(first & 0x7F)
            guard (1...3).contains(count), bytes.count - cursor >= count, bytes[cursor] != 0 else {
                return nil
            }
            length = bytes[cursor..<cursor + count].reduce(0) { $0 << 8 | Int($1) }
            cursor += count
            guard length >= 0x80 else { return nil }
        }
        guard length <= bytes.count - cursor else { return nil }
        offset = cursor + length
        return Data(bytes[cursor..<offset])
    }

    /// The magnitude of the next INTEGER if it is minimally encoded and not negative (zero is an
    /// empty magnitude); nil otherwise.
    package mutating func readPositiveInteger() -> Data? {
        guard let content = read(tag: 0x02), let first = content.first else { return nil }
        guard first & 0x80 == 0 else { return nil }  // Negative.
        if first == 0 {
            guard content.count == 1 || content[content.startIndex + 1] & 0x80 != 0 else {
                return nil  // Zero-padded.
            }
            return Data(content.dropFirst())
        }
        return content
    }
}

/// The DER `ECDSA-Sig-Value` of a P-256 signature, `SEQUENCE { r INTEGER, s INTEGER }`
/// (RFC 3279), and its raw form `r || s` (IEEE P1363: JWS ES256, COSE, CryptoKit's
/// `rawRepresentation`), strict in both directions.
package enum ECDSASignatureDER {
    /// The width of `r` and of `s` in the raw form.
    private static let scalarByteCount = 32

    /// `r || s` (64 bytes) from strict DER, or nil for BER (long-form or indefinite lengths where
    /// DER needs short ones), other tags, trailing bytes, negative or zero-padded integers, or
    /// integers wider than 32 bytes.
    package static func rawRepresentation(fromDER der: Data) -> Data? {
        var reader = DERReader(der)
        guard let sequence = reader.read(tag: 0x30), reader.isAtEnd else { return nil }
        var fields = DERReader(sequence)
        guard let r = fields.readPositiveInteger(), let s = fields.readPositiveInteger(), fields.isAtEnd,
            let rawR = padded(r), let rawS = padded(s)
        else { return nil }
        return rawR + rawS
    }

    /// Strict DER from `r || s` (64 bytes).
    package static func der(fromRawRepresentation raw: Data) -> Data {
        let bytes = [UInt8](raw)
        let half = bytes.count / 2
        let r = integer(bytes[..<half])
        let s = integer(bytes[half...])
        // At most 2 * 35 content bytes, so the sequence length always fits DER's short form.
        return Data([0x30, UInt8(r.count + s.count)] + r + s)
    }

    /// A DER INTEGER holding the unsigned big-endian `magnitude`.
    private static func integer(_ magnitude: ArraySlice<UInt8>) -> [UInt8] {
        var content = Array(magnitude.drop { $0 == 0 })
        if content.isEmpty || content[0] & 0x80 != 0 {
            content.insert(0, at: 0)
        }
        return [0x02, UInt8(content.count)] + content
    }

    /// The unsigned integer left-padded to 32 bytes, or nil if it is wider.
    private static func padded(_ magnitude: Data) -> Data? {
        guard magnitude.count <= scalarByteCount else { return nil }
        return Data(repeating: 0, count: scalarByteCount - magnitude.count) + magnitude
    }
}
