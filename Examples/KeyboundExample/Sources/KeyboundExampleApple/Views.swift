#if canImport(SwiftUI) && canImport(LocalAuthentication)
    import Keybound
    import SwiftUI

    #if os(iOS)
        import UIKit
    #endif

    /// The example app: password login, "Enable Face ID", "Log in with Face ID" once this
    /// device is bound, transfer approval, and an app lock when it comes back from the
    /// background. Run it from an Xcode iOS App target whose `@main` calls
    /// `KeyboundExampleApp.main()` (see `App/Main.swift`) with `App/Info.plist`.
    public struct KeyboundExampleApp: App {
        @State private var model: AppModel?
        @State private var startupError: String?

        public init() {}

        public var body: some Scene {
            WindowGroup {
                Group {
                    if let model {
                        RootView(model: model)
                    } else {
                        Text(startupError ?? "Starting…").padding()
                    }
                }
                .task {
                    guard model == nil else { return }
                    do {
                        model = try AppModel(configuration: .fromBundle())
                    } catch {
                        startupError = "Cannot start: \(error)"
                    }
                }
            }
        }
    }

    /// Picks the screen and locks the app when it returns from the background.
    struct RootView: View {
        let model: AppModel
        @Environment(\.scenePhase) private var scenePhase

        var body: some View {
            NavigationStack {
                switch model.phase {
                case .loggedOut: LoginView(model: model)
                case .loggedIn: HomeView(model: model)
                case .locked: LockView(model: model)
                }
            }
            .overlay {
                if model.busy { ProgressView() }
            }
            .task { await model.refreshBiometricState() }
            .onChange(of: scenePhase) { _, phase in
                switch phase {
                case .background: Task { await model.didEnterBackground() }
                case .active: Task { await model.willEnterForeground() }
                default: break
                }
            }
        }
    }

    /// Password login, and "Log in with Face ID" only when this device is bound.
    struct LoginView: View {
        let model: AppModel
        @State private var username = ""
        @State private var password = ""

        var body: some View {
            Form {
                Section {
                    TextField("Username", text: $username)
                        .textContentType(.username)
                        .noAutocapitalization()
                    SecureField("Password", text: $password)
                        .textContentType(.password)
                    Button("Log in") {
                        Task { await model.loginWithPassword(username: username, password: password) }
                    }
                    .disabled(username.isEmpty || password.isEmpty || model.busy)
                }
                if let title = model.biometricLoginTitle {
                    Section {
                        Button(title) { Task { await model.loginWithBiometrics() } }
                            .disabled(model.busy)
                    }
                }
                MessageSection(model: model)
            }
            .navigationTitle("Keybound")
        }
    }

    /// Logged in: offer biometrics, approve transfers, log out.
    struct HomeView: View {
        let model: AppModel

        var body: some View {
            Form {
                Section {
                    Text("Logged in as \(model.username ?? "…")")
                }
                Section("\(model.biometryName)") {
                    if model.canEnableBiometrics {
                        Button("Enable \(model.biometryName)") { Task { await model.enableBiometrics() } }
                    } else if model.biometricLoginTitle != nil {
                        Button("Turn off \(model.biometryName) login", role: .destructive) {
                            Task { await model.disableBiometrics() }
                        }
                    }
                }
                if model.biometricLoginTitle != nil {
                    Section {
                        NavigationLink("Send money") { ApprovalView(model: model) }
                    }
                }
                MessageSection(model: model)
                Section {
                    Button("Log out") { Task { await model.logout() } }
                }
            }
            .navigationTitle("Account")
        }
    }

    /// A transfer: the server issues the payload, the prompt shows what the payload says,
    /// a fresh verification signs it.
    struct ApprovalView: View {
        let model: AppModel
        @State private var amount = "0.5"
        @State private var asset = "ETH"
        @State private var recipient = ""
        @State private var pending: TransactionApproval.Pending?

        var body: some View {
            Form {
                Section("Transfer") {
                    TextField("Amount", text: $amount)
                        .decimalKeyboard()
                    TextField("Asset", text: $asset)
                        .noAutocapitalization()
                    TextField("To", text: $recipient)
                        .noAutocapitalization()
                    Button("Review") {
                        Task { pending = await model.requestTransfer(amount: amount, asset: asset, to: recipient) }
                    }
                    .disabled(amount.isEmpty || asset.isEmpty || recipient.isEmpty || model.busy)
                }
                if let pending {
                    Section("Approve") {
                        // Built from the payload the device will sign, not from the fields above.
                        Text(pending.promptText).font(.headline)
                        Button("Approve with \(model.biometryName)") {
                            Task {
                                if await model.approve(pending) { self.pending = nil }
                            }
                        }
                        .disabled(model.busy)
                    }
                }
                MessageSection(model: model)
            }
            .navigationTitle("Send")
        }
    }

    /// Shown on return from the background after the grace period.
    struct LockView: View {
        let model: AppModel

        var body: some View {
            VStack(spacing: 16) {
                Image(systemName: "lock.fill").font(.largeTitle)
                Text("Keybound is locked")
                Button("Unlock") { Task { await model.unlock() } }
                    .buttonStyle(.borderedProminent)
                    .disabled(model.busy)
                if let message = model.message { Text(message).foregroundStyle(.secondary) }
            }
            .padding()
            .task { await model.unlock() }
        }
    }

    /// The model's message, and the way out it suggests.
    struct MessageSection: View {
        let model: AppModel

        var body: some View {
            if model.message != nil || model.offerPasscode || model.offerSettings {
                Section {
                    if let message = model.message { Text(message) }
                    if model.offerPasscode {
                        Button("Enter passcode") { Task { await model.clearLockout() } }
                    }
                    #if os(iOS)
                        if model.offerSettings, let url = URL(string: UIApplication.openSettingsURLString) {
                            Link("Open Settings", destination: url)
                        }
                    #endif
                }
            }
        }
    }

    extension View {
        /// iOS-only text input traits; nothing on macOS.
        @ViewBuilder fileprivate func noAutocapitalization() -> some View {
            #if os(iOS)
                self.textInputAutocapitalization(.never).autocorrectionDisabled()
            #else
                self.autocorrectionDisabled()
            #endif
        }

        @ViewBuilder fileprivate func decimalKeyboard() -> some View {
            #if os(iOS)
                self.keyboardType(.decimalPad)
            #else
                self
            #endif
        }
    }
#endif
