#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundLinux
    import KeyboundServer
    import KeyboundWire

    /// `keybound demo --device linux`: the stories that make sense on a Linux kiosk, on the real
    /// backends (`DeviceBackends.linux`): keys and the PIN in a TPM 2.0 (a throwaway swtpm), items
    /// in the Secret Service (gnome-keyring on a private bus), sealed by the TPM. Every step's
    /// outcome is checked, as in the emulator's demo.
    struct LinuxDemoStory {
        let narrator: Narrator
        let keepDatabase: Bool

        let username = "ada"
        let password = "correct horse battery staple"
        let recipient = "0x12a4c8b2e19d7f3a5c6b8e0d4f2a1b3c9d7e5fef"
        let serverID = "demo.keybound.local"
        let service = "com.acme.kiosk"
        let pin = "246810"

        /// What the kiosk's PIN dialog types next, set by each step before the flow asks.
        private let typed = Mutex("")

        func run(components: LinuxDemoComponents) async throws {
            // tss2 logs every TPM error it passes on (a wrong PIN is a step's point) unless told not to.
            setenv("TSS2_LOG", "all+none", 0)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-demo-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { if !keepDatabase { try? FileManager.default.removeItem(at: directory) } }
            let databasePath = directory.appendingPathComponent("keybound.sqlite").path

            var configuration = Configuration()  // production defaults: OWASP Argon2id, 15 min tokens
            configuration.port = 0
            configuration.databaseURL = "sqlite:" + databasePath
            configuration.serverID = serverID
            configuration.log = .discard
            let server = try Server(configuration: configuration)
            try server.start()
            defer { server.stop() }
            guard let baseURL = server.baseURL else {
                throw DemoFailure(description: "the server has no address")
            }

            narrator.chapter("Setting the scene")
            narrator.step(
                "Start the Keybound server in-process",
                "listening on \(baseURL.absoluteString), SQLite at \(keepDatabase ? databasePath : "a temporary file")"
            )
            let vault = try TPMKeyVault(
                directory: directory.appendingPathComponent("keys"), connection: components.tpm)
            let typed = self.typed
            let device = try DeviceBackends.linux(
                vault: vault, service: service, secretServiceBus: components.busAddress,
                enterPIN: { _ in typed.withLock { $0 } })
            try await components.waitForKeyring(device.store)
            narrator.step(
                "Start a throwaway TPM 2.0 (swtpm) and gnome-keyring on a private session bus",
                "TPM at \(components.tpm), keyring at \(components.busAddress)")
            try await vault.setPIN(pin)
            try check(try await vault.isPINSet(), "the TPM should hold the PIN")
            narrator.step(
                "The kiosk's owner sets the device PIN \(pin)",
                "the PIN is the authorization of one TPM object; the TPM counts wrong tries")

            let tokenLogin = try flow(.token, baseURL: baseURL, device: device)
            try await passwordAndTokenLogin(tokenLogin, device: device, baseURL: baseURL)
            let (keyLogin, deviceID) = try await deviceBinding(device: device, vault: vault, baseURL: baseURL)
            try await approval(keyLogin, device: device, vault: vault, deviceID: deviceID)
            try await appLock(device: device)
            try await pinRemoved(
                tokenLogin: tokenLogin, keyLogin: keyLogin, vault: vault, oldDeviceID: deviceID)
        }

        // MARK: - Stories

        /// Story 1 with the refresh token in a keyring item sealed under a PIN-bound TPM key.
        private func passwordAndTokenLogin(
            _ login: BiometricLogin, device: DeviceBackends, baseURL: URL
        ) async throws {
            narrator.chapter("1. Password login, then login with a token the TPM seals")
            let userID = try await login.client.createAccount(username: username, password: password)
            narrator.step("Create the account '\(username)'", "user \(userID.prefix(8))…")
            try await login.loginWithPassword(username: username, password: password)
            try check(
                try await login.client.me().authMethod == .password,
                "the session should come from the password")
            narrator.step("Log in with the password", "auth_method password")
            try await login.enable()
            try check(
                try await device.store.exists("demo-token.refresh-token"),
                "the token should be in the keyring")
            narrator.step(
                "Turn on PIN login: the refresh token goes into the Secret Service, sealed under a TPM key "
                    + "bound to the PIN",
                "the keyring holds TPM ciphertext, useless without this TPM and the PIN")

            let relaunched = try flow(.token, baseURL: baseURL, device: device)
            type("135799")
            try await narrator.expectError(
                .authenticationFailed, "Relaunch; someone types the PIN 135799", recovery: .retry
            ) {
                try await relaunched.unlock(reason: "Log in to Acme")
            }
            try check(await relaunched.client.currentSession == nil, "a wrong PIN should open no session")
            type(pin)
            try await relaunched.unlock(reason: "Log in to Acme")
            let resumed = try await relaunched.client.me()
            try check(resumed.userID == userID, "the resumed session should be Ada's")
            narrator.step(
                "Relaunch; Ada types the right PIN: the TPM checks it and unseals the token, the session is refreshed",
                "logged in as \(resumed.username)")
        }

        /// Story 2: device binding and device-key login, the key in the TPM.
        private func deviceBinding(device: DeviceBackends, vault: TPMKeyVault, baseURL: URL) async throws
            -> (BiometricLogin, String)
        {
            narrator.chapter("2. Device binding and challenge–response login")
            let login = try flow(.deviceKey, baseURL: baseURL, device: device)
            try await login.loginWithPassword(username: username, password: password)
            try await login.enable()
            guard let deviceID = try await login.boundDeviceID() else {
                throw DemoFailure(description: "no device id after binding")
            }
            try check(try await vault.keyExists("demo-key.device-key"), "the device key should be in the TPM")
            narrator.step(
                "After a fresh password login, create a P-256 key inside the TPM, bound to the PIN, and register it",
                "device \(deviceID.prefix(8))… bound; the private key never leaves the TPM")

            let relaunched = try flow(.deviceKey, baseURL: baseURL, device: device)
            type(pin)
            try await relaunched.unlock(reason: "Log in to Acme")
            try check(
                try await relaunched.client.me().authMethod == .device,
                "the session should come from the device key")
            narrator.step(
                "Relaunch; the server sends a single-use challenge, Ada types the PIN, the TPM signs it",
                "logged in, auth_method device")
            return (relaunched, deviceID)
        }

        /// Story 3: what you see is what you sign, signed by the TPM.
        private func approval(
            _ login: BiometricLogin, device: DeviceBackends, vault: TPMKeyVault, deviceID: String
        )
            async throws
        {
            narrator.chapter("3. Transaction approval: what you see is what you sign")
            let approvals = try TransactionApproval(
                client: login.client, device: device, deviceID: deviceID, serverID: serverID,
                keyName: "demo-key.device-key", policy: .devicePasscode)
            let action = ApprovalAction.transfer(
                try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: recipient))
            let pending = try await approvals.request(action)
            try check(
                pending.amount.text == "0.5" && pending.asset == "ETH" && pending.recipient == recipient,
                "the pending approval should name the whole transfer: \(pending.promptText)")
            narrator.step(
                "Ask the server to approve sending 0.5 ETH",
                "the kiosk's confirmation screen, parsed from the payload the key will sign: "
                    + "\(pending.amount) \(pending.asset) to \(pending.groupedRecipient)")
            type(pin)
            let signature = try await approvals.sign(pending.confirm())
            try check(
                try await vault.isValidSignature(
                    signature, for: pending.payloadBytes, by: "demo-key.device-key"),
                "the TPM's signature should verify over the exact payload")
            let confirmed = try await login.client.confirmApproval(pending.approvalID, signature: signature)
            try check(confirmed.status == .approved, "the approval should be approved")
            narrator.step(
                "Ada confirms on the kiosk's screen and types the PIN (a fresh verification); the TPM signs "
                    + "the exact payload bytes", "approved")
            try await narrator.expectError(
                .server, "An attacker replays the same signature", serverCode: .challengeUsed
            ) {
                _ = try await login.client.confirmApproval(pending.approvalID, signature: signature)
            }
        }

        /// Story 4: app lock, unlocked by the PIN.
        private func appLock(device: DeviceBackends) async throws {
            narrator.chapter("4. App lock")
            let time = DemoClock()
            let lock = try AppLock(
                verifier: device.verifier, gracePeriod: 30, sessionValidity: 12 * 3600, clock: time.clock)
            await lock.sessionStarted()
            await lock.didEnterBackground()
            time.advance(120)
            try check(await lock.willEnterForeground() == .locked, "2 min away should lock")
            narrator.step("Leave the kiosk for 2 minutes (grace period 30 s)", "locked")
            type("135799")
            try await narrator.expectError(
                .authenticationFailed, "Someone types the PIN 135799", recovery: .retry
            ) {
                try await lock.unlock(reason: "Unlock Acme")
            }
            try check(await lock.state == .locked, "a wrong PIN should leave it locked")
            type(pin)
            try await lock.unlock(reason: "Unlock Acme")
            try check(await lock.state == .unlocked, "the PIN should unlock")
            narrator.step("Ada comes back and types the PIN", "unlocked: the TPM checked the PIN")
        }

        /// Story 5's Linux form: removing the PIN destroys what it protected, as removing a
        /// passcode destroys `whenPasscodeSetThisDeviceOnly` items and keys.
        private func pinRemoved(
            tokenLogin: BiometricLogin, keyLogin: BiometricLogin, vault: TPMKeyVault, oldDeviceID: String
        ) async throws {
            narrator.chapter("5. The PIN is removed")
            try await vault.removePIN()
            try check(try await tokenLogin.state() == .invalidated, "the token item should be invalidated")
            try check(try await keyLogin.state() == .invalidated, "the device key should be invalidated")
            narrator.step(
                "The owner removes the device PIN", "the PIN-bound key and the sealed token are destroyed")
            try await narrator.expectError(.invalidated, "Log in with the PIN", recovery: .reenroll) {
                try await keyLogin.unlock(reason: "Log in to Acme")
            }
            try await vault.setPIN(pin)
            try await keyLogin.loginWithPassword(username: username, password: password)
            try await keyLogin.enable()
            guard let newDeviceID = try await keyLogin.boundDeviceID(), newDeviceID != oldDeviceID else {
                throw DemoFailure(description: "re-enrollment should bind a new device")
            }
            narrator.step(
                "A new PIN; Ada logs in with the password and turns PIN login on again",
                "new TPM key bound as device \(newDeviceID.prefix(8))…")
            try await narrator.expectError(
                .server, "The old device key asks for a login challenge", serverCode: .deviceRevoked
            ) {
                _ = try await keyLogin.client.loginChallenge(deviceID: oldDeviceID)
            }
        }

        // MARK: - Helpers

        private func type(_ value: String) { typed.withLock { $0 = value } }

        private func flow(_ mode: BiometricLogin.Mode, baseURL: URL, device: DeviceBackends) throws
            -> BiometricLogin
        {
            try BiometricLogin(
                client: KeyboundClient(baseURL: baseURL), device: device,
                configuration: .init(
                    clientID: mode == .token ? "demo-kiosk-token" : "demo-kiosk-key", serverID: serverID,
                    mode: mode, policy: .devicePasscode, deviceName: "Front desk kiosk",
                    // The server's vocabulary has no TPM case (docs/linux.md): self-reported anyway.
                    keyProtection: .software, unlockReason: "Log in to Acme",
                    namespace: mode == .token ? "demo-token" : "demo-key"))
        }
    }
#endif
