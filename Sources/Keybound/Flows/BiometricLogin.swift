import Foundation
import KeyboundWire

/// Biometric login, end to end: password login, offering biometrics, unlocking at launch,
/// invalidation and re-enrollment, lockout and fallback.
///
/// Two modes:
/// - ``Mode/token``: the refresh token lives in an item bound to the current biometric
///   enrollment; unlocking reads it after the OS verified the user and refreshes the session.
/// - ``Mode/deviceKey``: a P-256 key in secure hardware is registered with the server; unlocking
///   signs the server's single-use challenge after the OS verified the user.
///
/// ```swift
/// let login = BiometricLogin(client: client, device: .init(store: keychain, vault: enclave, verifier: la),
///                            configuration: .init(clientID: installID, serverID: "api.example.com"))
/// try await login.loginWithPassword(username: name, password: password)
/// try await login.enable()                        // after the user said yes
/// // next launch:
/// if try await login.state() == .enabled { try await login.unlock() }
/// ```
public actor BiometricLogin {
    /// Where the proof of "this device, this user" lives.
    public enum Mode: String, Sendable, Hashable {
        /// A refresh token in a biometric-bound item.
        case token
        /// A bound secure-hardware key and challenge–response login.
        case deviceKey
    }

    /// What the login button should show.
    public enum State: Sendable, Hashable {
        /// Biometric login is on and usable: show "Log in with Face ID".
        case enabled(BiometryType)
        /// Not turned on (or turned off): offer it after the next password login.
        case notEnabled
        /// It was on, but an enrollment change destroyed it: password login, then enable again.
        case invalidated
        /// On, but biometrics cannot be used now (lockout, not enrolled, no passcode).
        case unavailable(KeyboundError)
    }

    /// The flow's settings.
    public struct Configuration: Sendable {
        /// Identifies this app installation to the server: 1–128 of `A-Z a-z 0-9 . _ : -`
        /// (``ClientID``), the same on every launch.
        public var clientID: String
        /// The server id expected in signing payloads.
        public var serverID: String
        /// Token or device-key mode.
        public var mode: Mode
        /// The policy for the token item or the key. Default: current biometric enrollment.
        public var policy: AccessPolicy
        /// The device name shown in the user's device list.
        public var deviceName: String
        /// How the device key is protected, as reported to the server.
        public var keyProtection: KeyProtection
        /// The unlock prompt's reason.
        public var unlockReason: String
        /// The fallback button title ("Use Password"); nil for the system's.
        public var fallbackTitle: String?
        /// Names of the items and key Keybound keeps for this flow.
        public var namespace: String
        /// Whether the sessions this flow opens are bound to a DPoP key (RFC 9449) on this
        /// device, where the server supports it (default true): a key of the vault with
        /// ``DPoPKey/policy`` (no prompt: it signs every request), made at the first login, kept
        /// across launches, so a token copied off the device is useless. Where the vault cannot
        /// make one (the Simulator has no Secure Enclave), sessions are bearer sessions.
        public var bindSessionsWithDPoP: Bool

        /// Settings with the defaults most apps want: device-key mode, bound to the current
        /// biometric enrollment, a Secure Enclave key.
        ///
        /// - Parameters:
        ///   - clientID: a stable id of this installation (1–128 of `A-Z a-z 0-9 . _ : -`); a
        ///     new password login from the same client ends that client's previous session.
        ///   - serverID: the server's id, as its signing payloads name it (`keybound serve
        ///     --server-id`); a payload naming another server is refused.
        ///   - mode: ``Mode/deviceKey`` (the default) or ``Mode/token``.
        ///   - policy: the policy of the token item or the key.
        ///   - deviceName: the name the user sees in their device list.
        ///   - keyProtection: how the key is protected, as reported to the server.
        ///   - unlockReason: the reason the unlock prompt shows.
        ///   - fallbackTitle: the fallback button's title; nil for the system's, `""` to hide it.
        ///   - namespace: the prefix of this flow's item and key names; use another namespace
        ///     for a second account on the same device.
        ///   - bindSessionsWithDPoP: whether sessions are bound to a DPoP key on this device.
        public init(
            clientID: String, serverID: String, mode: Mode = .deviceKey,
            policy: AccessPolicy = .biometryCurrentSet,
            deviceName: String = "This device", keyProtection: KeyProtection = .secureEnclave,
            unlockReason: String = "Log in", fallbackTitle: String? = "Use Password",
            namespace: String = "keybound", bindSessionsWithDPoP: Bool = true
        ) {
            self.clientID = clientID
            self.serverID = serverID
            self.mode = mode
            self.policy = policy
            self.deviceName = deviceName
            self.keyProtection = keyProtection
            self.unlockReason = unlockReason
            self.fallbackTitle = fallbackTitle
            self.namespace = namespace
            self.bindSessionsWithDPoP = bindSessionsWithDPoP
        }
    }

    /// The client, holding the session this flow opens.
    public nonisolated let client: KeyboundClient
    private let device: DeviceBackends
    private let configuration: Configuration
    private let items: ProtectedStore
    private let keys: ProtectedKeys
    private let tokenName: ItemName
    private let keyName: ItemName
    private let deviceIDName: ItemName
    /// The id of the App Attest key that attested the binding, when there is one.
    private let appAttestKeyName: ItemName
    /// The DPoP key the flow's sessions are bound to.
    private let dpopKeyName: ItemName
    /// Whether the client already has the flow's DPoP key (or the vault could not make one).
    private var isDPoPKeyPrepared = false
    private let appAttest: (any AppAttestService)?
    private let clock: Clock
    /// Whether this flow already follows the client's token rotation.
    private var isKeepingRefreshTokenStored = false

    /// Creates the flow. Nothing is read or prompted until you call a method.
    ///
    /// - Parameters:
    ///   - client: the API client; the flow logs in through it and leaves the session there.
    ///   - device: the device's store, vault and verifier (`DeviceBackends.apple(service:)` from
    ///     KeyboundApple on iOS, an `EmulatedDevice` in tests).
    ///   - configuration: the flow's settings.
    ///   - clock: time, for payload expiry and the step-up window.
    ///   - appAttest: App Attest (`PlatformAppAttestService` from KeyboundApple), to prove to the
    ///     server that the device key was bound by a genuine copy of the app: ``enable()`` then
    ///     attests the binding, and each device-key login carries an assertion of the App Attest
    ///     key. Where App Attest is not supported (the Simulator), binding goes on unattested.
    /// - Throws: ``KeyboundError/invalidInput`` for a namespace that is not a valid item name or a
    ///   client id outside the grammar of ``ClientID``.
    public init(
        client: KeyboundClient, device: DeviceBackends, configuration: Configuration, clock: Clock = .system,
        appAttest: (any AppAttestService)? = nil
    ) throws {
        self.client = client
        self.appAttest = appAttest
        self.clock = clock
        self.device = device
        self.configuration = configuration
        items = ProtectedStore(store: device.store, verifier: device.verifier)
        keys = ProtectedKeys(vault: device.vault, markers: device.store, verifier: device.verifier)
        tokenName = try ItemName("\(configuration.namespace).refresh-token")
        keyName = try ItemName("\(configuration.namespace).device-key")
        deviceIDName = try ItemName("\(configuration.namespace).device-id")
        appAttestKeyName = try ItemName("\(configuration.namespace).app-attest-key-id")
        dpopKeyName = try ItemName("\(configuration.namespace).dpop-key")
        _ = try KeyboundError.validating { try ClientID(configuration.clientID) }
    }

    // MARK: - Password

    /// Logs in with the password (the first login, and the way back after invalidation,
    /// lockout or `usePassword`).
    @discardableResult
    public func loginWithPassword(username: String, password: String) async throws -> KeyboundClient.Session {
        // The server ends this client's previous session, whose refresh token an enabled token
        // item holds: keep the item current, or the next biometric login would fail.
        if configuration.mode == .token { await keepRefreshTokenStored() }
        try await prepareDPoPKey()
        return try await client.loginWithPassword(
            username: username, password: password, clientID: configuration.clientID)
    }

    // MARK: - State

    /// What the login screen should offer, without prompting.
    public func state() async throws -> State {
        let status: ProtectedItemStatus
        switch configuration.mode {
        case .token: status = try await items.status(tokenName)
        case .deviceKey:
            status = try await keys.status(keyName)
        }
        switch status {
        case .absent: return .notEnabled
        case .invalidated: return .invalidated
        case .present:
            let availability = await device.verifier.availability()
            if let error = availability.biometryError, !configuration.policy.acceptsPasscodeAlone {
                return .unavailable(error)
            }
            return .enabled(availability.biometryType)
        }
    }

    /// The bound device's server id (device-key mode), if any.
    public func boundDeviceID() async throws -> String? {
        guard try await items.status(deviceIDName) == .present else { return nil }
        return try await items.read(deviceIDName, as: String.self, verification: nil)
    }

    // MARK: - Enable and disable

    /// Turns biometric login on, after a password login and after the user said yes.
    ///
    /// Token mode stores the current refresh token in a biometric-bound item. Device-key mode
    /// creates a key in secure hardware and registers it (the server requires a password login
    /// within its step-up window, and revokes this client's previous key).
    /// - Throws: `sessionExpired` without a session; device errors (`biometryNotEnrolled`, …);
    ///   `server` with `app_attest_required` (recovery `none`) when the server binds only attested
    ///   devices and this one cannot attest.
    public func enable() async throws {
        guard let session = await client.currentSession else {
            throw KeyboundError(
                .sessionExpired, message: "log in with the password before enabling biometrics")
        }
        if let reason = await device.verifier.availability().biometryError,
            configuration.policy.requiresBiometry
        {
            throw reason
        }
        switch configuration.mode {
        case .token:
            try await items.store(session.refreshToken, as: tokenName, policy: configuration.policy)
            await keepRefreshTokenStored()
        case .deviceKey:
            // Binding needs a password login within the server's step-up window, which the server
            // states: check before the old key is replaced, so a refused bind does not leave a key
            // the server does not know.
            try StepUp.require(try await client.me(), now: clock.now(), for: "binding a device")
            let publicKey = try await keys.createKey(keyName, policy: configuration.policy)
            do {
                let attestation = try await attestBinding(of: publicKey)
                let deviceID = try await client.bindDevice(
                    publicKey: publicKey, name: configuration.deviceName,
                    keyProtection: configuration.keyProtection, appAttestation: attestation)
                try await items.store(deviceID, as: deviceIDName, policy: .noVerification)
                if let attestation {
                    try await items.store(attestation.keyID, as: appAttestKeyName, policy: .noVerification)
                } else {
                    try await items.delete(appAttestKeyName)
                }
            } catch {
                // Leave a clean "not enabled" state rather than a key no server knows.
                try? await keys.deleteKey(keyName)
                try? await items.delete(deviceIDName)
                try? await items.delete(appAttestKeyName)
                // The server binds only attested devices and this one could not attest (no App
                // Attest service, or an unsupported one): binding again cannot help, unlike after
                // a login or approval refused for a device bound before the requirement.
                if let refused = error as? KeyboundError, refused.serverCode == .appAttestRequired {
                    throw KeyboundError(
                        refused.code, native: refused.native, message: refused.message,
                        serverCode: refused.serverCode, recovery: KeyboundError.Recovery.none)
                }
                throw error
            }
        }
    }

    /// Turns biometric login off: the device key is revoked on the server (when a session
    /// allows it) and every item and key of this flow is deleted.
    public func disable() async throws {
        if let deviceID = try? await boundDeviceID(), await client.currentSession != nil {
            try? await client.revokeDevice(deviceID)
        }
        try await items.delete(tokenName)
        try await items.delete(deviceIDName)
        try await items.delete(appAttestKeyName)
        try await keys.deleteKey(keyName)
    }

    // MARK: - Unlock

    /// Logs in with Face ID / Touch ID (the launch path).
    ///
    /// - Throws: ``KeyboundError`` with its recovery: `invalidated` (material removed; password
    ///   login and ``enable()`` again), `userCancel` (`silent`), `userFallback` (`usePassword`),
    ///   `biometryLockout` (`usePasscode`: see ``clearLockout(passcodeReason:)``), `itemNotFound`
    ///   (not enabled), or a server error (a revoked device: `usePassword`; a device bound without
    ///   App Attest on a server that now requires it, `app_attest_required`: `reenroll`).
    @discardableResult
    public func unlock(reason: String? = nil) async throws -> KeyboundClient.Session {
        let prompt = try VerificationPrompt(
            reason: reason ?? configuration.unlockReason, fallbackTitle: configuration.fallbackTitle)
        switch configuration.mode {
        case .token:
            switch try await items.status(tokenName) {
            case .absent: throw KeyboundError.itemNotFound
            case .invalidated:
                // Throws `invalidated` and removes the dead item and its marker, before any prompt.
                _ = try await items.read(tokenName, verification: nil)
            case .present: break
            }
            let verification = try await device.verifier.verify(configuration.policy, prompt: prompt)
            let refreshToken = try await items.read(tokenName, as: String.self, verification: verification)
            try await prepareDPoPKey()
            let session = try await client.resume(refreshToken: refreshToken)
            try await items.store(session.refreshToken, as: tokenName, policy: configuration.policy)
            await keepRefreshTokenStored()
            return session
        case .deviceKey:
            switch try await keys.status(keyName) {
            case .absent: throw KeyboundError.itemNotFound
            case .invalidated:
                // Throws `invalidated` and removes the dead key and its marker.
                _ = try await keys.sign(Data(), with: keyName, verification: nil)
            case .present: break
            }
            guard let deviceID = try await boundDeviceID() else { throw KeyboundError.itemNotFound }
            let challenge = try await client.loginChallenge(deviceID: deviceID)
            _ = try PayloadCheck.parse(
                challenge.payload, purpose: .login, serverID: configuration.serverID, deviceID: deviceID,
                now: clock.now())
            let verification = try await device.verifier.verify(configuration.policy, prompt: prompt)
            let signature = try await keys.sign(challenge.payload, with: keyName, verification: verification)
            try await prepareDPoPKey()
            return try await client.loginWithDevice(
                challengeID: challenge.challengeID, signature: signature,
                appAttestAssertion: try await appAttestAssertion(over: challenge.payload))
        }
    }

    // MARK: - App Attest

    /// The App Attest attestation of a binding of `publicKey`, over the server's challenge
    /// followed by the key (so it vouches for this key alone); nil without a supported service.
    private func attestBinding(of publicKey: Data) async throws -> (keyID: Data, attestation: Data)? {
        guard let appAttest, await appAttest.isSupported else { return nil }
        let challenge = try await client.appAttestChallenge()
        // A key is attested once: each binding gets its own.
        let keyID = try await appAttest.generateKey()
        let attestation = try await appAttest.attestKey(
            keyID, clientData: AppAttestClientData.binding(challenge: challenge, publicKey: publicKey))
        return (keyID, attestation)
    }

    /// The App Attest key's assertion over `payload`, when the binding was attested.
    private func appAttestAssertion(over payload: Data) async throws -> Data? {
        guard let appAttest, try await items.status(appAttestKeyName) == .present else { return nil }
        let keyID = try await items.read(appAttestKeyName, verification: nil)
        return try await appAttest.generateAssertion(keyID, clientData: payload)
    }

    /// After `biometryLockout`: asks for the device passcode, which clears the lockout.
    public func clearLockout(passcodeReason: String = "Enter your passcode to use biometrics again")
        async throws
    {
        _ = try await device.verifier.verify(
            .devicePasscode, prompt: VerificationPrompt(reason: passcodeReason))
    }

    /// Gives the client the flow's DPoP key (``Configuration/bindSessionsWithDPoP``), made in the
    /// vault the first time; once per flow. A vault that cannot make such a key leaves the
    /// sessions bearer sessions.
    private func prepareDPoPKey() async throws {
        guard configuration.bindSessionsWithDPoP, !isDPoPKeyPrepared else { return }
        do {
            await client.bindSessions(to: try await DPoPKey.prepare(in: device.vault, name: dpopKeyName))
        } catch let error as KeyboundError where error == .notSupported {}
        isDPoPKeyPrepared = true
    }

    /// Keeps the stored refresh token current when the client rotates it (token mode).
    private func keepRefreshTokenStored() async {
        guard !isKeepingRefreshTokenStored else { return }
        isKeepingRefreshTokenStored = true
        let items = items
        let tokenName = tokenName
        let policy = configuration.policy
        await client.onTokensChanged { session in
            guard let session, (try? await items.status(tokenName)) == .present else { return }
            try? await items.store(session.refreshToken, as: tokenName, policy: policy)
        }
    }
}

