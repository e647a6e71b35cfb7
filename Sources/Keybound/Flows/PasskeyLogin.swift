import Foundation

/// Passkeys, end to end: sign up with a passkey, sign in with one, add one to a signed-in
/// account, list and remove them. Every session it opens lives in ``client``, like the sessions
/// of ``BiometricLogin``.
///
/// The ``PasskeyAuthenticator`` runs each ceremony on the device (the system sheet, Face ID, the
/// key in secure hardware); this flow carries the server's options to it and its credential back.
/// A dismissed sheet is `userCancel` (recovery `silent`): show nothing.
///
/// ```swift
/// let passkeys = PasskeyLogin(client: client, authenticator: PlatformPasskeyAuthenticator { window },
///                             clientID: installationID)
/// try await passkeys.signUp(username: "ada")      // a new account, signed in
/// try await passkeys.signIn()                     // next time: pick the passkey, no username
/// ```
public actor PasskeyLogin {
    /// The client, holding the session this flow opens.
    public nonisolated let client: KeyboundClient
    private let authenticator: any PasskeyAuthenticator
    private let clientID: String?
    private let clock: Clock

    /// Creates the flow. Nothing is sent or shown until you call a method.
    ///
    /// - Parameters:
    ///   - client: the API client; the flow signs in through it and leaves the session there.
    ///   - authenticator: the device's passkeys (`PlatformPasskeyAuthenticator` from
    ///     KeyboundApple, an `EmulatedPasskeyAuthenticator` in tests).
    ///   - clientID: identifies this installation, as in ``KeyboundClient/loginWithPassword(username:password:clientID:)``:
    ///     a new sign-in from the same client ends its previous session. nil: the server makes one
    ///     per session.
    ///   - clock: time, for the step-up window of ``addPasskey(displayName:)``.
    public init(
        client: KeyboundClient, authenticator: any PasskeyAuthenticator, clientID: String? = nil,
        clock: Clock = .system
    ) {
        self.client = client
        self.authenticator = authenticator
        self.clientID = clientID
        self.clock = clock
    }

    /// Creates an account whose only credential is a passkey, and signs it in: creating the
    /// passkey verified the user.
    ///
    /// - Parameters:
    ///   - username: the new account's name; it must be free.
    ///   - displayName: the name the system sheet shows (default: the username).
    /// - Returns: the new account's session, which ``client`` now holds.
    /// - Throws: ``KeyboundError``: `invalidInput` for a username outside the server's grammar,
    ///   `server` (`username_taken`, throttled sign-ups), and what the authenticator throws
    ///   (`userCancel`, `biometryLockout`, …).
    @discardableResult
    public func signUp(username: String, displayName: String? = nil) async throws -> KeyboundClient.Session {
        let request = try await client.passkeySignUpRequest(
            username: username, displayName: displayName, clientID: clientID)
        return try await client.signUpWithPasskey(try await authenticator.createCredential(request))
    }

    /// Signs in with a passkey.
    ///
    /// - Parameter username: whose passkeys may answer; nil (the default) lets the user pick any
    ///   passkey of this site the device holds.
    /// - Returns: the session, which ``client`` now holds.
    /// - Throws: ``KeyboundError``: what the authenticator throws (`userCancel`, `itemNotFound`
    ///   when the device holds no passkey for the site, `invalidated`, `biometryLockout`, …), or
    ///   `server` (`unknown_credential` for a passkey the account no longer has, `throttled`).
    @discardableResult
    public func signIn(username: String? = nil) async throws -> KeyboundClient.Session {
        let request = try await client.passkeyLoginRequest(username: username, clientID: clientID)
        return try await client.loginWithPasskey(try await authenticator.getAssertion(request))
    }

    /// Adds a passkey on this device to the signed-in account.
    ///
    /// The server takes it only within its step-up window after a password or passkey sign-in;
    /// the flow checks that window first, so an expired one never prompts the user for nothing.
    /// - Parameter displayName: the name the system sheet shows (default: the username).
    /// - Returns: the new passkey as the account's list shows it (its id removes it).
    /// - Throws: ``KeyboundError``: `sessionExpired` without a session, `server`
    ///   (`step_up_required`, recovery `usePassword`: sign in again first), and what the
    ///   authenticator throws (`duplicateItem` when this device already holds a passkey of the account).
    @discardableResult
    public func addPasskey(displayName: String? = nil) async throws -> PasskeyInfo {
        try StepUp.require(try await client.me(), now: clock.now(), for: "adding a passkey")
        let request = try await client.addPasskeyRequest(displayName: displayName)
        return try await client.addPasskey(try await authenticator.createCredential(request))
    }

    /// The signed-in account's passkeys, oldest first.
    public func passkeys() async throws -> [PasskeyInfo] {
        try await client.passkeys()
    }

    /// Removes one of the signed-in account's passkeys (the server refuses the last one of an
    /// account without a password: `last_passkey`). The passkey stays on the device that holds
    /// it, where the user deletes it in Settings; it can no longer sign in.
    public func removePasskey(_ passkeyID: String) async throws {
        try await client.removePasskey(passkeyID)
    }
}
