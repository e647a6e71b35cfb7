import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWebAuthn
import KeyboundWire
import Testing

/// Each check of §7.1 and §7.2 refuses what it must, with its own error, while everything else
/// about the ceremony is valid.
@Suite("Ceremony checks")
struct CeremonyTests {
    let authenticator: TestAuthenticator
    let rp = RelyingParty(id: "example.org", origins: ["https://example.org"])
    let challenge = Data(repeating: 0xC5, count: 32)
    let time = Date(timeIntervalSince1970: 1_750_000_000)

    init() throws {
        authenticator = try TestAuthenticator()
    }

    func record(signCount: UInt32 = 0, backupEligible: Bool = false) -> CredentialRecord {
        CredentialRecord(
            id: authenticator.credentialId, publicKey: authenticator.publicKey, signCount: signCount,
            userHandle: Data("user-1".utf8), backupEligible: backupEligible)
    }

    func login(_ json: Data, record: CredentialRecord? = nil, challenge: Data? = nil) throws
        -> VerifiedAuthentication
    {
        try rp.verifyAuthentication(
            AuthenticationResponse(json: json), challenge: challenge ?? self.challenge,
            credential: record ?? self.record(),
            identification: .beforeCeremony)
    }

    @Test("an emulated registration and login pass, self attested")
    func happyPath() throws {
        let registration = try rp.verifyRegistration(
            RegistrationResponse(json: authenticator.registration(challenge: challenge)),
            challenge: challenge, at: time)
        #expect(registration.attestation.type == .selfAttestation && !registration.attestation.isTrusted)
        #expect(registration.publicKey == authenticator.publicKey && registration.userVerified)
        let signedIn = try login(authenticator.assertion(challenge: challenge))
        #expect(signedIn.signCount == 1 && signedIn.userVerified)
    }

    @Test("a foreign or replayed challenge is refused")
    func foreignChallenge() throws {
        let other = Data(repeating: 0x01, count: 32)
        expectRefusal(.challengeMismatch) {
            try rp.verifyRegistration(
                RegistrationResponse(json: authenticator.registration(challenge: other)),
                challenge: challenge, at: time)
        }
        expectRefusal(.challengeMismatch) { try login(authenticator.assertion(challenge: other)) }
    }

    @Test("client data of the other ceremony type is refused")
    func otherType() throws {
        let created = authenticator.clientDataJSON(type: "webauthn.create", challenge: challenge)
        expectRefusal(.typeMismatch) {
            try login(authenticator.assertion(challenge: challenge, clientData: created))
        }
    }

    @Test("a wrong origin is refused, and so is a wrong RP ID")
    func originAndRPID() throws {
        var elsewhere = authenticator
        elsewhere.origin = "https://evil.example"
        expectRefusal(.originNotAllowed) { try login(elsewhere.assertion(challenge: challenge)) }
        expectRefusal(.originNotAllowed) {
            try rp.verifyRegistration(
                RegistrationResponse(json: elsewhere.registration(challenge: challenge)),
                challenge: challenge, at: time)
        }
        var otherRP = authenticator
        otherRP.rpId = "evil.example"
        expectRefusal(.rpIdMismatch) { try login(otherRP.assertion(challenge: challenge)) }
        expectRefusal(.rpIdMismatch) {
            try rp.verifyRegistration(
                RegistrationResponse(json: otherRP.registration(challenge: challenge)), challenge: challenge,
                at: time)
        }
    }

    @Test("tampered clientDataJSON is refused: the signature no longer covers it")
    func tamperedClientData() throws {
        let json = try authenticator.assertion(challenge: challenge)
        let credential = try JSON.parse(json)
        let tampered = authenticator.clientDataJSON(
            type: "webauthn.get", challenge: challenge, extra: [JSONMember("injected", .bool(true))])
        let body = try replacing("clientDataJSON", in: credential, with: .string(Base64URL.encode(tampered)))
        expectRefusal(.invalidSignature) { try login(body) }
    }