/// The three backends of one device: its secure store, its key vault, its user verifier.
///
/// The flows take one value of this type so that an app passes "this device" once: on iOS
/// `DeviceBackends.apple(service:)` from KeyboundApple (Keychain, Secure Enclave,
/// LocalAuthentication), in tests `DeviceBackends(emulatedDevice)`.
public struct DeviceBackends: Sendable {
    /// Holds protected items (the refresh token, the bound device's id) and invalidation markers.
    public let store: any SecureStore
    /// Holds the device's signing keys.
    public let vault: any KeyVault
    /// Shows the system prompt and reports what can be verified.
    public let verifier: any UserVerifier

    /// Combines three separate backends.
    public init(store: any SecureStore, vault: any KeyVault, verifier: any UserVerifier) {
        self.store = store
        self.vault = vault
        self.verifier = verifier
    }

    /// One object that is all three (the emulator, or a combined Apple backend).
    public init(_ device: some SecureStore & KeyVault & UserVerifier) {
        self.init(store: device, vault: device, verifier: device)
    }
}

/// Checks the server's signing payload before anything is shown or signed.
enum PayloadCheck {
    static func parse(
        _ bytes: Data, purpose: SigningPayload.Purpose, serverID: String, deviceID: String, now: Date
    ) throws -> SigningPayload {
        let payload: SigningPayload
        do { payload = try SigningPayload(parsing: bytes) } catch {
            throw KeyboundError(.payloadMismatch, message: "the payload is not canonical: \(error)")
        }
        guard payload.purpose == purpose else {
            throw KeyboundError(
                .payloadMismatch, message: "the payload is for \(payload.purpose), not \(purpose)")
        }
        guard payload.server == serverID else {
            throw KeyboundError(.payloadMismatch, message: "the payload names another server")
        }
        guard payload.device == deviceID else {
            throw KeyboundError(.payloadMismatch, message: "the payload names another device")
        }
        guard payload.expires > now else {
            throw KeyboundError(.payloadMismatch, message: "the payload has expired")
        }
        return payload
    }
}
