import Foundation
import KeyboundCrypto
import KeyboundWire

extension Harness {
    /// Device public keys as the server receives them at binding: DER SubjectPublicKeyInfo (and
    /// the raw X9.63 point). A key that parses has exactly that encoding, and verifying with it
    /// never crashes.
    static let p256PublicKey = Harness(
        name: "p256-public-key",
        covers: "KeyboundCrypto P256PublicKey(spkiDER:) and (x963Representation:), then verification"
    ) { data in
        if let key = try? P256PublicKey(spkiDER: data) {
            expect(key.spkiDER == data, "an SPKI parsed from bytes that are not its DER")
            if let signature = P256Fixture.signature {
                _ = key.isValidSignature(signature, for: P256Fixture.message)
            }
        }
        if let key = try? P256PublicKey(x963Representation: data) {
            expect(key.x963Representation == data, "a point parsed from bytes that are not its X9.63 form")
        }
    }

    /// Device signatures as the server receives them: DER ECDSA-Sig-Value, strict, so every
    /// signature has one encoding; each is verified against a fixed key (Wycheproof's, whose
    /// signatures are the seeds).
    static let p256Signature = Harness(
        name: "p256-signature",
        covers: "KeyboundCrypto P256Signature(derRepresentation:) (strict DER), raw form, verification"
    ) { data in
        guard let signature = try? P256Signature(derRepresentation: data) else { return }
        expect(signature.derRepresentation == data, "a signature parsed from bytes that are not its DER")
        expect(
            (try? P256Signature(rawRepresentation: signature.rawRepresentation)) == signature,
            "the raw form of a signature does not parse back")
        _ = P256Fixture.key?.isValidSignature(signature, for: P256Fixture.message)
    }
}

/// A key, message and signature from Wycheproof's ecdsa_secp256r1_sha256_test.json (the group
/// with 290 tests on message "123400"), so the seeds reach verification.
enum P256Fixture {
    static let key = Base64URL.decode(
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKSexBRK64-3c_kZ4KBKLrSkDJpkZ9whgacjE32xzKDjHeHlk6qwA5ZIfsUmKYPRgZ2az2WhQAVWNGpdOc0FRPg"
    ).flatMap { try? P256PublicKey(spkiDER: $0) }
    static let message = Data("123400".utf8)
    /// A valid DER signature of `message` by `key`.
    static let signature = Base64URL.decode(
        "MEQCICujqL5rlNXsgKbZ0RkKQ27_5Q2Foe7oWbjMavm9XC4YAiBM1guFXUQvWzx7EetsTgrnUl_nEPq5qnx3pn955vrddg"
    ).flatMap { try? P256Signature(derRepresentation: $0) }
}