    @Test("a wrong signature is refused, at login and in a self attestation")
    func wrongSignature() throws {
        // Another key claiming this credential's id.
        var other = try TestAuthenticator()
        other.credentialId = authenticator.credentialId
        expectRefusal(.invalidSignature) { try login(other.assertion(challenge: challenge)) }
        // The attestation object signed over other client data (same challenge, origin, type).
        let registration = try JSON.parse(authenticator.registration(challenge: challenge))
        let tampered = authenticator.clientDataJSON(
            type: "webauthn.create", challenge: challenge, extra: [JSONMember("injected", .bool(true))])
        let body = try replacing(
            "clientDataJSON", in: registration, with: .string(Base64URL.encode(tampered)))
        expectRefusal(.invalidAttestation) {
            try rp.verifyRegistration(RegistrationResponse(json: body), challenge: challenge, at: time)
        }
    }

    @Test("UP and UV are required; UV only when the relying party requires it")
    func presenceAndVerification() throws {
        expectRefusal(.userPresenceMissing) {
            try login(authenticator.assertion(challenge: challenge, flags: [.userVerified]))
        }
        expectRefusal(.userVerificationMissing) {
            try login(authenticator.assertion(challenge: challenge, flags: [.userPresent]))
        }
        expectRefusal(.userVerificationMissing) {
            try rp.verifyRegistration(
                RegistrationResponse(
                    json: authenticator.registration(challenge: challenge, flags: [.userPresent])),
                challenge: challenge, at: time)
        }
        let lenient = RelyingParty(
            id: "example.org", origins: ["https://example.org"], requiresUserVerification: false)
        let unverified = try lenient.verifyAuthentication(
            AuthenticationResponse(
                json: authenticator.assertion(challenge: challenge, flags: [.userPresent])),
            challenge: challenge, credential: record(), identification: .beforeCeremony)
        #expect(!unverified.userVerified)
    }

