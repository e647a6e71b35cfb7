import Foundation
import KeyboundCrypto
import KeyboundWire

/// A WebAuthn Level 3 relying party: the registration (§7.1) and authentication (§7.2)
/// ceremonies as pure functions.
///
/// Nothing here stores anything: the caller issues and consumes challenges, looks credentials up,
/// checks that a new credential id is not registered yet (§7.1 step 26) and stores the results.
///
/// ```swift
/// let rp = RelyingParty(id: "example.org", origins: ["https://example.org"])
/// let response = try RegistrationResponse(json: body)
/// let challenge = try store.consume(response.clientData().challengeBytes)
/// let registration = try rp.verifyRegistration(response, challenge: challenge, at: .now)
/// ```
public struct RelyingParty: Sendable {
    /// The RP ID, e.g. `example.org`.
    public let id: String
    /// The origins ceremonies may run on, exactly as browsers write them (`https://example.org`,
    /// `http://localhost:8080`).
    public let origins: Set<String>
    /// The top-level origins a ceremony may run under in a cross-origin iframe. Empty (the
    /// default): ceremonies in cross-origin iframes are refused.
    public let topOrigins: Set<String>
    /// Whether ceremonies must have verified the user (UV); Keybound's default is yes.
    public let requiresUserVerification: Bool
    /// The algorithms offered in `pubKeyCredParams`, in order of preference.
    public let algorithms: [COSEAlgorithm]
    /// The attestation roots trusted per format.
    public let trustAnchors: AttestationTrustAnchors

    /// - Parameters:
    ///   - id: The RP ID.
    ///   - origins: The origins allowed.
    ///   - topOrigins: The top-level origins allowed around a cross-origin iframe; empty refuses
    ///     cross-origin ceremonies.
    ///   - requiresUserVerification: Whether the UV flag is required.
    ///   - algorithms: The algorithms offered, by default ES256, EdDSA, RS256.
    ///   - trustAnchors: The attestation roots, by default Apple's WebAuthn root for `apple`.
    public init(
        id: String, origins: Set<String>, topOrigins: Set<String> = [], requiresUserVerification: Bool = true,
        algorithms: [COSEAlgorithm] = [.es256, .edDSA, .rs256],
        trustAnchors: AttestationTrustAnchors = .init()
    ) {
        self.id = id
        self.origins = origins
        self.topOrigins = topOrigins
        self.requiresUserVerification = requiresUserVerification
        self.algorithms = algorithms
        self.trustAnchors = trustAnchors
    }

    /// SHA-256 of the RP ID, as authenticator data carries it.
    public var rpIdHash: Data { Digest.sha256(Data(id.utf8)) }

