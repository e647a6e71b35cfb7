import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundWire

/// `keybound demo`: the whole story, end to end, against a real server on loopback and an
/// emulated Face ID device. Every step's outcome is checked; the exit status is 1 if any step
/// does not turn out as narrated.
enum DemoCommand {
    /// The demo's options: its parsing and its `--help`.
    static let options: [Option] = [
        .flag("json", "print the transcript as JSON lines"),
        .flag("keep-database", "keep the SQLite file and print its path"),
        .value(
            "device", "D",
            "emulator (the default): an emulated iPhone; linux: a TPM 2.0 and the Secret Service"),
        .help,
    ]

    static let usage = """
        usage: keybound demo [--json] [--keep-database] [--device emulator|linux]

        Starts the Keybound server in-process on a free loopback port with a temporary SQLite
        database (production Argon2id settings), creates an emulated Face ID device, and runs
        every story: password login, biometric login, device-key login, a what-you-see-is-what-
        you-sign approval with replay and tampering refused, app lock, enrollment change and
        re-enrollment, lockout and recovery by passcode, a passkey sign-up and sign-in, a
        device binding attested by App Attest (under a test CA the demo's server trusts as
        Apple's), refused when the attestation is for another app, a web app signing in
        through OpenID Connect with a passkey while the phone's session is DPoP-bound, and a
        wallet's back end asking the phone to approve a transfer through CIBA, its receipt checked
        offline by keybound receipt verify (and a copy changed by one byte refused).

        --device linux (Linux only) runs the stories that make sense on a Linux kiosk on the real
        backends instead (DeviceBackends.linux): keys and the device PIN in a TPM 2.0, items in the
        Secret Service sealed by the TPM. Password login; token and device-key login, a wrong PIN
        refused by the TPM; an approval signed by the TPM; app lock; the PIN removed. It starts a
        throwaway swtpm and gnome-keyring on a private session bus (never the machine's TPM or
        keyring) and, when one is not installed, says which and how to install it.

        options:
        \(Option.help(options))
        """

    static func run(_ raw: [String]) async -> Int32 {
        let arguments: Arguments
        do {
            arguments = try Arguments(raw, options: options, command: "keybound demo")
            if arguments.isSet("help") {
                print(usage)
                return 0
            }
            guard arguments.positionals.isEmpty else { throw UsageError("demo takes no arguments") }
        } catch {
            printError("keybound demo: \(error)\n\(usage)")
            return 2
        }
        let json = arguments.isSet("json")
        let keepDatabase = arguments.isSet("keep-database")
        switch arguments.value("device") ?? "emulator" {
        case "emulator": break
        case "linux": return await runOnLinux(json: json, keepDatabase: keepDatabase)
        case let other:
            printError("keybound demo: --device is emulator or linux, not '\(other)'\n\(usage)")
            return 2
        }
        let narrator = Narrator(json: json)
        do {
            try await DemoStory(narrator: narrator, keepDatabase: keepDatabase).run()
            narrator.finish(failed: nil)
            return 0
        } catch {
            narrator.finish(failed: error)
            return 1
        }
    }
}

extension DemoCommand {
    /// `--device linux`: the Linux kiosk's stories on the real backends, started by the demo.
    static func runOnLinux(json: Bool, keepDatabase: Bool) async -> Int32 {
        #if os(Linux)
            let components: LinuxDemoComponents
            do { components = try LinuxDemoComponents() } catch let missing as LinuxDemoComponents.Missing {
                printError("keybound demo --device linux: \(missing)")
                return 1
            } catch {
                printError("keybound demo --device linux: \(error)")
                return 1
            }
            defer { components.stop() }
            let narrator = Narrator(json: json)
            do {
                try await LinuxDemoStory(narrator: narrator, keepDatabase: keepDatabase).run(
                    components: components)
                narrator.finish(failed: nil)
                return 0
            } catch {
                narrator.finish(failed: error)
                return 1
            }
        #else
            printError("keybound demo: --device linux runs on Linux only (a TPM 2.0 and the Secret Service)")
            return 2
        #endif
    }
}

/// A step that did not turn out as narrated.
struct DemoFailure: Error, CustomStringConvertible {
    let description: String
}

