#if canImport(Combine) && canImport(LocalAuthentication)
    import Combine
    import Foundation
    import Keybound
    import KeyboundApple

    /// The example's state and every action it takes, on the main actor.
    ///
    /// All Keybound calls are `async`: the system prompts and Keychain work happen off the main
    /// thread; the screens only await results. Uses the SDK's flows: ``BiometricLogin`` in
    /// device-key mode (a Secure Enclave key bound to the current Face ID enrollment),
    /// ``TransactionApproval`` and ``AppLock``.
    ///
    /// (`ObservableObject` rather than `@Observable`: the Observation macros of the toolchain
    /// used for the Linux SDK check do not match the iOS 17.0 SDK.)
    @MainActor
    public final class AppModel: ObservableObject {
        /// Which screen the app shows.
        public enum Phase: Equatable, Sendable {
            /// Password login (and "Log in with Face ID" when this device is bound).
            case loggedOut
            /// Logged in, in use.
            case loggedIn
            /// Came back from the background after the grace period: verify to continue.
            case locked
        }

        /// The current screen.
        @Published public private(set) var phase: Phase = .loggedOut
        /// What the login screen offers for biometrics.
        @Published public private(set) var biometricState: BiometricLogin.State = .notEnabled
        /// Who is logged in, once known.
        @Published public private(set) var username: String?
        /// A message for the user; nil when there is nothing to say (a cancel says nothing).
        @Published public var message: String?
        /// Whether Settings should be offered (nothing enrolled, no passcode).
        @Published public private(set) var offerSettings = false
        /// Whether the passcode should be offered to clear a biometric lockout.
        @Published public private(set) var offerPasscode = false
        /// Busy while a request or prompt is under way.
        @Published public private(set) var busy = false
        /// The transfer waiting for the user's confirmation: amount, asset and the whole
        /// recipient as the payload the key will sign says them.
        @Published public private(set) var pendingApproval: PendingApproval?

        private let client: KeyboundClient
        private let login: BiometricLogin
        private let appLock: AppLock
        private let device: DeviceBackends
        private let serverID: String

        /// Wires the Apple backends (Keychain, Secure Enclave, LocalAuthentication) to the flows.
        /// Nonisolated, so a SwiftUI `App` can make the model in a property initializer.
        nonisolated public init(configuration: ExampleConfiguration) throws {
            let verifier = LocalAuthenticationVerifier()
            device = DeviceBackends(
                store: try KeychainStore(service: configuration.keychainService),
                vault: try SecureEnclaveVault(namespace: configuration.keychainService),
                verifier: verifier)
            serverID = configuration.serverID
            client = KeyboundClient(baseURL: configuration.serverURL)
            login = try BiometricLogin(
                client: client, device: device,
                configuration: .init(
                    clientID: configuration.installationID, serverID: configuration.serverID,
                    mode: .deviceKey, policy: .biometryCurrentSet, deviceName: configuration.deviceName,
                    keyProtection: .secureEnclave, unlockReason: "Log in to Keybound Example"))
            appLock = try AppLock(verifier: verifier, gracePeriod: 30)
        }

        // MARK: Login

        /// Refreshes what the login screen offers (never prompts).
        public func refreshBiometricState() async {
            biometricState = (try? await login.state()) ?? .notEnabled
        }

        /// "Log in with Face ID", or nil when the button must not show (this device is not bound).
        public var biometricLoginTitle: String? {
            guard case .enabled(let type) = biometricState else { return nil }
            return "Log in with \(type.displayName)"
        }

        /// Whether to offer "Enable Face ID" (not bound yet, or invalidated by an enrollment change).
        public var canEnableBiometrics: Bool {
            switch biometricState {
            case .notEnabled, .invalidated: true
            case .enabled, .unavailable: false
            }
        }

        /// The sensor's name for buttons ("Face ID" until the device says otherwise).
        public var biometryName: String {
            if case .enabled(let type) = biometricState { return type.displayName }
            return "Face ID"
        }

        public func loginWithPassword(username: String, password: String) async {
            await run {
                try await self.login.loginWithPassword(username: username, password: password)
                await self.startSession()
            }
        }

        /// Challenge–response login: the Secure Enclave key signs the server's challenge after
        /// Face ID.
        public func loginWithBiometrics() async {
            await run {
                try await self.login.unlock()
                await self.startSession()
            }
        }

        /// Creates the Secure Enclave key and binds this device (right after a password login).
        public func enableBiometrics() async {
            await run {
                try await self.login.enable()
                await self.refreshBiometricState()
                self.message = "\(self.biometryName) login is on."
            }
        }

        public func disableBiometrics() async {
            await run {
                try await self.login.disable()
                await self.refreshBiometricState()
            }
        }

        /// After a lockout: the device passcode clears it.
        public func clearLockout() async {
            await run {
                try await self.login.clearLockout()
                await self.refreshBiometricState()
            }
        }

        public func logout() async {
            try? await client.logout()
            await appLock.sessionEnded()
            username = nil
            pendingApproval = nil
            phase = .loggedOut
            await refreshBiometricState()
        }

        private func startSession() async {
            await appLock.sessionStarted()
            username = try? await client.me().username
            phase = .loggedIn
            await refreshBiometricState()
        }

        // MARK: Approval

        /// Asks the server for a transfer approval; ``pendingApproval`` then holds what the
        /// payload itself says (amount, asset, whole recipient), for the confirmation screen.
        public func requestTransfer(amount: String, asset: String, to recipient: String) async {
            await run {
                let approvals = try await self.approvals()
                let action = try TransferAction(amount: DecimalAmount(amount), asset: asset, to: recipient)
                self.pendingApproval = try await approvals.request(.transfer(action))
            }
        }

        /// The user tapped "Send" on the confirmation screen that shows ``pendingApproval``: only
        /// now may the key sign. Verifies afresh (Face ID shows the prompt's text only after a
        /// failed match: the confirmation screen is what the user reads), signs the exact payload
        /// bytes inside the Secure Enclave and confirms with the server.
        public func confirmPendingApproval() async {
            guard let pending = pendingApproval else { return }
            await run {
                let response = try await self.approvals().approve(pending.confirm())
                self.pendingApproval = nil
                self.message = response.status == .approved ? "Approved." : "The server did not approve it."
            }
        }

        private func approvals() async throws -> TransactionApproval {
            guard let deviceID = try await login.boundDeviceID() else {
                throw KeyboundError(
                    .itemNotFound,
                    message: "Enable \(biometryName) first: approvals are signed by this device")
            }
            return try TransactionApproval(
                client: client, device: device, deviceID: deviceID, serverID: serverID)
        }

        // MARK: App lock

        public func didEnterBackground() async {
            await appLock.didEnterBackground()
        }

        /// Locks the app when it stayed in the background past the grace period; sends the user
        /// to the password when the session is too old.
        public func willEnterForeground() async {
            guard phase != .loggedOut else { return }
            switch await appLock.willEnterForeground() {
            case .unlocked: break
            case .locked: phase = .locked
            case .requiresPassword:
                await logout()
                message = "Your session ended. Log in with your password."
            }
        }

        public func unlock() async {
            await run {
                try await self.appLock.unlock(reason: "Unlock Keybound Example")
                self.phase = .loggedIn
            }
        }

        // MARK: Errors

        /// Runs `body`, turning any error into what the user should see: a cancel says nothing,
        /// the error's recovery decides the rest.
        private func run(_ body: @MainActor () async throws -> Void) async {
            busy = true
            message = nil
            offerSettings = false
            offerPasscode = false
            defer { busy = false }
            do {
                try await body()
            } catch let error as KeyboundError {
                await show(error)
            } catch let error as WireError {
                message = "Check your input: \(error.detail)"
            } catch {
                message = "Something went wrong: \(error.localizedDescription)"
            }
        }

        private func show(_ error: KeyboundError) async {
            switch error.recovery {
            case .silent:
                message = nil
            case .usePassword:
                if phase == .locked { await logout() }
                message = "Log in with your password."
            case .retry:
                message = error.code == .network ? "The server cannot be reached. Try again." : "Try again."
            case .retryLater:
                message = "Too many attempts. Try again later."
            case .usePasscode:
                message =
                    "\(biometryName) is locked after too many attempts. Enter your passcode to use it again."
                offerPasscode = true
            case .enrollBiometrics:
                message = "Set up \(biometryName) in Settings first."
                offerSettings = true
            case .setPasscode:
                message = "Set a device passcode in Settings first."
                offerSettings = true
            case .reenroll:
                await refreshBiometricState()
                message =
                    "\(biometryName) changed on this device. Log in with your password, then enable it again."
            case .waitForUnlock:
                message = "Unlock your device and try again."
            case .none:
                message =
                    error.code == .notSupported
                    ? "This device has no Secure Enclave (the Simulator has none)."
                    : "\(error.code): \(error.message ?? "failed")"
            }
        }
    }

    /// Where the example finds its server and how it names itself.
    public struct ExampleConfiguration: Sendable {
        public var serverURL: URL
        public var serverID: String
        public var keychainService: String
        public var installationID: String
        public var deviceName: String

        public init(
            serverURL: URL, serverID: String, keychainService: String, installationID: String,
            deviceName: String
        ) {
            self.serverURL = serverURL
            self.serverID = serverID
            self.keychainService = keychainService
            self.installationID = installationID
            self.deviceName = deviceName
        }

        /// From Info.plist (`KeyboundServerURL`, `KeyboundServerID`) and a per-installation id.
        public static func fromMainBundle() -> ExampleConfiguration {
            let bundle = Bundle.main
            let defaults = UserDefaults.standard
            let url = (bundle.object(forInfoDictionaryKey: "KeyboundServerURL") as? String).flatMap(
                URL.init(string:))
            let installationKey = "KeyboundExample.installationID"
            let installationID = defaults.string(forKey: installationKey) ?? UUID().uuidString
            defaults.set(installationID, forKey: installationKey)
            return ExampleConfiguration(
                serverURL: url ?? URL(string: "http://localhost:8420")!,
                serverID: bundle.object(forInfoDictionaryKey: "KeyboundServerID") as? String ?? "keybound",
                keychainService: bundle.bundleIdentifier ?? "com.example.keybound",
                installationID: installationID,
                deviceName: "Keybound Example")
        }
    }
#endif