    /// Runs the registration ceremony's checks (WebAuthn L3 §7.1), in order.
    ///
    /// - Parameters:
    ///   - response: The browser's `toJSON()` of the new credential.
    ///   - challenge: The challenge issued for this ceremony (`pkOptions.challenge`).
    ///   - time: The time attestation certificates must be valid at.
    /// - Returns: The credential record to store, with the attestation's verdict: whether an
    ///   untrusted attestation is acceptable is the caller's policy (§7.1 step 24).
    /// - Throws: ``WebAuthnError``: the first check that fails.
    /// - Important: Step 26 is the caller's: refuse a credential id already registered to any user.
    public func verifyRegistration(
        _ response: RegistrationResponse, challenge: Data, at time: Date
    ) throws -> VerifiedRegistration {
        // Step 1. Let options be the CredentialCreationOptions: issued by the caller; `challenge`
        // is its challenge.
        // Step 2. Call navigator.credentials.create(): done by the browser.
        // Step 3. Let response be credential.response, an AuthenticatorAttestationResponse: the
        // parsed response required an attestation object.
        // Step 4. Let clientExtensionResults be getClientExtensionResults(): Keybound requests no
        // extensions, so there is nothing to read.
        // Step 5. Let JSONtext be the UTF-8 decode of clientDataJSON.
        // Step 6. Let C be the result of parsing JSONtext.
        let clientData = try CollectedClientData(json: response.clientDataJSON)
        // Step 7. Verify that C.type is webauthn.create.
        // Step 8. Verify that C.challenge is the base64url encoding of the challenge.
        // Step 9. Verify that C.origin is an origin the relying party expects.
        // Step 10. If C.crossOrigin is true, verify that the relying party expects a cross-origin iframe.
        // Step 11. If C.topOrigin is present, verify that it is expected.
        try verify(clientData, type: "webauthn.create", challenge: challenge)
        // Step 12. Let hash be SHA-256 of clientDataJSON.
        let hash = Digest.sha256(response.clientDataJSON)
        // Step 13. CBOR-decode the attestation object into fmt, authData and attStmt.
        let object = try AttestationObject(response.attestationObject)
        let authData = object.authenticatorData
        guard let credential = authData.attestedCredentialData else {
            throw WebAuthnError.malformedAuthenticatorData.with(
                "a registration needs attested credential data")
        }
        // Step 14. Verify that rpIdHash is SHA-256 of the RP ID.
        // Step 15. Verify that UP is set (Keybound never uses conditional mediation for create).
        // Step 16. If user verification is required, verify that UV is set.
        // Step 17. If BE is not set, verify that BS is not set.
        try verifyFlags(of: authData)
        // Step 18. Evaluate BE, and Step 19. evaluate BS: returned for the caller's policy.
        // Step 20. Verify that the credential key's alg is one offered in pubKeyCredParams.
        guard algorithms.contains(credential.publicKey.algorithm) else {
            throw WebAuthnError.algorithmNotAllowed.with("\(credential.publicKey.algorithm) was not offered")
        }
        // Step 21. Determine the attestation statement format (case-sensitive match on fmt).
        guard AttestationFormat(rawValue: object.format) != nil else {
            throw WebAuthnError.unsupportedAttestationFormat.with("fmt \"\(object.format)\"")
        }
        // Step 22. Verify attStmt with the format's verification procedure, given authData and hash.
        // Step 23. Obtain the trust anchors for the format: `trustAnchors`.
        // Step 24. Assess the attestation's trustworthiness: `isTrusted`, for the caller's policy.
        let attestation = try object.verify(clientDataHash: hash, trustAnchors: trustAnchors, at: time)
        // Step 25. Verify that the credential id is at most 1023 bytes.
        guard credential.credentialId.count <= AuthenticatorData.maximumCredentialIdLength else {
            throw WebAuthnError.credentialIdTooLong.with("\(credential.credentialId.count) bytes")
        }
        // Step 26. Verify that the credential id is not yet registered for any user: the caller's
        // (storage). Here, the response must name the credential the authenticator attested.
        guard response.credentialId == credential.credentialId else {
            throw WebAuthnError.credentialMismatch.with("rawId is not the attested credential id")
        }
        // Step 27. Create the credential record.
        // Step 28. Process extension outputs: Keybound requests none and ignores any.
        // Step 29. Store the record: the caller's, with the returned value.
        return VerifiedRegistration(
            credentialId: credential.credentialId, publicKey: credential.publicKey,
            signCount: authData.signCount,
            userVerified: authData.flags.contains(.userVerified),
            backupEligible: authData.flags.contains(.backupEligible),
            backedUp: authData.flags.contains(.backedUp),
            aaguid: credential.aaguid, attestation: attestation)
    }

