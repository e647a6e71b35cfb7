import Foundation
import KeyboundWire

/// A P-256 (secp256r1, prime256v1) private key for ECDSA with SHA-256.
///
/// This is the software twin of a Secure Enclave key: the emulator persists it through
/// ``rawRepresentation``. Its description, debug description and mirror never show the key.
///
/// ```swift
/// let key = try P256SigningKey()
/// let signature = try key.signature(for: payload)
/// let spki = key.publicKey.spkiDER  // what the device registers with the server
/// ```
public struct P256SigningKey: Sendable {
    let backing: P256PrivateKeyBacking

    /// The matching public key, computed once when the key is created.
    public let publicKey: P256PublicKey

    /// Creates a fresh random key from the system's secure random generator.
    ///
    /// - Throws: ``CryptoError/backend(_:)`` when the crypto library fails.
    public init() throws {
        try self.init(backing: P256PrivateKeyBacking())
    }

    /// Restores a key from its 32-byte big-endian private scalar.
    ///
    /// - Parameter rawRepresentation: Exactly 32 bytes holding `d` with `1 <= d < n`, the order
    ///   of the curve, as ``rawRepresentation`` returns it.
    /// - Throws: ``CryptoError/invalidKey`` for any other length or value.
    public init(rawRepresentation: Data) throws {
        guard P256Curve.isValidScalar(rawRepresentation) else {
            throw CryptoError.invalidKey.with(detail: "a P-256 private key is 32 bytes holding 1 <= d < n")
        }
        try self.init(backing: P256PrivateKeyBacking(validatedScalar: rawRepresentation))
    }

    private init(backing: P256PrivateKeyBacking) throws {
        self.backing = backing
        self.publicKey = try P256PublicKey(x963Representation: backing.publicX963Representation)
    }

    /// The 32-byte big-endian private scalar.
    ///
    /// - Important: This is the secret itself. Store it only where the platform protects it
    ///   (the emulator's secure element); never log or send it.
    public var rawRepresentation: Data {
        backing.rawRepresentation
    }

    /// Signs `message` with ECDSA over SHA-256(`message`), with a fresh random nonce.
    ///
    /// - Parameter message: The exact bytes to sign (the payload, not its hash).
    /// - Returns: The signature; send ``P256Signature/derRepresentation`` or
    ///   ``P256Signature/rawRepresentation`` as the protocol says.
    /// - Throws: ``CryptoError/backend(_:)`` when the crypto library fails.
    public func signature(for message: Data) throws -> P256Signature {
        try P256Signature(rawRepresentation: backing.signatureRawRepresentation(for: message))
    }
}

extension P256SigningKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `P256SigningKey(<redacted>)`: the private key is never printed.
    public var description: String { "P256SigningKey(<redacted>)" }
    /// `P256SigningKey(<redacted>)`: the private key is never printed.
    public var debugDescription: String { description }
    /// A mirror without children, so `dump`, playgrounds and test failure messages show nothing.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// A P-256 public key for verifying ECDSA-SHA-256 signatures.
///
/// Creating one validates the point once; the parsed key is kept, so verifying many signatures
/// with the same value costs only the verification. Equal keys have equal
/// ``x963Representation``s. Safe to use from many threads at once.
public struct P256PublicKey: Sendable, Hashable {
    /// `04 || X || Y`, the one encoding this type stores.
    public let x963Representation: Data
    let backing: P256PublicKeyBacking

    /// Parses a DER `SubjectPublicKeyInfo` (RFC 5480), as `SecKeyCopyExternalRepresentation` plus
    /// the standard header, CryptoKit's `derRepresentation` or OpenSSL's `i2d_PUBKEY` produce it.
    ///
    /// - Parameter spkiDER: The 91-byte DER of algorithm `id-ecPublicKey`, named curve
    ///   `prime256v1`, and an uncompressed point on the curve.
    /// - Throws: ``CryptoError/invalidKey`` for anything else: another algorithm or curve, explicit
    ///   curve parameters, a compressed point, non-DER encoding, trailing bytes, a point not on the
    ///   curve.
    public init(spkiDER: Data) throws {
        // DER is unique: every valid SPKI of an uncompressed P-256 point is this header followed by
        // the 65-byte point, so a byte comparison is a complete and strict parser.
        guard spkiDER.count == P256Curve.spkiHeader.count + P256Curve.x963ByteCount,
            spkiDER.starts(with: P256Curve.spkiHeader)
        else {
            throw CryptoError.invalidKey.with(
                detail: "not a DER SubjectPublicKeyInfo of an uncompressed P-256 (prime256v1) point")
        }
        try self.init(x963Representation: spkiDER.dropFirst(P256Curve.spkiHeader.count))
    }

