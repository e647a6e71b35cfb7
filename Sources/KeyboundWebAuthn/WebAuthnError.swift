/// Why KeyboundWebAuthn refused an input.
///
/// Every failure of every function in this module is one of these, whatever the bytes: nothing a
/// client sends makes it trap. The kinds are `static` values, so new kinds can be added without
/// breaking callers; two errors are equal when they are the same kind (``detail`` is for logs and
/// never compared). ``code`` is a stable snake_case name a server can put in a problem response.
///
/// ```swift
/// do {
///     let login = try relyingParty.verifyAuthentication(response, challenge: challenge, credential: record)
/// } catch let error as WebAuthnError where error == .clonedAuthenticator {
///     // Audit: two copies of this credential's private key may exist.
/// }
/// ```
public struct WebAuthnError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Kind: String, Sendable {
        // Encodings.
        case malformedCBOR = "malformed_cbor"
        case malformedResponse = "malformed_response"
        case malformedClientData = "malformed_client_data"
        case malformedAuthenticatorData = "malformed_authenticator_data"
        case malformedCertificate = "malformed_certificate"
        case invalidPublicKey = "invalid_public_key"
        case unsupportedAlgorithm = "unsupported_algorithm"
        case unsupportedAttestationFormat = "unsupported_attestation_format"
        // Ceremony checks.
        case typeMismatch = "client_data_type_mismatch"
        case challengeMismatch = "challenge_mismatch"
        case originNotAllowed = "origin_not_allowed"
        case crossOriginNotAllowed = "cross_origin_not_allowed"
        case rpIdMismatch = "rp_id_mismatch"
        case userPresenceMissing = "user_presence_missing"
        case userVerificationMissing = "user_verification_missing"
        case invalidBackupState = "invalid_backup_state"
        case algorithmNotAllowed = "algorithm_not_allowed"
        case credentialIdTooLong = "credential_id_too_long"
        case credentialMismatch = "credential_mismatch"
        case userHandleMismatch = "user_handle_mismatch"
        case invalidSignature = "invalid_signature"
        case clonedAuthenticator = "cloned_authenticator"
        // Attestation.
        case invalidAttestation = "invalid_attestation"
        case nonceMismatch = "nonce_mismatch"
        case certificateChainInvalid = "certificate_chain_invalid"
        // App Attest.
        case keyIdMismatch = "key_id_mismatch"
        case environmentMismatch = "environment_mismatch"
        case replayedAssertion = "replayed_assertion"
    }

    private let kind: Kind

    /// What exactly was wrong, for logs; never holds a secret. `nil` when the kind says it all.
    public let detail: String?

    private init(_ kind: Kind, _ detail: String? = nil) {
        self.kind = kind
        self.detail = detail
    }

    /// A stable snake_case name of the kind (`"challenge_mismatch"`), for problem responses.
    public var code: String { kind.rawValue }

    /// CBOR that is not what WebAuthn allows: truncated, indefinite lengths, tags, floats,
    /// integers or lengths not in their shortest form, duplicate map keys, invalid UTF-8, too deep.
    public static let malformedCBOR = WebAuthnError(.malformedCBOR)
    /// The response JSON (`PublicKeyCredential.toJSON()`) is not JSON, misses a member, has a
    /// member of the wrong type, or a binary member that is not base64url.
    public static let malformedResponse = WebAuthnError(.malformedResponse)
    /// `clientDataJSON` is not a JSON object with string `type`, `challenge` and `origin`.
    public static let malformedClientData = WebAuthnError(.malformedClientData)
    /// Authenticator data that is truncated, has bytes left over, or is inconsistent with its flags.
    public static let malformedAuthenticatorData = WebAuthnError(.malformedAuthenticatorData)
    /// A certificate that is not a single DER X.509 certificate.
    public static let malformedCertificate = WebAuthnError(.malformedCertificate)
    /// A public key of a supported algorithm whose parameters are wrong: a point not on the curve,
    /// a coordinate of the wrong size, an RSA modulus under 2048 bits.
    public static let invalidPublicKey = WebAuthnError(.invalidPublicKey)
    /// A COSE algorithm or key type this module does not verify (ES384, ES512, Ed448, PS256…).
    public static let unsupportedAlgorithm = WebAuthnError(.unsupportedAlgorithm)
    /// An attestation statement format this module does not verify (`tpm`, `android-key`,
    /// `android-safetynet`, unknown names).
    public static let unsupportedAttestationFormat = WebAuthnError(.unsupportedAttestationFormat)

    /// The client data's `type` is not the ceremony's (`webauthn.create` or `webauthn.get`).
    public static let typeMismatch = WebAuthnError(.typeMismatch)
    /// The client data's `challenge` is not the one the relying party issued.
    public static let challengeMismatch = WebAuthnError(.challengeMismatch)
    /// The client data's `origin` is not one the relying party allows.
    public static let originNotAllowed = WebAuthnError(.originNotAllowed)
    /// The ceremony ran in a cross-origin iframe (`crossOrigin` or `topOrigin`) the relying party
    /// does not expect.
    public static let crossOriginNotAllowed = WebAuthnError(.crossOriginNotAllowed)
    /// The authenticator data is for another RP ID (or App ID).
    public static let rpIdMismatch = WebAuthnError(.rpIdMismatch)
    /// The authenticator did not test user presence (flag UP clear).
    public static let userPresenceMissing = WebAuthnError(.userPresenceMissing)
    /// User verification was required and the authenticator did not perform it (flag UV clear).
    public static let userVerificationMissing = WebAuthnError(.userVerificationMissing)
    /// The backup flags are impossible (BS without BE) or BE changed since registration.
    public static let invalidBackupState = WebAuthnError(.invalidBackupState)
    /// The credential's algorithm is not one the relying party offered.
    public static let algorithmNotAllowed = WebAuthnError(.algorithmNotAllowed)
    /// The credential id is longer than WebAuthn's 1023 bytes.
    public static let credentialIdTooLong = WebAuthnError(.credentialIdTooLong)
    /// The response names another credential than the authenticator data or the stored record.
    public static let credentialMismatch = WebAuthnError(.credentialMismatch)
    /// The response's `userHandle` is missing where it is needed, or is not the credential owner's.
    public static let userHandleMismatch = WebAuthnError(.userHandleMismatch)
    /// The signature does not verify with the credential's public key.
    public static let invalidSignature = WebAuthnError(.invalidSignature)
    /// The signature counter did not increase: a sign (not proof) that the authenticator was cloned.
    public static let clonedAuthenticator = WebAuthnError(.clonedAuthenticator)

    /// The attestation statement does not hold: wrong syntax for its format, a signature that
    /// does not verify, a certificate that breaks the format's rules, a key that differs from the
    /// credential's.
    public static let invalidAttestation = WebAuthnError(.invalidAttestation)
    /// The nonce in the attestation certificate is not SHA-256(authenticatorData ‖ clientDataHash).
    public static let nonceMismatch = WebAuthnError(.nonceMismatch)
    /// The certificate chain reaches a trusted root but does not verify at the given time
    /// (expired or not yet valid, a bad signature, a broken constraint).
    public static let certificateChainInvalid = WebAuthnError(.certificateChainInvalid)

    /// The App Attest key id is not SHA-256 of the attested public key.
    public static let keyIdMismatch = WebAuthnError(.keyIdMismatch)
    /// The App Attest AAGUID is for the other environment (development vs production).
    public static let environmentMismatch = WebAuthnError(.environmentMismatch)
    /// An App Attest assertion whose counter is not above the last one accepted.
    public static let replayedAssertion = WebAuthnError(.replayedAssertion)

    /// The same kind of error, with a more precise ``detail`` for logs.
    func with(_ detail: String) -> WebAuthnError {
        WebAuthnError(kind, detail)
    }

    /// `WebAuthnError.<code>`, followed by the detail when there is one.
    public var description: String {
        guard let detail else { return "WebAuthnError.\(kind.rawValue)" }
        return "WebAuthnError.\(kind.rawValue)(\(detail))"
    }

    /// Errors are equal when they are of the same kind.
    public static func == (lhs: WebAuthnError, rhs: WebAuthnError) -> Bool {
        lhs.kind == rhs.kind
    }
}
