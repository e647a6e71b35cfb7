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

extension W3CVectorTests {
    /// The in-scope vectors with their registration verified, ready for negative checks.
    static func registered() throws -> [(anchor: String, vector: JSONValue, result: VerifiedRegistration)] {
        let rp = try relyingParty()
        return try vectors().compactMap { vector in
            let anchor = try vector.string("anchor")
            guard inScope[anchor] != nil else { return nil }
            let registration = try vector.member("registration")
            let result = try rp.verifyRegistration(
                RegistrationResponse(json: registration.member("response").serialized),
                challenge: registration.base64URL("challenge_b64url"), at: time)
            return (anchor, vector, result)
        }
    }

    @Test(
        "every real assertion is refused for another origin, another RP ID, tampered client data, a cloned counter"
    )
    func assertionRejections() throws {
        let otherOrigin = RelyingParty(
            id: "example.org", origins: ["https://example.com"], topOrigins: ["https://example.com"],
            requiresUserVerification: false)
        let otherRP = RelyingParty(
            id: "example.com", origins: ["https://example.org"], topOrigins: ["https://example.com"],
            requiresUserVerification: false)
        let rp = try Self.relyingParty()
        for (anchor, vector, result) in try Self.registered() {
            let authentication = try vector.member("authentication")
            let json = try authentication.member("response")
            let response = try AuthenticationResponse(json: json.serialized)
            let challenge = try authentication.base64URL("challenge_b64url")
            let record = CredentialRecord(
                id: result.credentialId, publicKey: result.publicKey, signCount: result.signCount,
                userHandle: Data(), backupEligible: result.backupEligible)
            func login(_ rp: RelyingParty, _ response: AuthenticationResponse, _ record: CredentialRecord)
                throws
            {
                _ = try rp.verifyAuthentication(
                    response, challenge: challenge, credential: record, identification: .beforeCeremony)
            }
            expectRefusal(.originNotAllowed, anchor) { try login(otherOrigin, response, record) }
            expectRefusal(.rpIdMismatch, anchor) { try login(otherRP, response, record) }
            expectRefusal(.challengeMismatch, anchor) {
                try rp.verifyAuthentication(
                    response, challenge: Data(repeating: 0, count: 32), credential: record,
                    identification: .beforeCeremony)
            }
            // The same members in another order: what a template comparison would miss.
            let original = try CollectedClientData(json: response.clientDataJSON)
            var members: [JSONMember] = [
                JSONMember("challenge", .string(original.challenge)),
                JSONMember("type", .string(original.type)),
                JSONMember("origin", .string(original.origin)),
                JSONMember("crossOrigin", .bool(original.crossOrigin)),
            ]
            if let top = original.topOrigin { members.append(JSONMember("topOrigin", .string(top))) }
            let tampered = try AuthenticationResponse(
                json: replacing(
                    "clientDataJSON", in: json,
                    with: .string(Base64URL.encode(JSON.serialize(.object(members))))))
            expectRefusal(.invalidSignature, anchor) { try login(rp, tampered, record) }
            // Their counters are 0; a record that has seen a counter above it means a clone.
            var ahead = record
            ahead.signCount = 1
            expectRefusal(.clonedAuthenticator, anchor) { try login(rp, response, ahead) }
        }
    }

    @Test("a registration over tampered client data is refused by every statement that signs it")
    func registrationRejections() throws {
        let rp = try Self.relyingParty()
        for vector in try Self.vectors() {
            let anchor = try vector.string("anchor")
            guard let expected = Self.inScope[anchor] else { continue }
            let registration = try vector.member("registration")
            let json = try registration.member("response")
            let challenge = try registration.base64URL("challenge_b64url")
            let original = try RegistrationResponse(json: json.serialized)
            // Client data with one member more: same type, challenge and origin.
            var clientData = original.clientDataJSON.dropLast()
            clientData.append(contentsOf: Data(#","tampered":true}"#.utf8))
            let tampered = try RegistrationResponse(
                json: replacing("clientDataJSON", in: json, with: .string(Base64URL.encode(Data(clientData))))
            )
            switch expected.type {
            case .none:
                // Nothing signs the client data of a `none` registration: that is what the
                // challenge (single use, found through the client data) is for.
                _ = try rp.verifyRegistration(tampered, challenge: challenge, at: Self.time)
            case .anonymizationCA:
                expectRefusal(.nonceMismatch, anchor) {
                    try rp.verifyRegistration(tampered, challenge: challenge, at: Self.time)
                }
            case .selfAttestation, .basic:
                expectRefusal(.invalidAttestation, anchor) {
                    try rp.verifyRegistration(tampered, challenge: challenge, at: Self.time)
                }
            }
            expectRefusal(.challengeMismatch, anchor) {
                try rp.verifyRegistration(original, challenge: Data(repeating: 0, count: 32), at: Self.time)
            }
        }
    }

    @Test("a statement whose signature is wrong is refused, not reported as untrusted")
    func wrongStatementSignature() throws {
        let rp = try Self.relyingParty()
        var refused = 0
        for vector in try Self.vectors() {
            let anchor = try vector.string("anchor")
            guard Self.inScope[anchor] != nil else { continue }
            let registration = try vector.member("registration")
            let json = try registration.member("response")
            let original = try RegistrationResponse(json: json.serialized)
            let object = try AttestationObject(original.attestationObject)
            guard var signature = object.statement[text: "sig"]?.bytesValue else { continue }
            signature[signature.count - 1] ^= 0x01
            let statement = CBORMap(
                object.statement.entries.map { entry in
                    (entry.key, entry.key == .text("sig") ? .bytes(signature) : entry.value)
                })
            let forged = AttestationObject(
                format: object.format, statement: statement, authenticatorData: object.authenticatorData)
            let response = try RegistrationResponse(
                json: replacing(
                    "attestationObject", in: json, with: .string(Base64URL.encode(forged.encoded()))))
            expectRefusal(.invalidAttestation, anchor) {
                try rp.verifyRegistration(
                    response, challenge: registration.base64URL("challenge_b64url"), at: Self.time)
            }
            refused += 1
        }
        #expect(refused == 5)  // packed self, packed ES256/RS256/EdDSA, fido-u2f
    }
}
