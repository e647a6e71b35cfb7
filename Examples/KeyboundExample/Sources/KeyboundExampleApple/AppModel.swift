#if canImport(SwiftUI) && canImport(LocalAuthentication)
    import Foundation
    import Keybound
    import KeyboundApple
    import KeyboundWire
    import Combine

    /// The example's state and every action it takes, on the main actor. All Keybound calls are
    /// `async`: the system prompts and Keychain work happen off the main thread, the UI only
    /// awaits their results. (`ObservableObject` rather than `@Observable`: the Observation
    /// macros of the toolchain here do not match the iOS 17.0 SDK this example is checked with.)
    @MainActor
    final class AppModel: ObservableObject {
        /// Which screen the app shows.
        enum Phase: Equatable {
            /// Password login (and "Log in with Face ID" when this device is bound).
            case loggedOut
            /// Logged in, in use.
            case loggedIn
            /// Came back from the background after the grace period: verify to continue.
            case locked
        }

        @Published private(set) var phase: Phase = .loggedOut
        /// What the login screen offers for biometrics.
        @Published private(set) var biometricState: BiometricLogin.State = .notEnabled
        /// Who is logged in, once known.
        @Published private(set) var username: String?
        /// A message for the user; nil when there is nothing to say (a cancel says nothing).
        @Published var message: String?
        /// Whether Settings should be offered (nothing enrolled, no passcode).
        @Published private(set) var offerSettings = false
        /// Whether the passcode should be offered to clear a biometric lockout.
        @Published private(set) var offerPasscode = false
        /// Busy while a request or prompt is under way.
        @Published private(set) var busy = false

        let login: BiometricLogin
        let appLock: AppLock
        private let client: KeyboundClient
        private let device: DeviceBackends
        private let serverID: String

        init(configuration: ExampleConfiguration) throws {
            let verifier = LocalAuthenticationVerifier()
            device = DeviceBackends(
                store: try KeychainStore(service: configuration.keychainService),
                vault: try SecureEnclaveVault(namespace: configuration.keychainService),
                verifier: verifier)
            serverID = configuration.serverID
            let client = KeyboundClient(baseURL: configuration.serverURL)
            self.client = client
            login = try BiometricLogin(
                client: client, device: device,
                configuration: .init(
                    clientID: configuration.installationID, serverID: configuration.serverID,
                    mode: .deviceKey, policy: .biometryCurrentSet, deviceName: configuration.deviceName,
                    keyProtection: .secureEnclave, unlockReason: "Log in to Keybound Example"))
            appLock = try AppLock(verifier: verifier, gracePeriod: 30)
        }

        // MARK: Login

        /// Refreshes what the login screen offers (no prompt).
        func refreshBiometricState() async {
            biometricState = (try? await login.state()) ?? .notEnabled
        }

        /// The "Log in with Face ID" title, or nil when the button must not show (not bound).
        var biometricLoginTitle: String? {
            guard case .enabled(let type) = biometricState else { return nil }
            return "Log in with \(type.displayName)"
        }

        /// Whether to offer "Enable Face ID" (logged in, not bound yet or invalidated).
        var canEnableBiometrics: Bool {
            switch biometricState {
            case .notEnabled, .invalidated: true
            case .enabled, .unavailable: false
            }
        }

        func loginWithPassword(username: String, password: String) async {
            await run {
                try await self.login.loginWithPassword(username: username, password: password)
                await self.startSession()
            }
        }

        func loginWithBiometrics() async {
            await run {
                try await self.login.unlock()
                await self.startSession()
            }
        }

        /// Creates the Secure Enclave key and binds this device (right after a password login).
        func enableBiometrics() async {
            await run {
                try await self.login.enable()
                await self.refreshBiometricState()
                self.message = "\(self.biometryName) login is on."
            }
        }

        func disableBiometrics() async {
            await run {
                try await self.login.disable()
                await self.refreshBiometricState()
            }
        }

        /// After a lockout: the device passcode clears it.
        func clearLockout() async {
            await run {
                try await self.login.clearLockout()
                await self.refreshBiometricState()
            }
        }

        func logout() async {
            try? await client.logout()
            await appLock.sessionEnded()
            username = nil
            phase = .loggedOut
            await refreshBiometricState()
        }

        private func startSession() async {
            await appLock.sessionStarted()
            username = try? await client.me().username
            phase = .loggedIn
            await refreshBiometricState()
        }

        var biometryName: String {
            if case .enabled(let type) = biometricState { return type.displayName }
            return "Face ID"
        }

        // MARK: Approval

        /// Asks the server for a transfer approval and checks the payload it signs.
        func requestTransfer(amount: String, asset: String, to recipient: String) async -> TransactionApproval
            .Pending?
        {
            var pending: TransactionApproval.Pending?
            await run {
                let approvals = try await self.approvals()
                let action = try TransferAction(amount: DecimalAmount(amount), asset: asset, to: recipient)
                pending = try await approvals.request(.transfer(action))
            }
            return pending
        }

        /// Verifies afresh (the prompt shows the payload's own amount, asset and recipient),
        /// signs the exact payload and confirms. Returns whether the server approved.
        func approve(_ pending: TransactionApproval.Pending) async -> Bool {
            var approved = false
            await run {
                let response = try await self.approvals().approve(pending)
                approved = response.status == .approved
                self.message = approved ? "Approved." : "The server did not approve it."
            }
            return approved
        }

        private func approvals() async throws -> TransactionApproval {
            guard let deviceID = try await login.boundDeviceID() else {
                throw KeyboundError(
                    .itemNotFound, message: "Enable \(biometryName) first: approvals are signed by this device")
            }
            return try TransactionApproval(
                client: client, device: device, deviceID: deviceID, serverID: serverID)
        }

        // MARK: App lock

        func didEnterBackground() async {
            await appLock.didEnterBackground()
        }

        func willEnterForeground() async {
            guard phase != .loggedOut else { return }
            switch await appLock.willEnterForeground() {
            case .unlocked: break
            case .locked: phase = .locked
            case .requiresPassword:
                await logout()
                message = "Your session ended. Log in with your password."
            }
        }

        func unlock() async {
            await run {
                try await self.appLock.unlock(reason: "Unlock Keybound Example")
                self.phase = .loggedIn
            }
        }

        // MARK: Errors

        /// Runs `body`, turning any error into what the user should see: a cancel says nothing,
        /// the recovery decides the rest.
        private func run(_ body: @MainActor () async throws -> Void) async {
            busy = true
            message = nil
            offerSettings = false
            offerPasscode = false
            defer { busy = false }
            do {
                try await body()
            } catch let error as KeyboundError {
                show(error)
            } catch let error as WireError {
                message = "Check your input: \(error.detail)"
            } catch {
                message = "Something went wrong: \(error.localizedDescription)"
            }
        }

        private func show(_ error: KeyboundError) {
            switch error.recovery {
            case .silent:
                message = nil
            case .usePassword:
                message = "Log in with your password."
                if phase == .locked { Task { await logout() } }
            case .retry:
                message = error.code == .network ? "The server cannot be reached. Try again." : "Try again."
            case .retryLater:
                message = "Too many attempts. Try again later."
            case .usePasscode:
                message = "\(biometryName) is locked after too many attempts. Enter your passcode to use it again."
                offerPasscode = true
            case .enrollBiometrics:
                message = "Set up \(biometryName) in Settings first."
                offerSettings = true
            case .setPasscode:
                message = "Set a device passcode in Settings first."
                offerSettings = true
            case .reenroll:
                message = "\(biometryName) changed on this device. Log in with your password, then enable it again."
                Task { await refreshBiometricState() }
            case .waitForUnlock:
                message = "Unlock your device and try again."
            case .none:
                message = error.code == .notSupported
                    ? "This device has no Secure Enclave (the Simulator has none)."
                    : "\(error.code): \(error.message ?? "failed")"
            }
        }
    }

    /// Where the example finds its server and how it names itself.
    struct ExampleConfiguration: Sendable {
        var serverURL: URL
        var serverID: String
        var keychainService: String
        var installationID: String
        var deviceName: String

        /// From Info.plist (`KeyboundServerURL`, `KeyboundServerID`) and a per-installation id.
        static func fromBundle(_ bundle: Bundle = .main, defaults: UserDefaults = .standard) -> ExampleConfiguration {
            let url = (bundle.object(forInfoDictionaryKey: "KeyboundServerURL") as? String).flatMap(URL.init(string:))
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