    /// Runs the authentication ceremony's checks (WebAuthn L3 §7.2), in order.
    ///
    /// - Parameters:
    ///   - response: The browser's `toJSON()` of the assertion.
    ///   - challenge: The challenge issued for this ceremony.
    ///   - credential: The stored record of the credential the response names (looked up by
    ///     `response.credentialId`).
    ///   - identification: How the user was identified (step 6).
    ///   - allowedCredentialIds: The `allowCredentials` ids sent in the options; empty when the
    ///     ceremony let the user pick a discoverable credential.
    /// - Returns: The new state of the record (sign count, backup state) to store.
    /// - Throws: ``WebAuthnError``: the first check that fails; ``WebAuthnError/clonedAuthenticator``
    ///   when the sign count did not increase, which the caller should audit.
    public func verifyAuthentication(
        _ response: AuthenticationResponse, challenge: Data, credential: CredentialRecord,
        identification: UserIdentification, allowedCredentialIds: [Data] = []
    ) throws -> VerifiedAuthentication {
        // Step 1. Let options be the CredentialRequestOptions: issued by the caller.
        // Step 2. Call navigator.credentials.get(): done by the browser.
        // Step 3. Let response be an AuthenticatorAssertionResponse: the parsed response required
        // authenticatorData and signature.
        // Step 4. Let clientExtensionResults be getClientExtensionResults(): none requested.
        // Step 5. If allowCredentials is not empty, verify that credential.id is one of them.
        guard allowedCredentialIds.isEmpty || allowedCredentialIds.contains(response.credentialId) else {
            throw WebAuthnError.credentialMismatch.with("the credential was not in allowCredentials")
        }
        // Step 6. Identify the user and the credential record: the record must be the
        // credential's, and userHandle, when given (and always for discoverable ceremonies), the
        // owner's.
        guard credential.id == response.credentialId else {
            throw WebAuthnError.credentialMismatch.with("the record is for another credential")
        }
        switch (identification, response.userHandle) {
        case (.beforeCeremony, nil): break
        case (.byUserHandle, nil):
            throw WebAuthnError.userHandleMismatch.with(
                "a discoverable credential must return its userHandle")
        case (_, let handle?):
            guard handle == credential.userHandle else {
                throw WebAuthnError.userHandleMismatch.with("userHandle is not the credential owner's")
            }
        }
        // Step 7. Let cData, authData and sig be clientDataJSON, authenticatorData and signature.
        let authData = try AuthenticatorData(response.authenticatorData)
        // Step 8. Let JSONtext be the UTF-8 decode of cData.
        // Step 9. Let C be the result of parsing JSONtext.
        let clientData = try CollectedClientData(json: response.clientDataJSON)
        // Step 10. Verify that C.type is webauthn.get.
        // Step 11. Verify that C.challenge is the base64url encoding of the challenge.
        // Step 12. Verify that C.origin is an origin the relying party expects.
        // Step 13. If C.crossOrigin is true, verify that the relying party expects a cross-origin iframe.
        // Step 14. If C.topOrigin is present, verify that it is expected.
        try verify(clientData, type: "webauthn.get", challenge: challenge)
        // Step 15. Verify that rpIdHash is SHA-256 of the RP ID.
        // Step 16. Verify that UP is set.
        // Step 17. If user verification is required, verify that UV is set.
        // Step 18. If BE is not set, verify that BS is not set.
        try verifyFlags(of: authData)
        // Step 19. BE must not have changed since registration (it is fixed for a credential's life).
        guard authData.flags.contains(.backupEligible) == credential.backupEligible else {
            throw WebAuthnError.invalidBackupState.with("BE changed since registration")
        }
        // Step 20. Let hash be SHA-256 of cData.
        let hash = Digest.sha256(response.clientDataJSON)
        // Step 21. Verify that sig is a valid signature over authData ‖ hash with the stored key.
        guard credential.publicKey.isValidSignature(response.signature, for: authData.rawValue + hash) else {
            throw WebAuthnError.invalidSignature
        }
        // Step 22. If either sign count is non-zero, the new one must be greater: otherwise the
        // authenticator may be cloned, and Keybound refuses. Counters that stay 0 are fine.
        if authData.signCount != 0 || credential.signCount != 0 {
            guard authData.signCount > credential.signCount else {
                throw WebAuthnError.clonedAuthenticator.with(
                    "sign count \(authData.signCount) after \(credential.signCount)")
            }
        }
        // Step 23. Process extension outputs: none requested, any ignored.
        // Step 24. Update the credential record: the returned values, to store.
        // Step 25. All steps passed: the caller continues the ceremony (opens the session).
        return VerifiedAuthentication(
            credentialId: credential.id, userHandle: credential.userHandle, signCount: authData.signCount,
            userVerified: authData.flags.contains(.userVerified), backedUp: authData.flags.contains(.backedUp)
        )
    }

