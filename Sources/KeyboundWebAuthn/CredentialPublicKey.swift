import Foundation
import KeyboundCrypto

/// The COSE signature algorithms Keybound verifies (IANA "COSE Algorithms").
public enum COSEAlgorithm: Int64, Sendable, Hashable, CaseIterable {
    /// ECDSA over P-256 with SHA-256; signatures are DER `ECDSA-Sig-Value`s.
    case es256 = -7
    /// EdDSA; Keybound accepts only the Ed25519 curve.
    case edDSA = -8
    /// RSASSA-PKCS1-v1_5 with SHA-256, moduli of 2048 to 8192 bits.
    case rs256 = -257
}

/// A credential public key: what a relying party stores at registration and verifies every
/// assertion with.
///
/// Parsed from the COSE_Key (RFC 9052 §7) in authenticator data. WebAuthn requires `alg` and
/// forbids optional parameters, and this parser holds keys to exactly that: ES256 is `kty` 2 (EC2),
/// `crv` 1 (P-256) with 32-byte `x` and `y` on the curve; EdDSA is `kty` 1 (OKP), `crv` 6 (Ed25519)
/// with a 32-byte `x`; RS256 is `kty` 3 (RSA) with `n` of 2048 to 8192 bits and `e`.
///
/// ```swift
/// let key = try CredentialPublicKey(coseKey: record.publicKey)
/// let ok = key.isValidSignature(signature, for: authenticatorData + Digest.sha256(clientDataJSON))
/// ```
public struct CredentialPublicKey: Sendable, Hashable {
    /// The algorithm the key is for.
    public let algorithm: COSEAlgorithm
    /// The COSE_Key in CTAP2 canonical CBOR: the bytes to store and to parse again later.
    public let coseKey: Data
    let verifier: SignatureVerifier

    /// Parses a COSE_Key, as stored from ``coseKey``.
    ///
    /// - Throws: ``WebAuthnError/malformedCBOR`` if the bytes are not one CBOR item (keys in any order),
    ///   ``WebAuthnError/unsupportedAlgorithm`` for another algorithm or curve (ES384, Ed448…),
    ///   ``WebAuthnError/invalidPublicKey`` for missing, extra or wrong parameters.
    public init(coseKey: Data) throws {
        try self.init(cose: CBOR(decoding: coseKey))
    }

    /// Parses a decoded COSE_Key; see ``init(coseKey:)``.
    init(cose: CBOR) throws {
        guard let map = cose.mapValue else {
            throw WebAuthnError.invalidPublicKey.with("a COSE_Key is a map")
        }
        guard let kty = map[integer: Label.kty]?.integerValue, let alg = map[integer: Label.alg]?.integerValue
        else { throw WebAuthnError.invalidPublicKey.with("a COSE_Key needs integer kty (1) and alg (3)") }
        guard let algorithm = COSEAlgorithm(rawValue: alg) else {
            throw WebAuthnError.unsupportedAlgorithm.with("COSE algorithm \(alg)")
        }
        func parameter(_ label: Int64) -> Data? { map[integer: label]?.bytesValue }
        func expect(kty expected: Int64, labels: Set<Int64>) throws {
            guard kty == expected else {
                throw WebAuthnError.invalidPublicKey.with(
                    "algorithm \(alg) needs kty \(expected), not \(kty)")
            }
            // WebAuthn: the key "MUST NOT contain any other OPTIONAL parameters".
            for entry in map.entries {
                guard let label = entry.key.integerValue, labels.contains(label) else {
                    throw WebAuthnError.invalidPublicKey.with("COSE_Key parameter \(entry.key) not allowed")
                }
            }
        }
        switch algorithm {
        case .es256:
            try expect(kty: KeyType.ec2, labels: [Label.kty, Label.alg, Label.crv, Label.x, Label.y])
            guard map[integer: Label.crv]?.integerValue == Curve.p256 else {
                throw WebAuthnError.unsupportedAlgorithm.with("ES256 needs crv 1 (P-256)")
            }
            guard let x = parameter(Label.x), let y = parameter(Label.y), x.count == 32, y.count == 32 else {
                throw WebAuthnError.invalidPublicKey.with(
                    "ES256 needs 32-byte x and y (no point compression)")
            }
            verifier = .es256(try Self.p256(x963: Data([0x04]) + x + y))
        case .edDSA:
            try expect(kty: KeyType.okp, labels: [Label.kty, Label.alg, Label.crv, Label.x])
            guard map[integer: Label.crv]?.integerValue == Curve.ed25519 else {
                throw WebAuthnError.unsupportedAlgorithm.with("EdDSA is supported on crv 6 (Ed25519) only")
            }
            guard let x = parameter(Label.x) else {
                throw WebAuthnError.invalidPublicKey.with("EdDSA needs x")
            }
            verifier = .openSSL(try OpenSSLPublicKey.ed25519(raw: x))
        case .rs256:
            try expect(kty: KeyType.rsa, labels: [Label.kty, Label.alg, Label.rsaN, Label.rsaE])
            guard let n = parameter(Label.rsaN), let e = parameter(Label.rsaE) else {
                throw WebAuthnError.invalidPublicKey.with("RS256 needs n and e")
            }
            verifier = .openSSL(try OpenSSLPublicKey.rsa(modulus: n, exponent: e))
        }
        self.algorithm = algorithm
        self.coseKey = cose.encoded()
    }