    @Test("a sign count that does not increase is a cloned authenticator; counters that stay 0 pass")
    func signCount() throws {
        expectRefusal(.clonedAuthenticator, "equal") {
            try login(
                authenticator.assertion(challenge: challenge, signCount: 5), record: record(signCount: 5))
        }
        expectRefusal(.clonedAuthenticator, "lower") {
            try login(
                authenticator.assertion(challenge: challenge, signCount: 4), record: record(signCount: 5))
        }
        expectRefusal(.clonedAuthenticator, "back to 0") {
            try login(
                authenticator.assertion(challenge: challenge, signCount: 0), record: record(signCount: 5))
        }
        #expect(
            try login(authenticator.assertion(challenge: challenge, signCount: 0), record: record()).signCount
                == 0)
        #expect(
            try login(
                authenticator.assertion(challenge: challenge, signCount: 6), record: record(signCount: 5)
            ).signCount == 6)
    }

    @Test("a sign count that does not increase is refused on the real py_webauthn EC2 authentication")
    func realClonedCounter() throws {
        let vector = try Vectors.json("py_webauthn/py_webauthn_vectors.json").array("authentications")[0]
        let response = try AuthenticationResponse(json: vector.member("response").serialized)
        let rp = RelyingParty(
            id: "localhost", origins: ["http://localhost:5000"], requiresUserVerification: false)
        let key = try CredentialPublicKey(coseKey: vector.base64URL("credential_public_key_b64url"))
        let sent = try AuthenticatorData(response.authenticatorData).signCount
        for stored in [sent, sent + 1] {
            let record = CredentialRecord(
                id: response.credentialId, publicKey: key, signCount: stored, userHandle: Data(),
                backupEligible: false)
            expectRefusal(.clonedAuthenticator, "stored \(stored), sent \(sent)") {
                try rp.verifyAuthentication(
                    response, challenge: vector.base64URL("challenge_b64url"), credential: record,
                    identification: .beforeCeremony)
            }
        }
    }

    @Test("backup flags: BS without BE is impossible, and BE cannot change after registration")
    func backupFlags() throws {
        expectRefusal(.invalidBackupState) {
            try login(
                authenticator.assertion(
                    challenge: challenge, flags: TestAuthenticator.allFlags.union(.backedUp)))
        }
        expectRefusal(.invalidBackupState) {
            try login(authenticator.assertion(challenge: challenge), record: record(backupEligible: true))
        }
        let syncedFlags = TestAuthenticator.allFlags.union([.backupEligible, .backedUp])
        let synced = try login(
            authenticator.assertion(challenge: challenge, flags: syncedFlags),
            record: record(backupEligible: true))
        #expect(synced.backedUp)
    }

    @Test("the credential must be the record's, in allowCredentials, and attested under its own id")
    func credentialIdentity() throws {
        var other = record()
        other.id = Data([9, 9, 9])
        expectRefusal(.credentialMismatch) {
            try login(authenticator.assertion(challenge: challenge), record: other)
        }
        expectRefusal(.credentialMismatch) {
            try rp.verifyAuthentication(
                AuthenticationResponse(json: authenticator.assertion(challenge: challenge)),
                challenge: challenge,
                credential: record(), identification: .beforeCeremony, allowedCredentialIds: [Data([1])])
        }
        expectRefusal(.credentialMismatch) {
            try rp.verifyRegistration(
                RegistrationResponse(
                    json: authenticator.registration(challenge: challenge, attestedId: Data([7]))),
                challenge: challenge, at: time)
        }
    }

    @Test("credential ids over 1023 bytes are refused; 1023 passes")
    func credentialIdLength() throws {
        var long = authenticator
        long.credentialId = Data(repeating: 0xAB, count: 1023)
        _ = try rp.verifyRegistration(
            RegistrationResponse(json: long.registration(challenge: challenge)), challenge: challenge,
            at: time)
        long.credentialId = Data(repeating: 0xAB, count: 1024)
        expectRefusal(.credentialIdTooLong) {
            try rp.verifyRegistration(
                RegistrationResponse(json: long.registration(challenge: challenge)), challenge: challenge,
                at: time)
        }
    }

    @Test("an algorithm the relying party did not offer is refused")
    func algorithmNotOffered() throws {
        let rsaOnly = RelyingParty(id: "example.org", origins: ["https://example.org"], algorithms: [.rs256])
        expectRefusal(.algorithmNotAllowed) {
            try rsaOnly.verifyRegistration(
                RegistrationResponse(json: authenticator.registration(challenge: challenge)),
                challenge: challenge, at: time)
        }
    }

    @Test("responses that are not toJSON() output are malformed")
    func malformedResponses() throws {
        let valid = try JSON.parse(authenticator.assertion(challenge: challenge))
        let cases: [(String, Data)] = [
            ("not JSON", Data("{".utf8)),
            ("an array", Data("[]".utf8)),
            ("padded base64", try replacing("signature", in: valid, with: .string("AAAA=="))),
            ("a number", try replacing("authenticatorData", in: valid, with: .integer(3))),
        ]
        for (name, body) in cases {
            expectRefusal(.malformedResponse, name) { try AuthenticationResponse(json: body) }
        }
        guard case .object(var members) = valid else { return }
        members[0].value = .string("AAAA")  // id no longer rawId
        expectRefusal(.malformedResponse) {
            try AuthenticationResponse(json: JSON.serialize(.object(members)))
        }
    }

    @Test("client data is parsed, not compared: extra members and any order pass, wrong types do not")
    func clientDataParsing() throws {
        let reordered = Data(
            #"{"origin":"https://example.org","other_keys_can_be_added_here":"x","challenge":"AA","type":"webauthn.get"}"#
                .utf8)
        let parsed = try CollectedClientData(json: Data([0xEF, 0xBB, 0xBF]) + reordered)
        #expect(parsed.type == "webauthn.get" && parsed.challengeBytes == Data([0]) && !parsed.crossOrigin)
        for bad in [
            #"{"type":"webauthn.get","challenge":"AA"}"#,
            #"{"type":"webauthn.get","challenge":1,"origin":"o"}"#,
            #"{"type":"webauthn.get","challenge":"AA","origin":"o","crossOrigin":"false"}"#,
            #"{"type":"webauthn.get","challenge":"AA","origin":"o","type":"webauthn.create"}"#,
            #"["webauthn.get"]"#,
        ] {
            expectRefusal(.malformedClientData, bad) { try CollectedClientData(json: Data(bad.utf8)) }
        }
    }
}