/// Prints the story as text, or as JSON lines.
final class Narrator: @unchecked Sendable {
    // Only used from the demo's single sequential task.
    private let json: Bool
    private var chapter = ""
    private var stepCount = 0
    private let started = Date()

    init(json: Bool) { self.json = json }

    func chapter(_ title: String) {
        chapter = title
        if json {
            emit([JSONMember("event", .string("chapter")), JSONMember("title", .string(title))])
        } else {
            print("\n== \(title)")
        }
    }

    func step(_ action: String, _ outcome: String) {
        stepCount += 1
        if json {
            emit([
                JSONMember("event", .string("step")), JSONMember("chapter", .string(chapter)),
                JSONMember("step", .integer(stepCount)), JSONMember("action", .string(action)),
                JSONMember("outcome", .string(outcome)), JSONMember("ok", .bool(true)),
            ])
        } else {
            print("  \(String(format: "%2d", stepCount)). \(action)\n      ✔ \(outcome)")
        }
    }

    func note(_ text: String) {
        if json {
            emit([JSONMember("event", .string("note")), JSONMember("text", .string(text))])
        } else {
            print("      \(text)")
        }
    }

    func finish(failed: (any Error)?) {
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        if json {
            var object = [
                JSONMember("event", .string("end")), JSONMember("ok", .bool(failed == nil)),
                JSONMember("steps", .integer(stepCount)), JSONMember("seconds", .string(seconds)),
            ]
            if let failed { object.append(JSONMember("error", .string("\(failed)"))) }
            emit(object)
        } else if let failed {
            print("\n✘ The story did not turn out as narrated: \(failed)")
        } else {
            print("\n✔ All \(stepCount) steps turned out as narrated (\(seconds) s).")
        }
        fflush(nil)
    }

    private func emit(_ members: [JSONMember]) { printJSON(.object(members)) }
}

/// The stories of docs/design.md, in order, each outcome checked.
struct DemoStory {
    let narrator: Narrator
    let keepDatabase: Bool

    let username = "ada"
    let password = "correct horse battery staple"
    let recipient = "0x12a4c8b2e19d7f3a5c6b8e0d4f2a1b3c9d7e5fef"
    /// The passkeys' relying party; Apple's platform authenticator writes `https://` and it as
    /// the origin for an app of that domain.
    private static let relyingPartyID = "acme.example"
    /// The genuine app's App ID (`TEAMID.bundle.id`), the only one the server accepts.
    private static let appID = "DEMOTEAM01.com.acme.bank"

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { if !keepDatabase { try? FileManager.default.removeItem(at: directory) } }
        let databasePath = directory.appendingPathComponent("keybound.sqlite").path

        var configuration = Configuration()  // production defaults: OWASP Argon2id, 15 min tokens
        configuration.port = 0
        configuration.databaseURL = "sqlite:" + databasePath
        configuration.serverID = "demo.keybound.local"
        configuration.log = .discard
        configuration.relyingPartyID = Self.relyingPartyID
        configuration.origins = ["https://\(Self.relyingPartyID)"]
        // App Attest under the emulator's CA, standing in for Apple's App Attestation CA.
        let appAttestCA = try EmulatedAppAttestAuthority()
        configuration.appIDs = [Self.appID]
        configuration.appAttestEnvironment = .development
        configuration.appAttestRoots = [appAttestCA.rootCertificate]
        configuration.cibaInterval = 1  // --ciba-interval 1: the wallet's back end polls every second
        configuration.adminListen = ListenAddress(host: "127.0.0.1", port: 0)  // the operator console
        let server = try Self.startWithIssuer(&configuration)
        defer { server.stop() }
        guard let baseURL = server.baseURL else {
            throw DemoFailure(description: "the server has no address")
        }

        narrator.chapter("Setting the scene")
        narrator.step(
            "Start the Keybound server in-process",
            "listening on \(baseURL.absoluteString), SQLite at \(keepDatabase ? databasePath : "a temporary file")"
        )
        let device = try EmulatedDevice(biometry: .faceID, passcode: "123456", enrolledIdentities: 1)
        narrator.step("Create an emulated iPhone", "Face ID, passcode set, one face enrolled")

