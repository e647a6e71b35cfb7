import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import Testing

@Suite("COSE credential keys")
struct CredentialPublicKeyTests {
    static let x = Data(repeating: 0x11, count: 32)

    static func cose(_ entries: [(Int64, CBOR)]) -> Data {
        CBOR.map(entries.map { (CBOR.integer($0.0), $0.1) }).encoded()
    }

    @Test("a P-256 key's COSE form parses back to the same key and verifies its signatures")
    func es256RoundTrip() throws {
        let signer = try P256SigningKey()
        let key = CredentialPublicKey(signer.publicKey)
        let parsed = try CredentialPublicKey(coseKey: key.coseKey)
        #expect(parsed == key && parsed.algorithm == .es256)
        let message = Data("authenticator data and client data hash".utf8)
        let signature = try signer.signature(for: message).derRepresentation
        #expect(parsed.isValidSignature(signature, for: message))
        #expect(!parsed.isValidSignature(signature, for: message + Data([0])))
        #expect(!parsed.isValidSignature(Data([0x30, 0x00]), for: message))
    }

    @Test("algorithms and curves outside ES256, Ed25519 and RS256 are unsupported")
    func unsupported() {
        let cases: [(String, Data)] = [
            (
                "ES384",
                Self.cose([
                    (1, .integer(2)), (3, .integer(-35)), (-1, .integer(2)), (-2, .bytes(Data(count: 48))),
                    (-3, .bytes(Data(count: 48))),
                ])
            ),
            (
                "ES512",
                Self.cose([
                    (1, .integer(2)), (3, .integer(-36)), (-1, .integer(3)), (-2, .bytes(Data(count: 66))),
                    (-3, .bytes(Data(count: 66))),
                ])
            ),
            (
                "Ed448 (alg -53)",
                Self.cose([
                    (1, .integer(1)), (3, .integer(-53)), (-1, .integer(7)), (-2, .bytes(Data(count: 57))),
                ])
            ),
            (
                "Ed448 under EdDSA",
                Self.cose([
                    (1, .integer(1)), (3, .integer(-8)), (-1, .integer(7)), (-2, .bytes(Data(count: 57))),
                ])
            ),
            (
                "PS256",
                Self.cose([
                    (1, .integer(3)), (3, .integer(-37)), (-1, .bytes(Data(count: 256))),
                    (-2, .bytes(Data([1, 0, 1]))),
                ])
            ),
            (
                "ES256 on P-384",
                Self.cose([
                    (1, .integer(2)), (3, .integer(-7)), (-1, .integer(2)), (-2, .bytes(Self.x)),
                    (-3, .bytes(Self.x)),
                ])
            ),
        ]
        for (name, cose) in cases {
            expectRefusal(.unsupportedAlgorithm, name) { try CredentialPublicKey(coseKey: cose) }
        }
    }

    @Test("malformed keys of supported algorithms are invalid")
    func invalid() throws {
        let point = try P256SigningKey().publicKey.x963Representation
        let x = CBOR.bytes(point.subdata(in: 1..<33))
        let y = CBOR.bytes(point.subdata(in: 33..<65))
        var modulus = Data(repeating: 0xFF, count: 128)
        modulus[127] = 0xFB
        let cases: [(String, Data)] = [
            ("not a map", CBOR.array([]).encoded()),
            ("no alg", Self.cose([(1, .integer(2)), (-1, .integer(1)), (-2, x), (-3, y)])),
            (
                "wrong kty",
                Self.cose([(1, .integer(3)), (3, .integer(-7)), (-1, .integer(1)), (-2, x), (-3, y)])
            ),
            (
                "an optional parameter (kid)",
                Self.cose([
                    (1, .integer(2)), (2, .bytes(Data([1]))), (3, .integer(-7)), (-1, .integer(1)), (-2, x),
                    (-3, y),
                ])
            ),
            (
                "a compressed point",
                Self.cose([
                    (1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, x), (-3, .bool(true)),
                ])
            ),
            (
                "a short coordinate",
                Self.cose([
                    (1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, .bytes(Data(count: 31))),
                    (-3, y),
                ])
            ),
            (
                "a point off the curve",
                Self.cose([
                    (1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, x), (-3, .bytes(Self.x)),
                ])
            ),
            (
                "a 31-byte Ed25519 key",
                Self.cose([
                    (1, .integer(1)), (3, .integer(-8)), (-1, .integer(6)), (-2, .bytes(Data(count: 31))),
                ])
            ),
            (
                "a 1024-bit RSA key",
                Self.cose([
                    (1, .integer(3)), (3, .integer(-257)), (-1, .bytes(modulus)),
                    (-2, .bytes(Data([1, 0, 1]))),
                ])
            ),
            (
                "an even RSA exponent",
                Self.cose([
                    (1, .integer(3)), (3, .integer(-257)), (-1, .bytes(modulus)), (-2, .bytes(Data([2]))),
                ])
            ),
            (
                "RSA exponent 1",
                Self.cose([
                    (1, .integer(3)), (3, .integer(-257)), (-1, .bytes(modulus)), (-2, .bytes(Data([1]))),
                ])
            ),
        ]
        for (name, cose) in cases {
            expectRefusal(.invalidPublicKey, name) { try CredentialPublicKey(coseKey: cose) }
        }
    }
}