    /// Parses an uncompressed ANSI X9.63 point, `04 || X || Y`.
    ///
    /// - Parameter x963Representation: 65 bytes: `0x04`, then X and Y as 32-byte big-endian
    ///   coordinates.
    /// - Throws: ``CryptoError/invalidKey`` for another length or prefix, coordinates not below
    ///   the field prime, or a point not on the curve.
    public init(x963Representation: Data) throws {
        guard x963Representation.count == P256Curve.x963ByteCount, x963Representation.first == 0x04 else {
            throw CryptoError.invalidKey.with(detail: "an uncompressed P-256 point is 65 bytes starting 04")
        }
        let point = Data(x963Representation)  // Rebased to index 0, and not a slice of a larger buffer.
        self.backing = try P256PublicKeyBacking(x963Representation: point)
        self.x963Representation = point
    }

    /// The DER `SubjectPublicKeyInfo` (RFC 5480) of this key: 91 bytes.
    public var spkiDER: Data {
        P256Curve.spkiHeader + x963Representation
    }

    /// Whether `signature` is a valid ECDSA-SHA-256 signature of `message` by this key.
    ///
    /// - Parameters:
    ///   - signature: The signature to check.
    ///   - message: The exact bytes that were signed (not their hash).
    /// - Returns: `true` only for a valid signature; `false` for anything else, including
    ///   `r` or `s` outside `1..<n` and failures inside the crypto library.
    public func isValidSignature(_ signature: P256Signature, for message: Data) -> Bool {
        backing.isValidSignature(signature, for: message)
    }

    /// Keys are equal when their points are equal.
    public static func == (lhs: P256PublicKey, rhs: P256PublicKey) -> Bool {
        lhs.x963Representation == rhs.x963Representation
    }

    /// Hashes the point.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(x963Representation)
    }
}

/// An ECDSA P-256 signature: the pair of integers `(r, s)`.
///
/// Parsing is strict, so every signature has exactly one DER and one raw encoding; equal
/// signatures have equal encodings. Ranges are checked by verification: a signature with `r` or
/// `s` outside `1..<n` parses (when it fits in 32 bytes) and never verifies.
public struct P256Signature: Sendable, Hashable {
    /// `r || s`, each a 32-byte big-endian integer (IEEE P1363, as WebAuthn's COSE and CryptoKit's
    /// `rawRepresentation` use).
    public let rawRepresentation: Data

    /// Parses a DER `ECDSA-Sig-Value`: `SEQUENCE { r INTEGER, s INTEGER }` (RFC 3279).
    ///
    /// - Parameter derRepresentation: Strict DER, as `SecKeyCreateSignature` and OpenSSL produce.
    /// - Throws: ``CryptoError/invalidSignatureEncoding`` for BER (long-form or indefinite lengths
    ///   where DER needs short ones), other tags, trailing bytes, negative or zero-padded integers,
    ///   or integers wider than 32 bytes.
    public init(derRepresentation: Data) throws {
        guard let raw = ECDSASignatureDER.rawRepresentation(fromDER: derRepresentation) else {
            throw CryptoError.invalidSignatureEncoding.with(detail: "not a strict DER ECDSA-Sig-Value")
        }
        self.rawRepresentation = raw
    }

    /// Parses `r || s`.
    ///
    /// - Parameter rawRepresentation: Exactly 64 bytes.
    /// - Throws: ``CryptoError/invalidSignatureEncoding`` for any other length.
    public init(rawRepresentation: Data) throws {
        guard rawRepresentation.count == 2 * P256Curve.scalarByteCount else {
            throw CryptoError.invalidSignatureEncoding.with(
                detail: "a raw P-256 signature is 64 bytes, not \(rawRepresentation.count)")
        }
        self.rawRepresentation = Data(rawRepresentation)
    }

    /// The DER `ECDSA-Sig-Value` encoding: 8 to 72 bytes.
    public var derRepresentation: Data {
        ECDSASignatureDER.der(fromRawRepresentation: rawRepresentation)
    }
}

/// Constants of the P-256 curve and its encodings.
enum P256Curve {
    static let scalarByteCount = 32
    static let x963ByteCount = 65

    /// The order n of the base point, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// `SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) ... }` up to
    /// the 65-byte uncompressed point.
    static let spkiHeader = Data([
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A,
        0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ])

    /// Whether `scalar` is 32 bytes holding `1 <= d < n`, decided without branching on its bytes,
    /// since it is a private key.
    static func isValidScalar(_ scalar: Data) -> Bool {
        guard scalar.count == scalarByteCount else { return false }
        var nonZero: UInt8 = 0
        var borrow: UInt16 = 0  // scalar - n, from the last byte; a final borrow means scalar < n.
        for (byte, modulus) in zip(scalar.reversed(), order.reversed()) {
            nonZero |= byte
            let difference = UInt16(byte) &- UInt16(modulus) &- borrow
            borrow = (difference >> 8) & 1
        }
        return (nonZero != 0) && (borrow == 1)
    }
}