        let tokenLogin = try flow(.token, baseURL: baseURL, device: device)
        try await passwordAndBiometricLogin(tokenLogin, device: device, baseURL: baseURL)
        let (keyLogin, deviceID) = try await deviceBinding(device: device, baseURL: baseURL)
        try await approval(keyLogin, device: device, deviceID: deviceID)
        try await appLock(device: device)
        try await enrollmentChange(
            tokenLogin: tokenLogin, keyLogin: keyLogin, device: device, oldDeviceID: deviceID)
        try await lockout(keyLogin, device: device, baseURL: baseURL)
        let (passkeys, genuineApp) = try await passkeysAndAppAttest(
            device: device, baseURL: baseURL, appAttestCA: appAttestCA)
        try await openIDConnect(
            configuration: configuration, baseURL: baseURL, device: device, passkeys: passkeys)
        try await backchannelApproval(
            configuration: configuration, device: device, phone: genuineApp, directory: directory)
        try await operatorConsole(
            configuration: configuration, baseURL: baseURL,
            consoleURL: try requireValue(server.adminURL, "the console's address"))
    }

    // MARK: - Stories

    /// Stories 1 (biometric login with a stored token) and 6's cancel and fallback branches.
    private func passwordAndBiometricLogin(_ login: BiometricLogin, device: EmulatedDevice, baseURL: URL)
        async throws
    {
        narrator.chapter("1. Password login, then biometric login with a stored token")
        let userID = try await login.client.createAccount(username: username, password: password)
        narrator.step("Create the account '\(username)'", "user \(userID.prefix(8))…")
        try await login.loginWithPassword(username: username, password: password)
        let me = try await login.client.me()
        try check(me.authMethod == .password, "the session should come from the password")
        narrator.step("Log in with the password", "session \(me.sessionID.prefix(8))…, auth_method password")
        try check(try await login.state() == .notEnabled, "biometric login should be off")
        try await login.enable()
        try check(try await login.state() == .enabled(.faceID), "biometric login should be on")
        narrator.step(
            "The user says yes to Face ID: the refresh token goes into a biometryCurrentSet item",
            "enabled; the login screen now shows 'Log in with Face ID'")

        // A relaunch: a new client with no session; the token item is all there is.
        let relaunched = try flow(.token, baseURL: baseURL, device: device)
        try await narrator.expectError(.userCancel, "Relaunch; the user dismisses the Face ID prompt") {
            try await relaunched.unlock(reason: "Log in to Acme")
        }
        await device.present(.noMatch, .noMatch, .userFallback)
        try await narrator.expectError(
            .userFallback, "Relaunch; Face ID does not recognise the user twice, who taps 'Use Password'"
        ) {
            try await relaunched.unlock(reason: "Log in to Acme")
        }
        await device.present(.match)
        try await relaunched.unlock(reason: "Log in to Acme")
        let resumed = try await relaunched.client.me()
        try check(resumed.userID == userID, "the resumed session should be Ada's")
        narrator.step(
            "Relaunch; Face ID matches, the OS releases the token, the session is refreshed",
            "logged in as \(resumed.username) without typing anything")
    }

    /// Story 2: device binding and device-key login.
    /// Returns the relaunched app's flow (its login ended the first session of the same client).
    private func deviceBinding(device: EmulatedDevice, baseURL: URL) async throws -> (BiometricLogin, String)
    {
        narrator.chapter("2. Device binding and challenge–response login")
        let login = try flow(.deviceKey, baseURL: baseURL, device: device)
        try await login.loginWithPassword(username: username, password: password)
        try await login.enable()
        guard let deviceID = try await login.boundDeviceID() else {
            throw DemoFailure(description: "no device id after binding")
        }
        narrator.step(
            "After a fresh password login, create a P-256 key in the secure element and register its public key",
            "device \(deviceID.prefix(8))… bound; the server stores no device password")

        let relaunched = try flow(.deviceKey, baseURL: baseURL, device: device)
        await device.present(.match)
        try await relaunched.unlock(reason: "Log in to Acme")
        let me = try await relaunched.client.me()
        try check(me.authMethod == .device, "the session should come from the device key")
        narrator.step(
            "Relaunch; the server sends a single-use challenge, Face ID matches, the key signs it",
            "logged in, auth_method device")
        return (relaunched, deviceID)
    }

    /// Story 3: what you see is what you sign.
    private func approval(_ login: BiometricLogin, device: EmulatedDevice, deviceID: String) async throws {
        narrator.chapter("3. Transaction approval: what you see is what you sign")
        let approvals = try TransactionApproval(
            client: login.client, device: DeviceBackends(device), deviceID: deviceID,
            serverID: "demo.keybound.local", keyName: "demo-key.device-key")
        let action = try transferToRecipient()
        let pending = try await approvals.request(action)
        try check(
            pending.amount.text == "0.5" && pending.asset == "ETH" && pending.recipient == recipient,
            "the pending approval should name the whole transfer: \(pending.promptText)")
        narrator.step(
            "Ask the server to approve sending 0.5 ETH",
            "the app's confirmation screen, parsed from the payload the key will sign: "
                + "\(pending.amount) \(pending.asset) to \(pending.groupedRecipient)")

        // The user taps "Send" on that screen: only now can the key be reached.
        await device.present(.match)
        let signature = try await approvals.sign(pending.confirm())
        let confirmed = try await login.client.confirmApproval(pending.approvalID, signature: signature)
        try check(confirmed.status == .approved, "the approval should be approved")
        narrator.step(
            "The user confirms on the app's screen; Face ID matches (a fresh verification), the key "
                + "signs the exact payload bytes", "approved")

        try await narrator.expectError(
            .server, "An attacker replays the same signature", serverCode: .challengeUsed
        ) {
            _ = try await login.client.confirmApproval(pending.approvalID, signature: signature)
        }

        let second = try await approvals.request(action)
        let tampered = Data(
            String(decoding: second.payloadBytes, as: UTF8.self)
                .replacingOccurrences(of: "\"amount\":\"0.5\"", with: "\"amount\":\"50\"").utf8)
        try check(tampered != second.payloadBytes, "the tampering should change the payload")
        await device.present(.match)
        let tamperedPending = try approvals.check(approvalID: second.approvalID, payload: tampered)
        let tamperedSignature = try await approvals.sign(tamperedPending.confirm())
        narrator.note(
            "Malware swaps the amount to 50 before the confirmation screen: \"\(tamperedPending.promptText)\""
        )
        try await narrator.expectError(
            .server, "The tampered payload's signature is sent for the 0.5 ETH approval",
            serverCode: .signatureInvalid
        ) {
            _ = try await login.client.confirmApproval(second.approvalID, signature: tamperedSignature)
        }
    }

    /// Story 4: app lock.
    private func appLock(device: EmulatedDevice) async throws {
        narrator.chapter("4. App lock")
        let time = DemoClock()
        let lock = try AppLock(
            verifier: device, gracePeriod: 30, sessionValidity: 12 * 3600, clock: time.clock)
        await lock.sessionStarted()
        await lock.didEnterBackground()
        time.advance(10)
        try check(await lock.willEnterForeground() == .unlocked, "10 s away should not lock")
        narrator.step("Leave the app for 10 s (grace period 30 s)", "still unlocked")
        await lock.didEnterBackground()
        time.advance(120)
        try check(await lock.willEnterForeground() == .locked, "2 min away should lock")
        narrator.step("Leave the app for 2 minutes", "locked")
        await device.present(.match)
        try await lock.unlock(reason: "Unlock Acme")
        try check(await lock.state == .unlocked, "Face ID should unlock")
        narrator.step("Come back and look at the phone", "unlocked by Face ID")
        await lock.didEnterBackground()
        time.advance(13 * 3600)
        try check(await lock.willEnterForeground() == .requiresPassword, "13 h should need the password")
        narrator.step("Come back the next day (session validity 12 h)", "a password login is required")
    }

    /// Story 5: enrollment change.
    private func enrollmentChange(
        tokenLogin: BiometricLogin, keyLogin: BiometricLogin, device: EmulatedDevice, oldDeviceID: String
    ) async throws {
        narrator.chapter("5. Enrollment change")
        try await device.enroll()
        narrator.step("Someone adds a second face in Settings", "the enrollment state changed")
        try check(try await tokenLogin.state() == .invalidated, "the token item should be invalidated")
        try check(try await keyLogin.state() == .invalidated, "the device key should be invalidated")
        // No prompt is shown: the invalidation is known before asking for a face.
        try await narrator.expectError(.invalidated, "Log in with Face ID", recovery: .reenroll) {
            try await keyLogin.unlock(reason: "Log in to Acme")
        }
        try await keyLogin.loginWithPassword(username: username, password: password)
        try await keyLogin.enable()
        guard let newDeviceID = try await keyLogin.boundDeviceID(), newDeviceID != oldDeviceID else {
            throw DemoFailure(description: "re-enrollment should bind a new device")
        }
        narrator.step(
            "Log in with the password and turn Face ID on again",
            "new key bound as device \(newDeviceID.prefix(8))…")
        try await narrator.expectError(
            .server, "The old device key asks for a login challenge", serverCode: .deviceRevoked
        ) {
            _ = try await keyLogin.client.loginChallenge(deviceID: oldDeviceID)
        }
    }

    /// Story 6: lockout and recovery by passcode.
    private func lockout(_ login: BiometricLogin, device: EmulatedDevice, baseURL: URL) async throws {
        narrator.chapter("6. Lockout and fallback")
        await device.present(.noMatch, .noMatch, .noMatch)
        try await narrator.expectError(.authenticationFailed, "Someone else tries Face ID twice, then again")
        {
            try await login.unlock(reason: "Log in to Acme")
        }
        await device.present(.noMatch, .noMatch, .userCancel)
        try await narrator.expectError(.userCancel, "…twice more, then cancels") {
            try await login.unlock(reason: "Log in to Acme")
        }
        await device.present(.noMatch)
        try await narrator.expectError(.biometryLockout, "A fifth failed match", recovery: .usePasscode) {
            try await login.unlock(reason: "Log in to Acme")
        }
        try check(await device.snapshot().isBiometryLockedOut, "biometry should be locked out")
        await device.present(.passcode("123456"))
        try await login.clearLockout()
        narrator.step("The owner enters the device passcode", "the lockout is cleared")
        await device.present(.match)
        try await login.unlock(reason: "Log in to Acme")
        try check(try await login.client.me().authMethod == .device, "Face ID login should work again")
        narrator.step("Log in with Face ID again", "logged in")
    }

    /// Passkeys and App Attest: a passkey sign-up and sign-in on the emulated iPhone, then device
    /// bindings attested by App Attest, accepted from the genuine app and refused from another.
    /// - Returns: Grace's passkey authenticator, for chapter 8, and Ada's genuine app, whose
    ///   attested key is her latest binding, for chapter 9.
    private func passkeysAndAppAttest(
        device: EmulatedDevice, baseURL: URL, appAttestCA: EmulatedAppAttestAuthority
    )
        async throws -> (EmulatedPasskeyAuthenticator, BiometricLogin)
    {
        narrator.chapter("7. Passkeys and App Attest")
        let passkeys = try EmulatedPasskeyAuthenticator(device: device)
        let signUp = PasskeyLogin(client: KeyboundClient(baseURL: baseURL), authenticator: passkeys)
        await device.present(.match)
        try await signUp.signUp(username: "grace")
        let grace = try await signUp.client.me()
        try check(grace.authMethod == .passkey, "the new account should be signed in by its passkey")
        narrator.step(
            "Grace signs up with a passkey: Face ID matches, its P-256 key is made in the secure element",
            "account 'grace' created and signed in (auth_method passkey); it has no password")

        let relaunched = PasskeyLogin(client: KeyboundClient(baseURL: baseURL), authenticator: passkeys)
        await device.present(.match)
        try await relaunched.signIn()
        try check(try await relaunched.client.me().userID == grace.userID, "the passkey should sign Grace in")
        narrator.step(
            "Relaunch; Grace taps 'Sign in with a passkey' and Face ID matches",
            "signed in as grace, with no username and no password typed")

        let genuine = try attestedFlow(
            baseURL: baseURL, device: device, appID: Self.appID, appAttestCA: appAttestCA,
            namespace: "demo-genuine")
        try await genuine.loginWithPassword(username: username, password: password)
        try await genuine.enable()
        let attested = try await genuine.client.devices().filter(\.attested)
        try check(attested.count == 1, "the genuine app's binding should be attested")
        narrator.step(
            "Ada's genuine app (\(Self.appID)) binds a new device key with an App Attest attestation of it",
            "device \(attested[0].deviceID.prefix(8))… bound and listed as attested")

        let repackaged = try attestedFlow(
            baseURL: baseURL, device: device, appID: "EVILTEAM99.com.acme.bank", appAttestCA: appAttestCA,
            namespace: "demo-repackaged")
        try await repackaged.loginWithPassword(username: username, password: password)
        try await narrator.expectError(
            .server, "A repackaged copy (App ID EVILTEAM99.com.acme.bank) binds its key the same way",
            serverCode: .rpIDMismatch
        ) {
            try await repackaged.enable()
        }
        try check(try await repackaged.boundDeviceID() == nil, "the refused binding should leave no device")
        return (passkeys, genuine)
    }

    // MARK: - Helpers

    /// Ada's app in device-key mode, attesting its bindings with App Attest as the app `appID`.
    private func attestedFlow(
        baseURL: URL, device: EmulatedDevice, appID: String, appAttestCA: EmulatedAppAttestAuthority,
        namespace: String
    ) throws -> BiometricLogin {
        try BiometricLogin(
            client: KeyboundClient(baseURL: baseURL), device: DeviceBackends(device),
            configuration: .init(
                clientID: "demo-phone-\(namespace)", serverID: "demo.keybound.local",
                deviceName: "Ada's iPhone",
                keyProtection: .emulator, unlockReason: "Log in to Acme", namespace: namespace),
            appAttest: try EmulatedAppAttestService(device: device, appID: appID, authority: appAttestCA))
    }

    func flow(_ mode: BiometricLogin.Mode, baseURL: URL, device: EmulatedDevice) throws
        -> BiometricLogin
    {
        try BiometricLogin(
            client: KeyboundClient(baseURL: baseURL), device: DeviceBackends(device),
            configuration: .init(
                clientID: mode == .token ? "demo-phone-token" : "demo-phone-key",
                serverID: "demo.keybound.local",
                mode: mode, deviceName: "Ada's iPhone", keyProtection: .emulator,
                unlockReason: "Log in to Acme",
                namespace: mode == .token ? "demo-token" : "demo-key"))
    }

    /// The transfer every approval of the demo is for: 0.5 ETH to ``recipient``.
    func transferToRecipient() throws -> ApprovalAction {
        .transfer(try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: recipient))
    }
}