    /// The client data checks shared by both ceremonies: type, challenge, origin, crossOrigin,
    /// topOrigin (§7.1 steps 7–11, §7.2 steps 10–14).
    private func verify(_ clientData: CollectedClientData, type: String, challenge: Data) throws {
        guard clientData.type == type else {
            throw WebAuthnError.typeMismatch.with("\"\(clientData.type)\", expected \"\(type)\"")
        }
        guard clientData.challenge == Base64URL.encode(challenge) else {
            throw WebAuthnError.challengeMismatch
        }
        guard origins.contains(clientData.origin) else {
            throw WebAuthnError.originNotAllowed.with("\"\(clientData.origin)\"")
        }
        if clientData.crossOrigin {
            guard !topOrigins.isEmpty else {
                throw WebAuthnError.crossOriginNotAllowed.with("the ceremony ran in a cross-origin iframe")
            }
        }
        if let topOrigin = clientData.topOrigin {
            guard topOrigins.contains(topOrigin) else {
                throw WebAuthnError.crossOriginNotAllowed.with("top origin \"\(topOrigin)\" is not expected")
            }
        }
    }

    /// The authenticator data checks shared by both ceremonies: rpIdHash, UP, UV, BE/BS.
    private func verifyFlags(of authData: AuthenticatorData) throws {
        guard authData.rpIdHash == rpIdHash else { throw WebAuthnError.rpIdMismatch }
        guard authData.flags.contains(.userPresent) else { throw WebAuthnError.userPresenceMissing }
        guard !requiresUserVerification || authData.flags.contains(.userVerified) else {
            throw WebAuthnError.userVerificationMissing
        }
        guard authData.flags.contains(.backupEligible) || !authData.flags.contains(.backedUp) else {
            throw WebAuthnError.invalidBackupState.with("BS set without BE")
        }
    }
}

/// How the user of an authentication ceremony was identified (WebAuthn §7.2 step 6).
public enum UserIdentification: Sendable, Hashable {
    /// Before the ceremony (a username, a session): `userHandle` is optional but must be the
    /// owner's when present.
    case beforeCeremony
    /// By the discoverable credential's `userHandle`, which must be present and the owner's.
    case byUserHandle
}

/// A stored credential record: what §7.2 verifies an assertion against.
public struct CredentialRecord: Sendable, Hashable {
    /// The credential id.
    public var id: Data
    /// The credential public key.
    public var publicKey: CredentialPublicKey
    /// The last sign count accepted.
    public var signCount: UInt32
    /// The user handle (`user.id`) of the account that owns the credential.
    public var userHandle: Data
    /// The BE flag at registration.
    public var backupEligible: Bool

    /// - Parameters:
    ///   - id: The credential id.
    ///   - publicKey: The credential public key.
    ///   - signCount: The last sign count accepted.
    ///   - userHandle: The owner's user handle.
    ///   - backupEligible: The BE flag at registration.
    public init(
        id: Data, publicKey: CredentialPublicKey, signCount: UInt32, userHandle: Data, backupEligible: Bool
    ) {
        self.id = id
        self.publicKey = publicKey
        self.signCount = signCount
        self.userHandle = userHandle
        self.backupEligible = backupEligible
    }
}

/// A registration that passed every check of §7.1: the credential record to store.
public struct VerifiedRegistration: Sendable, Hashable {
    /// The credential id.
    public let credentialId: Data
    /// The credential public key (store ``CredentialPublicKey/coseKey``).
    public let publicKey: CredentialPublicKey
    /// The initial sign count.
    public let signCount: UInt32
    /// Whether the user was verified (the record's `uvInitialized`).
    public let userVerified: Bool
    /// BE: whether the credential can be backed up (a synced passkey).
    public let backupEligible: Bool
    /// BS: whether it is backed up now.
    public let backedUp: Bool
    /// The authenticator model's AAGUID (zeros when not disclosed).
    public let aaguid: Data
    /// The attestation's verdict.
    public let attestation: VerifiedAttestation
}

/// An authentication that passed every check of §7.2: the record's new state.
public struct VerifiedAuthentication: Sendable, Hashable {
    /// The credential id.
    public let credentialId: Data
    /// The owner's user handle.
    public let userHandle: Data
    /// The new sign count, to store.
    public let signCount: UInt32
    /// Whether the user was verified this time.
    public let userVerified: Bool
    /// BS: whether the credential is backed up now, to store.
    public let backedUp: Bool
}
