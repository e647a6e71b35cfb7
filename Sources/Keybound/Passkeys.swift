import Foundation

/// Creates passkeys and signs in with them: the platform's own authenticator
/// (`ASAuthorizationPlatformPublicKeyCredentialProvider` on Apple platforms, through
/// `KeyboundApple`; `KeyboundEmulator`'s emulated one in tests).
///
/// The authenticator owns the whole ceremony on the device: it shows the system sheet, verifies
/// the user (Face ID, Touch ID, the passcode), keeps the private key, and builds
/// `clientDataJSON` itself from the challenge and the relying party. The app only hands over
/// what the server asked for (``PasskeyCreationOptions``, ``PasskeyRequestOptions``) and forwards
/// what comes back, `PublicKeyCredential.toJSON()` as a browser would send it; ``PasskeyLogin``
/// does both.
public protocol PasskeyAuthenticator: Sendable {
    /// Creates a passkey for the relying party and user the options name (WebAuthn
    /// `navigator.credentials.create`, `authenticatorMakeCredential`).
    ///
    /// - Returns: the new credential, ready to send as `PublicKeyCredential.toJSON()`.
    /// - Throws: ``KeyboundError``: `userCancel` (silent) when the user dismisses the sheet,
    ///   `biometryLockout`, `authenticationFailed`, `duplicateItem` when the authenticator already
    ///   holds one of the excluded credentials, `notSupported` when it cannot make any of the
    ///   offered algorithms, …
    func createCredential(_ options: PasskeyCreationOptions) async throws -> PasskeyRegistrationCredential

    /// Signs the server's challenge with a passkey of the relying party (WebAuthn
    /// `navigator.credentials.get`, `authenticatorGetAssertion`).
    ///
    /// - Returns: the assertion, ready to send as `PublicKeyCredential.toJSON()`.
    /// - Throws: ``KeyboundError``: `userCancel` (silent), `itemNotFound` when the device holds
    ///   no passkey the options allow, `invalidated` when an enrollment change destroyed it,
    ///   `biometryLockout`, `authenticationFailed`, …
    func getAssertion(_ options: PasskeyRequestOptions) async throws -> PasskeyAssertionCredential
}