/// The app-lock chapter's clock, moved by hand so the demo does not wait for real minutes.
final class DemoClock: Sendable {
    private let elapsed = Mutex<TimeInterval>(0)
    var clock: MonotonicClock { MonotonicClock { [elapsed] in elapsed.withLock { $0 } } }
    func advance(_ seconds: TimeInterval) { elapsed.withLock { $0 += seconds } }
}

/// Checks a story's outcome: the demo fails with `what` when `condition` does not hold.
func check(_ condition: Bool, _ what: String) throws {
    guard condition else { throw DemoFailure(description: what) }
}

extension Narrator {
    /// Runs `body`, which must fail with `expected` (and, when given, that recovery and that
    /// server code); narrates the refusal as the step `action`.
    func expectError(
        _ expected: KeyboundError, _ action: String, recovery: KeyboundError.Recovery? = nil,
        serverCode: ProblemCode? = nil,
        _ body: () async throws -> Void
    ) async throws {
        do {
            try await body()
        } catch let error as KeyboundError where error == expected {
            if let recovery, error.recovery != recovery {
                throw DemoFailure(description: "\(action): recovery \(error.recovery), expected \(recovery)")
            }
            if let serverCode, error.serverCode != serverCode {
                throw DemoFailure(
                    description:
                        "\(action): server said \(error.serverCode?.rawValue ?? "nothing"), expected \(serverCode)"
                )
            }
            var outcome = "refused: \(error.code)"
            if let code = error.serverCode { outcome += " (\(code))" }
            outcome += ", recovery \(error.recovery)"
            if error.recovery == .silent { outcome += ": nothing is shown" }
            step(action, outcome)
            return
        }
        throw DemoFailure(description: "\(action): expected \(expected.code), but it succeeded")
    }
}
