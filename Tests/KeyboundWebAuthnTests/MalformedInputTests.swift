import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire
import Testing

/// Attacker bytes: every binary vector, truncated and randomly mutated, goes through every parser
/// and verifier. Nothing may trap, and every refusal must be a `WebAuthnError`. The counts are
/// fixed and the generator seeded, so a failure replays.
@Suite("Malformed input")
struct MalformedInputTests {
    /// Mutations tried per vector.
    static let mutationsPerVector = 160
    /// Truncations tried per vector: the shortest prefixes, then lengths spread over the rest.
    static let truncationsPerVector = 96

    /// Every binary the vectors hold: attestation objects, authenticator data, COSE keys, App
    /// Attest assertions.
    static func corpus() throws -> [(name: String, bytes: Data)] {
        var corpus: [(String, Data)] = []
        for vector in try Vectors.json("w3c_l3/webauthn_l3_test_vectors.json").array("vectors") {
            let anchor = try vector.string("anchor")
            corpus.append(
                (
                    anchor,
                    try vector.member("registration").member("response").member("response").base64URL(
                        "attestationObject")
                ))
            corpus.append(
                (
                    anchor + " authData",
                    try vector.member("authentication").member("response").member("response").base64URL(
                        "authenticatorData")
                ))
        }
        let py = try Vectors.json("py_webauthn/py_webauthn_vectors.json")
        for vector in try py.array("registrations") {
            corpus.append(
                (
                    try vector.string("test"),
                    try vector.member("response").member("response").base64URL("attestationObject")
                ))
        }
        for vector in try py.array("authentications") {
            corpus.append(
                (try vector.string("test") + " key", try vector.base64URL("credential_public_key_b64url")))
            corpus.append(
                (
                    try vector.string("test") + " authData",
                    try vector.member("response").member("response").base64URL("authenticatorData")
                ))
        }
        for vector in try Vectors.json("fido_mds/fido_mds_vectors.json").array("registrations") {
            corpus.append(
                (
                    try vector.string("name"),
                    try vector.member("response").member("response").base64URL("attestationObject")
                ))
        }
        for vector in try Vectors.json("app_attest/app_attest_vectors.json").array("vectors") {
            corpus.append((try vector.string("id"), try vector.base64("attestation_b64")))
            for assertion in try vector.array("assertions") {
                corpus.append((try vector.string("id") + " assertion", try assertion.base64("assertion_b64")))
            }
        }
        return corpus
    }

    /// Runs `bytes` through every entry point; returns how many accepted it.
    static func exercise(_ bytes: Data, _ name: String) -> Int {
        let time = Date(timeIntervalSince1970: 1_750_000_000)
        let key = CredentialPublicKey(fixedKey)
        var accepted = 0
        let attempts: [() throws -> Void] = [
            { _ = try CBOR(decoding: bytes) },
            { _ = try AuthenticatorData(bytes) },
            { _ = try AuthenticatorData(bytes, allowingUnflaggedExtensions: true) },
            { _ = try CredentialPublicKey(coseKey: bytes) },
            {
                _ = try AttestationObject(bytes).verify(
                    clientDataHash: Data(count: 32), trustAnchors: anchors, at: time)
            },
            {
                _ = try appAttest.verifyAttestation(
                    bytes, keyId: Data(count: 32), clientDataHash: Data(), at: time)
            },
            {
                _ = try appAttest.verifyAssertion(
                    bytes, clientData: Data(), publicKey: fixedKey, appId: "a", previousCounter: 0)
            },
            { _ = key.isValidSignature(bytes, for: bytes) },
        ]
        for attempt in attempts {
            do {
                try attempt()
                accepted += 1
            } catch is WebAuthnError {
                // A typed refusal: what attacker bytes must get.
            } catch {
                Issue.record("\(name): a foreign error escaped: \(error)")
            }
        }
        return accepted
    }

