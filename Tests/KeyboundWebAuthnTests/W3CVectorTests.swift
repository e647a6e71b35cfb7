import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire
import Testing

/// WebAuthn Level 3 §16 test vectors: every registration and authentication in scope verifies,
/// the out-of-scope ones are refused as unsupported.
@Suite("W3C WebAuthn L3 test vectors")
struct W3CVectorTests {
    /// Any time in the test CA's validity (2024 to 3024).
    static let time = Date(timeIntervalSince1970: 1_750_000_000)

    /// The in-scope vectors and what their attestation must be.
    static let inScope:
        [String: (format: AttestationFormat, type: AttestationType, algorithm: COSEAlgorithm)] = [
            "sctn-test-vectors-none-es256": (.none, .none, .es256),
            "sctn-test-vectors-packed-self-es256": (.packed, .selfAttestation, .es256),
            "sctn-test-vectors-none-es256-crossOrigin": (.none, .none, .es256),
            "sctn-test-vectors-none-es256-topOrigin": (.none, .none, .es256),
            "sctn-test-vectors-none-es256-long-credential-id": (.none, .none, .es256),
            "sctn-test-vectors-packed-es256": (.packed, .basic, .es256),
            "sctn-test-vectors-packed-rs256": (.packed, .basic, .rs256),
            "sctn-test-vectors-packed-eddsa": (.packed, .basic, .edDSA),
            "sctn-test-vectors-apple-es256": (.apple, .anonymizationCA, .es256),
            "sctn-test-vectors-fido-u2f-es256": (.fidoU2F, .basic, .es256),
        ]

    /// Out of scope, and the error each must be refused with.
    static let outOfScope: [String: WebAuthnError] = [
        "sctn-test-vectors-packed-es384": .unsupportedAlgorithm,
        "sctn-test-vectors-packed-es512": .unsupportedAlgorithm,
        "sctn-test-vectors-packed-ed448": .unsupportedAlgorithm,
        "sctn-test-vectors-tpm-es256": .unsupportedAttestationFormat,
        "sctn-test-vectors-android-key-es256": .unsupportedAttestationFormat,
    ]

    static func vectors() throws -> [JSONValue] {
        try Vectors.json("w3c_l3/webauthn_l3_test_vectors.json").array("vectors")
    }

    /// The relying party of the vectors, trusting the W3C test CA for the x5c formats, and
    /// expecting to be framed by the vectors' top origin.
    static func relyingParty(requiresUserVerification: Bool = false) throws -> RelyingParty {
        let testCA = try Vectors.certificate("w3c_l3/attestation_ca_cert.pem")
        return RelyingParty(
            id: "example.org", origins: ["https://example.org"], topOrigins: ["https://example.com"],
            requiresUserVerification: requiresUserVerification,
            trustAnchors: AttestationTrustAnchors([.packed: [testCA], .fidoU2F: [testCA], .apple: [testCA]]))
    }

