#if canImport(SwiftUI) && canImport(LocalAuthentication)
    import KeyboundExampleApple
    import SwiftUI

    #if os(iOS)
        import UIKit
    #endif

    // Closures below capture `model` (a main-actor class, so Sendable) and copies of values,
    // never the view itself, so they compile the same with the iOS 17 and iOS 18 SDKs.

    /// The example app: password login, "Enable Face ID", "Log in with Face ID" once this
    /// device is bound, transfer approval, and an app lock on return from the background.
    /// Run it from an Xcode iOS App target whose `@main` calls `KeyboundExampleApp.main()`
    /// (see `App/Main.swift`) with `App/Info.plist`.
    public struct KeyboundExampleApp: App {
        @StateObject private var holder = ModelHolder()

        public init() {}

        public var body: some Scene {
            WindowGroup {
                if let model = holder.model {
                    RootView(model: model)
                } else {
                    Text(holder.startupError ?? "Starting…").padding()
                }
            }
        }
    }

    /// Makes the model once, keeping a startup failure to show. Immutable, hence Sendable.
    final class ModelHolder: ObservableObject, Sendable {
        let model: AppModel?
        let startupError: String?

        init() {
            do {
                model = try AppModel(configuration: .fromMainBundle())
                startupError = nil
            } catch {
                model = nil
                startupError = "Cannot start: \(error)"
            }
        }
    }

    /// Picks the screen and locks the app when it returns from the background.
    struct RootView: View {
        @ObservedObject var model: AppModel
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
            .task { [model] in await model.refreshBiometricState() }
            .onChange(of: scenePhase) { [model] _, phase in
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
        @ObservedObject var model: AppModel
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
                    Button("Log in") { [model, username, password] in
                        Task { await model.loginWithPassword(username: username, password: password) }
                    }
                    .disabled(username.isEmpty || password.isEmpty || model.busy)
                }
                if let title = model.biometricLoginTitle {
                    Section {
                        Button(title) { [model] in Task { await model.loginWithBiometrics() } }
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
        @ObservedObject var model: AppModel

        var body: some View {
            Form {
                Section {
                    Text("Logged in as \(model.username ?? "…")")
                }
                Section(model.biometryName) {
                    if model.canEnableBiometrics {
                        Button("Enable \(model.biometryName)") { [model] in
                            Task { await model.enableBiometrics() }
                        }
                    } else if model.biometricLoginTitle != nil {
                        Button("Turn off \(model.biometryName) login", role: .destructive) { [model] in
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
                    Button("Log out") { [model] in Task { await model.logout() } }
                }
            }
            .navigationTitle("Account")
        }
    }

    /// A transfer: the server issues the payload, this screen shows what the payload says —
    /// amount, asset and the whole recipient — and only its "Send" button lets a fresh
    /// verification sign it. (With Face ID the system prompt's text appears only after a failed
    /// match: this screen is what the user reads.)
    struct ApprovalView: View {
        @ObservedObject var model: AppModel
        @State private var amount = "0.5"
        @State private var asset = "ETH"
        @State private var recipient = ""

        var body: some View {
            Form {
                Section("Transfer") {
                    TextField("Amount", text: $amount)
                        .decimalKeyboard()
                    TextField("Asset", text: $asset)
                        .noAutocapitalization()
                    TextField("To", text: $recipient)
                        .noAutocapitalization()
                    Button("Review") { [model, amount, asset, recipient] in
                        Task { await model.requestTransfer(amount: amount, asset: asset, to: recipient) }
                    }
                    .disabled(amount.isEmpty || asset.isEmpty || recipient.isEmpty || model.busy)
                }
                if let pending = model.pendingApproval {
                    Section("Confirm") {
                        // Parsed from the payload the device will sign, not from the fields above.
                        LabeledContent("Amount", value: "\(pending.amount) \(pending.asset)")
                        VStack(alignment: .leading) {
                            Text("To")
                            // The whole recipient, in groups of four: never shortened.
                            Text(pending.groupedRecipient).font(.body.monospaced()).textSelection(.enabled)
                        }
                        Button("Send with \(model.biometryName)") { [model] in
                            Task { await model.confirmPendingApproval() }
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
        @ObservedObject var model: AppModel

        var body: some View {
            VStack(spacing: 16) {
                Image(systemName: "lock.fill").font(.largeTitle)
                Text("Keybound is locked")
                Button("Unlock") { [model] in Task { await model.unlock() } }
                    .buttonStyle(.borderedProminent)
                    .disabled(model.busy)
                if let message = model.message { Text(message).foregroundStyle(.secondary) }
            }
            .padding()
            .task { [model] in await model.unlock() }
        }
    }

    /// The model's message, and the way out it suggests.
    struct MessageSection: View {
        @ObservedObject var model: AppModel

        var body: some View {
            if model.message != nil || model.offerPasscode || model.offerSettings {
                Section {
                    if let message = model.message { Text(message) }
                    if model.offerPasscode {
                        Button("Enter passcode") { [model] in Task { await model.clearLockout() } }
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
        /// iOS-only text input traits; only autocorrection on macOS.
        @ViewBuilder fileprivate func noAutocapitalization() -> some View {
            #if os(iOS)
                self.textInputAutocapitalization(.never).autocorrectionDisabled()
            #else
                self.autocorrectionDisabled()
            #endif
        }

        /// The decimal pad on iOS; nothing on macOS.
        @ViewBuilder fileprivate func decimalKeyboard() -> some View {
            #if os(iOS)
                self.keyboardType(.decimalPad)
            #else
                self
            #endif
        }
    }
#endif
