#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundLinux
    import KeyboundServer
    import KeyboundTestSupport
    import KeyboundWire
    import Testing

    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// The SDK's flows, unchanged, on `DeviceBackends.linux`: items in gnome-keyring on a private
    /// bus, sealed by swtpm, keys in swtpm, the PIN checked by swtpm, against a real server over
    /// loopback. Stories 1 (a stored token), 2 (device binding and device-key login), 3 (an
    /// approval), 4 (app lock) and the invalidation of story 5.
    @Suite("The flows on the Linux backends", .softwareTPM, .secretService)
    struct TPMDeviceLoginTests {
        static let password = "correct horse battery staple"
        static let serverID = "linux.keybound.test"
        static let service = "com.acme.kiosk"

        /// A server, a keyring and a TPM with the PIN set; stopped by ``stop()``.
        private final class Machine: Sendable {
            let server: Server
            let baseURL: URL
            let directory: URL
            let session = URLSession(configuration: .ephemeral)
            let keyring: PrivateKeyring
            let tpm: TPMFixture
            let device: DeviceBackends

            init() async throws {
                directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "keybound-linux-e2e-\(UUID().uuidString.prefix(8))")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                var configuration = Configuration.testing(
                    databasePath: directory.appendingPathComponent("keybound.sqlite").path)
                configuration.serverID = TPMDeviceLoginTests.serverID
                server = try Server(configuration: configuration)
                try server.start()
                baseURL = try #require(server.baseURL)
                let keyring = try PrivateKeyring()
                let tpm = try TPMFixture()
                self.keyring = keyring
                self.tpm = tpm
                try await tpm.vault.setPIN(pin)
                // What a kiosk app passes: its vault, its service name, the user's keyring, its PIN dialog.
                device = try DeviceBackends.linux(
                    vault: tpm.vault, service: TPMDeviceLoginTests.service, secretServiceBus: keyring.address,
                    enterPIN: { _ in tpm.nextPIN() })
            }

            func app(_ mode: BiometricLogin.Mode = .deviceKey) throws -> BiometricLogin {
                try BiometricLogin(
                    client: KeyboundClient(baseURL: baseURL, urlSession: session), device: device,
                    configuration: .init(
                        clientID: "kiosk-\(mode.rawValue)", serverID: TPMDeviceLoginTests.serverID,
                        mode: mode,
                        policy: .devicePasscode,
                        // The server's vocabulary has no TPM yet: self-reported anyway.
                        deviceName: "Front desk kiosk", keyProtection: .software,
                        unlockReason: "Log in to Acme",
                        namespace: "acme-\(mode.rawValue)"))
            }

            /// Ada's account, and a device-key app that logged in with her password and turned PIN
            /// login on: a device bound with a PIN-bound TPM key.
            /// - Returns: her user id and the app.
            func enabledApp() async throws -> (userID: String, app: BiometricLogin) {
                let userID = try await KeyboundClient(baseURL: baseURL, urlSession: session)
                    .createAccount(username: "ada", password: TPMDeviceLoginTests.password)
                let app = try app()
                try await app.loginWithPassword(username: "ada", password: TPMDeviceLoginTests.password)
                try await app.enable()
                return (userID, app)
            }

            func stop() {
                session.finishTasksAndInvalidate()
                server.stop(gracePeriod: 0)
                keyring.stop()
                tpm.stop()
                try? FileManager.default.removeItem(at: directory)
            }
        }

        @Test func aDeviceBoundWithATPMKeyLogsIn() async throws {
            let machine = try await Machine()
            defer { machine.stop() }
            let (userID, first) = try await machine.enabledApp()
            #expect(try await first.state() == .enabled(.none))
            let deviceID = try #require(try await first.boundDeviceID())
            #expect(try await first.client.devices().map(\.deviceID) == [deviceID])
            // The device key and the flow's DPoP key (no PIN: it signs every request) are TPM keys;
            // the device id is an item in the keyring, as TPM ciphertext, not the id itself.
            #expect(try await machine.tpm.vault.keyExists("acme-deviceKey.device-key"))
            #expect(try await machine.tpm.vault.keyExists("acme-deviceKey.dpop-key"))
            let raw = try machine.keyring.rawSecret(service: Self.service, name: "acme-deviceKey.device-id")
            #expect(!raw.isEmpty)
            #expect(raw.range(of: Data(deviceID.utf8)) == nil)

            // Next launch: a wrong PIN gets no session and sends no signature.
            machine.tpm.type("135799")
            let relaunched = try machine.app()
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await relaunched.unlock()
            }
            #expect(await relaunched.client.currentSession == nil)

            // The right PIN: the TPM signs the server's challenge, the server verifies it.
            machine.tpm.type(pin)
            let unlocked = try await relaunched.unlock()
            let me = try await relaunched.client.me()
            #expect(me.authMethod == .device)
            #expect(me.userID == userID)
            #expect(unlocked.sessionID == me.sessionID)
            #expect(try machine.tpm.tpm.transientHandles() == [])

            // Story 3: the TPM signs the exact payload after a fresh PIN; the server approves it once.
            let approvals = try TransactionApproval(
                client: relaunched.client, device: machine.device, deviceID: deviceID,
                serverID: Self.serverID,
                keyName: "acme-deviceKey.device-key", policy: .devicePasscode)
            let recipient = "0x12a4c8b2e19d7f3a5c6b8e0d4f2a1b3c9d7e5fef"
            let pending = try await approvals.request(
                .transfer(try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: recipient)))
            #expect(pending.recipient == recipient)
            machine.tpm.type("135799")
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                _ = try await approvals.approve(pending.confirm())
            }
            machine.tpm.type(pin)
            let signature = try await approvals.sign(pending.confirm())
            #expect(
                try await machine.tpm.vault.isValidSignature(
                    signature, for: pending.payloadBytes, by: "acme-deviceKey.device-key"))
            let confirmed = try await relaunched.client.confirmApproval(
                pending.approvalID, signature: signature)
            #expect(confirmed.status == .approved)
            let replay = await #expect(throws: KeyboundError.self) {
                _ = try await relaunched.client.confirmApproval(pending.approvalID, signature: signature)
            }
            #expect(replay?.serverCode == .challengeUsed)
        }

        @Test func aTokenSealedUnderThePINLogsInAndTheAppLockTakesThePIN() async throws {
            let machine = try await Machine()
            defer { machine.stop() }
            let userID = try await KeyboundClient(baseURL: machine.baseURL, urlSession: machine.session)
                .createAccount(username: "ada", password: Self.password)

            // Story 1: the refresh token goes into a keyring item sealed under a PIN-bound TPM key.
            let first = try machine.app(.token)
            try await first.loginWithPassword(username: "ada", password: Self.password)
            try await first.enable()
            let raw = try machine.keyring.rawSecret(service: Self.service, name: "acme-token.refresh-token")
            #expect(raw.count > 65 + 12 + 16)  // TPM ciphertext: an ephemeral point, a nonce, a tag

            let relaunched = try machine.app(.token)
            machine.tpm.type("135799")
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await relaunched.unlock()
            }
            #expect(await relaunched.client.currentSession == nil)
            machine.tpm.type(pin)
            try await relaunched.unlock()
            #expect(try await relaunched.client.me().userID == userID)

            // Story 4: the app lock's default policy (biometrics or passcode) takes the PIN here.
            let time = ManualMonotonicClock()
            let lock = try AppLock(verifier: machine.device.verifier, gracePeriod: 30, clock: time.clock)
            await lock.sessionStarted()
            await lock.didEnterBackground()
            time.advance(120)
            #expect(await lock.willEnterForeground() == .locked)
            machine.tpm.type("135799")
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await lock.unlock(reason: "Unlock Acme")
            }
            #expect(await lock.state == .locked)
            machine.tpm.type(pin)
            try await lock.unlock(reason: "Unlock Acme")
            #expect(await lock.state == .unlocked)
        }

        @Test func afterTheTPMIsClearedTheUserEnrollsAgain() async throws {
            let machine = try await Machine()
            defer { machine.stop() }
            let (_, first) = try await machine.enabledApp()
            let oldDeviceID = try #require(try await first.boundDeviceID())

            // A new owner seed: the device key, the PIN object and every item's key no longer load.
            try machine.tpm.tpm.run("tpm2_clear", [])
            let relaunched = try machine.app()
            await expectKeyboundError(.invalidated, recovery: .reenroll) { try await relaunched.unlock() }

            // The dead key and PIN are gone, as on a phone after an erase …
            #expect(try await relaunched.state() == .invalidated)
            #expect(!(try await machine.tpm.vault.isPINSet()))
            // … and the recovery is what it says: a password login, a new PIN, enable again.
            try await machine.tpm.vault.setPIN(pin)
            try await relaunched.loginWithPassword(username: "ada", password: Self.password)
            try await relaunched.enable()
            let newDeviceID = try #require(try await relaunched.boundDeviceID())
            #expect(newDeviceID != oldDeviceID)
            let again = try machine.app()
            _ = try await again.unlock()
            #expect(try await again.client.me().authMethod == .device)
        }

        @Test func removingThePINInvalidatesTheLoginUntilItIsEnabledAgain() async throws {
            let machine = try await Machine()
            defer { machine.stop() }
            _ = try await machine.enabledApp()

            // As removing a passcode destroys `whenPasscodeSetThisDeviceOnly` keys.
            try await machine.tpm.vault.removePIN()
            let relaunched = try machine.app()
            #expect(try await relaunched.state() == .invalidated)
            await expectKeyboundError(.invalidated, recovery: .reenroll) { try await relaunched.unlock() }
            // Without a PIN the flow cannot bind again: the vault says what to do.
            try await relaunched.loginWithPassword(username: "ada", password: Self.password)
            await expectKeyboundError(.passcodeNotSet, recovery: .setPasscode) {
                try await relaunched.enable()
            }
            try await machine.tpm.vault.setPIN(pin)
            try await relaunched.enable()
            _ = try await machine.app().unlock()
        }

        @Test func theLinuxVerifierAnswersOnlyWhatItCanEnforce() async throws {
            let machine = try await Machine()
            defer { machine.stop() }
            let verifier = machine.device.verifier
            let availability = await verifier.availability()
            #expect(availability.biometryType == .none)
            #expect(availability.isPasscodeSet)
            #expect(try await verifier.verify(.devicePasscode, prompt: prompt).factors == [.passcode])
            #expect(try await verifier.verify(.biometryOrPasscode, prompt: prompt).factors == [.passcode])
            // No reader: a finger-only policy is what a device without a sensor says, not a PIN.
            await expectKeyboundError(.biometryNotAvailable) {
                try await verifier.verify(.biometryCurrentSet, prompt: prompt)
            }
            let both = try AccessPolicy(
                accessibility: .whenPasscodeSetThisDeviceOnly, constraints: [.biometryAny, .devicePasscode],
                combination: .and)
            await expectKeyboundError(.notSupported) { try await verifier.verify(both, prompt: prompt) }
            // The flows' material refuses a finger (nothing could enforce it); without a reader,
            // enabling a biometric login says there is none.
            await expectKeyboundError(.notSupported) {
                _ = try await machine.device.vault.createKey("finger-key", policy: .biometryCurrentSet)
            }
            await expectKeyboundError(.notSupported) {
                try await machine.device.store.store(
                    Data("token".utf8), as: "finger-item", policy: .biometryAny, verification: nil)
            }
            let login = try BiometricLogin(
                client: KeyboundClient(baseURL: machine.baseURL, urlSession: machine.session),
                device: machine.device,
                configuration: .init(
                    clientID: "kiosk-bio", serverID: Self.serverID, policy: .biometryCurrentSet,
                    keyProtection: .software, namespace: "acme-bio"))
            _ = try await KeyboundClient(baseURL: machine.baseURL, urlSession: machine.session)
                .createAccount(username: "ada", password: Self.password)
            try await login.loginWithPassword(username: "ada", password: Self.password)
            await expectKeyboundError(.biometryNotAvailable) { try await login.enable() }
        }
    }

    /// A monotonic clock moved by hand, for the app lock.
    final class ManualMonotonicClock: Sendable {
        private let elapsed = Mutex<TimeInterval>(0)
        var clock: MonotonicClock { MonotonicClock { [elapsed] in elapsed.withLock { $0 } } }
        func advance(_ seconds: TimeInterval) { elapsed.withLock { $0 += seconds } }
    }
#endif
