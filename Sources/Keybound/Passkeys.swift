import Foundation

/// Creates passkeys and signs in with them: the platform's own authenticator
/// (`ASAuthorizationPlatformPublicKeyCredentialProvider` on Apple platforms, through
/// `KeyboundApple`; `KeyboundEmulator`'s emulated one in tests).
///
/// The authenticator owns the whole ceremony on the device: it shows the system sheet, verifies
/// the user (Face ID, Touch ID, the passcode), keeps the private key, and builds
/// `clientDataJSON` itself from the challenge and the relying party. The app only hands over
/// what the server asked for (``PasskeyRegistrationRequest``, ``PasskeyAssertionRequest``) and
/// forwards what comes back, which the SDK sends as `PublicKeyCredential.toJSON()`, as a browser
/// would; ``PasskeyLogin`` does both.
public protocol PasskeyAuthenticator: Sendable {
    /// Creates a passkey for the relying party and user the request names (WebAuthn
    /// `navigator.credentials.create`, `authenticatorMakeCredential`).
    ///
    /// - Returns: the new credential: the parts of WebAuthn's `RegistrationResponseJSON`.
    /// - Throws: ``KeyboundError``: `userCancel` (silent) when the user dismisses the sheet,
    ///   `biometryLockout`, `authenticationFailed`, `duplicateItem` when the authenticator already
    ///   holds one of the excluded credentials, `notSupported` when it cannot make any of the
    ///   offered algorithms, …
    func createCredential(_ request: PasskeyRegistrationRequest) async throws -> PasskeyRegistration

    /// Signs the server's challenge with a passkey of the relying party (WebAuthn
    /// `navigator.credentials.get`, `authenticatorGetAssertion`).
    ///
    /// - Returns: the assertion: the parts of WebAuthn's `AuthenticationResponseJSON`.
    /// - Throws: ``KeyboundError``: `userCancel` (silent), `itemNotFound` when the device holds
    ///   no passkey the request allows, `invalidated` when an enrollment change destroyed it,
    ///   `biometryLockout`, `authenticationFailed`, …
    func getAssertion(_ request: PasskeyAssertionRequest) async throws -> PasskeyAssertion
}

/// Whether the authenticator must verify the user (WebAuthn `UserVerificationRequirement`).
public enum PasskeyUserVerification: String, Sendable, Hashable, CaseIterable {
    /// The ceremony fails unless the user is verified (what Keybound's server asks for).
    case required
    /// Verify the user if the authenticator can.
    case preferred
    /// Do not verify the user if it can be avoided.
    case discouraged
}

/// What the server asks an authenticator to create: WebAuthn's
/// `PublicKeyCredentialCreationOptions`, from `POST /v1/webauthn/register/options`.
public struct PasskeyRegistrationRequest: Sendable, Hashable {
    /// The relying party's id, a registrable domain (`rp.id`).
    public let relyingPartyID: String
    /// The relying party's name, for the system sheet (`rp.name`).
    public let relyingPartyName: String
    /// The user handle: opaque bytes, never the username (`user.id`).
    public let userID: Data
    /// The account's name (`user.name`).
    public let userName: String
    /// A friendlier name for the account (`user.displayName`).
    public let userDisplayName: String
    /// The single-use challenge.
    public let challenge: Data
    /// COSE algorithm identifiers the server accepts, most preferred first (-7 is ES256).
    public let algorithms: [Int]
    /// Credentials the account already has: an authenticator holding one must not make another.
    public let excludedCredentialIDs: [Data]
    /// Whether the user must be verified.
    public let userVerification: PasskeyUserVerification
    /// The attestation the server asks for: `none`, `indirect` or `direct`.
    public let attestation: String

    /// A request from its parts.
    public init(
        relyingPartyID: String, relyingPartyName: String, userID: Data, userName: String,
        userDisplayName: String, challenge: Data, algorithms: [Int] = [-7],
        excludedCredentialIDs: [Data] = [],
        userVerification: PasskeyUserVerification = .required, attestation: String = "none"
    ) {
        self.relyingPartyID = relyingPartyID
        self.relyingPartyName = relyingPartyName
        self.userID = userID
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.challenge = challenge
        self.algorithms = algorithms
        self.excludedCredentialIDs = excludedCredentialIDs
        self.userVerification = userVerification
        self.attestation = attestation
    }
}

/// What the server asks an authenticator to sign: WebAuthn's
/// `PublicKeyCredentialRequestOptions`, from `POST /v1/webauthn/login/options`.
public struct PasskeyAssertionRequest: Sendable, Hashable {
    /// The relying party's id (`rpId`).
    public let relyingPartyID: String
    /// The single-use challenge.
    public let challenge: Data
    /// The credentials that may answer; empty: any passkey of the relying party the user picks.
    public let allowedCredentialIDs: [Data]
    /// Whether the user must be verified.
    public let userVerification: PasskeyUserVerification

    /// A request from its parts.
    public init(
        relyingPartyID: String, challenge: Data, allowedCredentialIDs: [Data] = [],
        userVerification: PasskeyUserVerification = .required
    ) {
        self.relyingPartyID = relyingPartyID
        self.challenge = challenge
        self.allowedCredentialIDs = allowedCredentialIDs
        self.userVerification = userVerification
    }
}

// The one place the server's ceremony options become the authenticator's requests. What the
// authenticator returns, ``PasskeyRegistration`` and ``PasskeyAssertion``, is KeyboundWire's
// message itself.

extension PasskeyRegistrationRequest {
    /// The authenticator's view of the server's creation options.
    package init(_ options: PasskeyCreationOptions) {
        self.init(
            relyingPartyID: options.rpID, relyingPartyName: options.rpName, userID: options.userID,
            userName: options.userName, userDisplayName: options.userDisplayName,
            challenge: options.challenge,
            algorithms: options.algorithms, excludedCredentialIDs: options.excludeCredentials.map(\.id),
            userVerification: PasskeyUserVerification(rawValue: options.userVerification) ?? .preferred,
            attestation: options.attestation.rawValue)
    }
}

extension PasskeyAssertionRequest {
    /// The authenticator's view of the server's request options.
    package init(_ options: PasskeyRequestOptions) {
        self.init(
            relyingPartyID: options.rpID, challenge: options.challenge,
            userVerification: PasskeyUserVerification(rawValue: options.userVerification) ?? .preferred)
    }
}