    @Test("every in-scope vector registers and then authenticates")
    func inScopeVectorsVerify() throws {
        let rp = try Self.relyingParty()
        var verified = 0
        for vector in try Self.vectors() {
            let anchor = try vector.string("anchor")
            guard let expected = Self.inScope[anchor] else { continue }
            let registration = try vector.member("registration")
            let response = try RegistrationResponse(json: registration.member("response").serialized)
            let result = try rp.verifyRegistration(
                response, challenge: registration.base64URL("challenge_b64url"), at: Self.time)
            #expect(result.attestation.format == expected.format, "\(anchor)")
            #expect(result.attestation.type == expected.type, "\(anchor)")
            #expect(
                result.attestation.isTrusted == (expected.type == .basic || expected.type == .anonymizationCA)
            )
            #expect(result.publicKey.algorithm == expected.algorithm, "\(anchor)")
            let facts = try registration.member("attestation")
            #expect(result.signCount == UInt32(try facts.integer("signCount")), "\(anchor)")
            #expect(result.aaguid == (try facts.hex("aaguid_hex")), "\(anchor)")
            #expect(result.credentialId == (try vector.member("inputs").hex("credential_id")), "\(anchor)")

            let authentication = try vector.member("authentication")
            let assertion = try AuthenticationResponse(json: authentication.member("response").serialized)
            let record = CredentialRecord(
                id: result.credentialId, publicKey: result.publicKey, signCount: result.signCount,
                userHandle: Data("vector user".utf8), backupEligible: result.backupEligible)
            let login = try rp.verifyAuthentication(
                assertion, challenge: authentication.base64URL("challenge_b64url"), credential: record,
                identification: .beforeCeremony)
            #expect(login.credentialId == result.credentialId, "\(anchor)")
            verified += 1
        }
        #expect(verified == 10)
    }

    @Test("the COSE key survives storage: parsed again from its bytes it verifies the same assertion")
    func storedKeyRoundTrip() throws {
        let rp = try Self.relyingParty()
        for vector in try Self.vectors() where Self.inScope[try vector.string("anchor")] != nil {
            let registration = try vector.member("registration")
            let result = try rp.verifyRegistration(
                RegistrationResponse(json: registration.member("response").serialized),
                challenge: registration.base64URL("challenge_b64url"), at: Self.time)
            let stored = try CredentialPublicKey(coseKey: result.publicKey.coseKey)
            #expect(stored == result.publicKey)
            let authentication = try vector.member("authentication")
            let assertion = try AuthenticationResponse(json: authentication.member("response").serialized)
            let message = assertion.authenticatorData + Digest.sha256(assertion.clientDataJSON)
            #expect(stored.isValidSignature(assertion.signature, for: message))
        }
    }

    @Test("ES384, ES512, Ed448, tpm and android-key are refused as unsupported, not crashed on")
    func outOfScopeVectorsAreUnsupported() throws {
        let rp = try Self.relyingParty()
        var refused = 0
        for vector in try Self.vectors() {
            let anchor = try vector.string("anchor")
            guard let expected = Self.outOfScope[anchor] else { continue }
            let registration = try vector.member("registration")
            let response = try RegistrationResponse(json: registration.member("response").serialized)
            expectRefusal(expected, anchor) {
                try rp.verifyRegistration(
                    response, challenge: registration.base64URL("challenge_b64url"), at: Self.time)
            }
            refused += 1
        }
        #expect(refused == 5)
        #expect(refused + Self.inScope.count == (try Self.vectors().count))
    }

    @Test("without the test CA configured, x5c statements verify but are not trusted")
    func unknownRootIsUnattested() throws {
        let rp = RelyingParty(
            id: "example.org", origins: ["https://example.org"], topOrigins: ["https://example.com"],
            requiresUserVerification: false)
        for vector in try Self.vectors() {
            let anchor = try vector.string("anchor")
            guard let expected = Self.inScope[anchor],
                expected.type == .basic || expected.type == .anonymizationCA
            else { continue }
            let registration = try vector.member("registration")
            let result = try rp.verifyRegistration(
                RegistrationResponse(json: registration.member("response").serialized),
                challenge: registration.base64URL("challenge_b64url"), at: Self.time)
            #expect(!result.attestation.isTrusted, "\(anchor)")
            #expect(result.attestation.trustPath.count == 1, "\(anchor)")
        }
    }

    @Test("vectors without UV are refused when user verification is required")
    func userVerificationRequired() throws {
        let rp = try Self.relyingParty(requiresUserVerification: true)
        var refused = 0
        for vector in try Self.vectors() where Self.inScope[try vector.string("anchor")] != nil {
            let registration = try vector.member("registration")
            let flags = try #require(
                UInt8(registration.member("attestation").string("flags").dropFirst(2), radix: 16))
            let response = try RegistrationResponse(json: registration.member("response").serialized)
            let challenge = try registration.base64URL("challenge_b64url")
            if flags & 0x04 == 0 {
                expectRefusal(.userVerificationMissing) {
                    try rp.verifyRegistration(response, challenge: challenge, at: Self.time)
                }
                refused += 1
            } else {
                _ = try rp.verifyRegistration(response, challenge: challenge, at: Self.time)
            }
        }
        #expect(refused == 6)
    }

    @Test("cross-origin ceremonies need the relying party to expect them")
    func crossOriginNeedsConsent() throws {
        let sameOriginOnly = RelyingParty(
            id: "example.org", origins: ["https://example.org"], requiresUserVerification: false)
        let otherTop = RelyingParty(
            id: "example.org", origins: ["https://example.org"], topOrigins: ["https://elsewhere.example"],
            requiresUserVerification: false)
        for vector in try Self.vectors() {
            let anchor = try vector.string("anchor")
            guard anchor.hasSuffix("crossOrigin") || anchor.hasSuffix("topOrigin") else { continue }
            let registration = try vector.member("registration")
            let response = try RegistrationResponse(json: registration.member("response").serialized)
            let challenge = try registration.base64URL("challenge_b64url")
            expectRefusal(.crossOriginNotAllowed, anchor) {
                try sameOriginOnly.verifyRegistration(response, challenge: challenge, at: Self.time)
            }
            if anchor.hasSuffix("topOrigin") {
                expectRefusal(.crossOriginNotAllowed, anchor) {
                    try otherTop.verifyRegistration(response, challenge: challenge, at: Self.time)
                }
            }
        }
    }
}