    /// Roots for every x5c format, so mutated statements reach the chain verification too.
    static let anchors: AttestationTrustAnchors = {
        let roots =
            [Certificate.appleWebAuthnRootCA]
            + [try? Vectors.certificate("w3c_l3/attestation_ca_cert.pem")].compactMap { $0 }
        return AttestationTrustAnchors([.apple: roots, .packed: roots, .fidoU2F: roots])
    }()

    static let appAttest = AppAttest(
        appIds: ["0352187391.com.apple.example_app_attest"], environment: .production)

    /// A fixed P-256 public key (the generator point) to verify assertions with.
    static let fixedKey: P256PublicKey = {
        let point = Data(
            hex:
                "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5"
        )
        do {
            return try P256PublicKey(x963Representation: point ?? Data())
        } catch {
            preconditionFailure("the P-256 generator is a valid point")
        }
    }()

    @Test("every truncation of every vector is refused with a typed error")
    func truncations() throws {
        var tried = 0
        for (name, bytes) in try Self.corpus() {
            let half = Self.truncationsPerVector / 2
            let shortest = Array(0..<min(bytes.count, half))
            let spread = Array(stride(from: 0, to: bytes.count, by: max(1, bytes.count / half)))
            let lengths: Set<Int> = Set(shortest + spread)
            let wholeIsCBOR = (try? CBOR(decoding: bytes)) != nil
            let wholeIsAuthenticatorData =
                (try? AuthenticatorData(bytes, allowingUnflaggedExtensions: true)) != nil
            for length in lengths.sorted().prefix(Self.truncationsPerVector) {
                let prefix = bytes.prefix(length)
                // A strict prefix of one CBOR item is never a whole item, nor a strict prefix of
                // authenticator data whole authenticator data.
                if wholeIsCBOR {
                    expectRefusal(.malformedCBOR, "\(name) cut at \(length)") { try CBOR(decoding: prefix) }
                }
                if wholeIsAuthenticatorData {
                    #expect(
                        (try? AuthenticatorData(prefix, allowingUnflaggedExtensions: true)) == nil,
                        "\(name) cut at \(length)")
                }
                _ = Self.exercise(prefix, "\(name) cut at \(length)")
                tried += 1
            }
        }
        #expect(tried > 3_000)
    }

    @Test("random mutations of every vector never trap and always fail typed")
    func mutations() throws {
        var generator = SeededGenerator(seed: 0x5EED_CB0B)
        var tried = 0
        for (name, original) in try Self.corpus() {
            for round in 0..<Self.mutationsPerVector {
                var bytes = [UInt8](original)
                switch round % 4 {
                case 0:  // Flip bits.
                    for _ in 0..<Int.random(in: 1...4, using: &generator) {
                        bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^=
                            1 << UInt8.random(in: 0...7, using: &generator)
                    }
                case 1:  // Write a CBOR-significant byte: big lengths, indefinite markers, tags.
                    let interesting: [UInt8] = [
                        0x00, 0x18, 0x1B, 0x5B, 0x5F, 0x7B, 0x9B, 0x9F, 0xBB, 0xBF, 0xC0, 0xF7, 0xFF,
                    ]
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] =
                        interesting.randomElement(using: &generator) ?? 0
                case 2:  // Insert a byte.
                    bytes.insert(
                        UInt8.random(in: 0...255, using: &generator),
                        at: Int.random(in: 0...bytes.count, using: &generator))
                default:  // Delete a byte.
                    bytes.remove(at: Int.random(in: 0..<bytes.count, using: &generator))
                }
                _ = Self.exercise(Data(bytes), "\(name) mutation \(round)")
                tried += 1
            }
        }
        #expect(tried == (try Self.corpus().count) * Self.mutationsPerVector)
    }

    @Test("the unmutated vectors pass through the same harness")
    func originals() throws {
        var accepted = 0
        for (name, bytes) in try Self.corpus() {
            accepted += Self.exercise(bytes, name)
        }
        // At least CBOR decoding accepts every original.
        #expect(accepted >= (try Self.corpus().count))
    }
}