    /// The ES256 credential key of a P-256 key (what a platform authenticator registers).
    public init(_ key: P256PublicKey) {
        let point = key.x963Representation
        let cose = CBOR.map([
            (.integer(Label.kty), .integer(KeyType.ec2)),
            (.integer(Label.alg), .integer(COSEAlgorithm.es256.rawValue)),
            (.integer(Label.crv), .integer(Curve.p256)),
            (.integer(Label.x), .bytes(point.subdata(in: 1..<33))),
            (.integer(Label.y), .bytes(point.subdata(in: 33..<65))),
        ])
        self.algorithm = .es256
        self.coseKey = cose.encoded()
        self.verifier = .es256(key)
    }

    /// Whether `signature` is this key's signature over `message` with its ``algorithm``.
    ///
    /// - Parameters:
    ///   - signature: DER for ES256, 64 bytes for Ed25519, the modulus' size for RS256.
    ///   - message: The exact bytes that were signed (for WebAuthn, authenticator data followed by
    ///     SHA-256 of the client data), not their hash.
    /// - Returns: `true` only for a valid signature; `false` for anything else.
    public func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        verifier.isValidSignature(signature, for: message)
    }

    /// Keys are equal when their COSE encodings are.
    public static func == (lhs: CredentialPublicKey, rhs: CredentialPublicKey) -> Bool {
        lhs.coseKey == rhs.coseKey
    }

    /// Hashes the COSE encoding.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(coseKey)
    }

    static func p256(x963: Data) throws -> P256PublicKey {
        do {
            return try P256PublicKey(x963Representation: x963)
        } catch {
            throw WebAuthnError.invalidPublicKey.with("not a point on P-256")
        }
    }

    /// COSE key parameter labels (RFC 9052, RFC 9053, RFC 8230).
    enum Label {
        static let kty: Int64 = 1
        static let alg: Int64 = 3
        static let crv: Int64 = -1
        static let x: Int64 = -2
        static let y: Int64 = -3
        static let rsaN: Int64 = -1
        static let rsaE: Int64 = -2
    }

    /// COSE key types.
    enum KeyType {
        static let okp: Int64 = 1
        static let ec2: Int64 = 2
        static let rsa: Int64 = 3
    }

    /// COSE elliptic curves.
    enum Curve {
        static let p256: Int64 = 1
        static let ed25519: Int64 = 6
    }
}

/// Checks signatures of one algorithm with one public key: the part of a key that verifies.
enum SignatureVerifier: Sendable {
    case es256(P256PublicKey)
    /// RS256 or EdDSA, whichever the OpenSSL key is.
    case openSSL(OpenSSLPublicKey)

    /// The verifier for the key in a DER `SubjectPublicKeyInfo` (an attestation certificate's)
    /// used with `algorithm`.
    ///
    /// - Throws: ``WebAuthnError/invalidAttestation`` when the key is not of the algorithm's type.
    init(spkiDER: Data, algorithm: COSEAlgorithm) throws {
        switch algorithm {
        case .es256:
            guard let key = try? P256PublicKey(spkiDER: spkiDER) else {
                throw WebAuthnError.invalidAttestation.with("ES256 needs a P-256 certificate key")
            }
            self = .es256(key)
        case .rs256, .edDSA:
            let key = try OpenSSLPublicKey.fromSPKI(spkiDER)
            guard algorithm == .rs256 ? key.isRSA : key.isEd25519 else {
                throw WebAuthnError.invalidAttestation.with("the certificate key is not for \(algorithm)")
            }
            self = .openSSL(key)
        }
    }

    func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        switch self {
        case .es256(let key):
            guard let signature = try? P256Signature(derRepresentation: signature) else { return false }
            return key.isValidSignature(signature, for: message)
        case .openSSL(let key):
            return key.isValidSignature(signature, for: message)
        }
    }
}
