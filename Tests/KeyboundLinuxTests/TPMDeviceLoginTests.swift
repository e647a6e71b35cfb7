#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundEmulator
    import KeyboundServer
    import KeyboundTestSupport
    import KeyboundWire
    import Testing

    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// Story 2 (device binding, device-key login) with the device key in a TPM: the SDK's own
    /// BiometricLogin flow, unchanged, against a real server over loopback.
    @Suite("Device-key login with a TPM key", .softwareTPM)
    struct TPMDeviceLoginTests {
        static let password = "correct horse battery staple"
        static let serverID = "linux.keybound.test"

        /// A server on a free loopback port with a fresh SQLite file; stopped by the caller.
        private func startServer() throws -> (Server, URL, URL) {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-tpm-e2e-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var configuration = Configuration.testing(
                databasePath: directory.appendingPathComponent("keybound.sqlite").path)
            configuration.serverID = Self.serverID
            let server = try Server(configuration: configuration)
            try server.start()
            return (server, try #require(server.baseURL), directory)
        }

        private func app(_ baseURL: URL, _ device: DeviceBackends, _ session: URLSession) throws
            -> BiometricLogin
        {
            try BiometricLogin(
                client: KeyboundClient(baseURL: baseURL, urlSession: session), device: device,
                configuration: .init(
                    clientID: "kiosk-1", serverID: Self.serverID, mode: .deviceKey, policy: .devicePasscode,
                    // The server's vocabulary has no TPM yet (issue 27, item 5): self-reported anyway.
                    deviceName: "Front desk kiosk", keyProtection: .software, unlockReason: "Log in to Acme",
                    namespace: "acme"))
        }

        @Test func aDeviceBoundWithATPMKeyLogsIn() async throws {
            let (server, baseURL, directory) = try startServer()
            let session = URLSession(configuration: .ephemeral)
            defer {
                session.finishTasksAndInvalidate()
                server.stop(gracePeriod: 0)
                try? FileManager.default.removeItem(at: directory)
            }
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            // Items (the device id, invalidation markers) in an emulated keychain: the Secret
            // Service store is issue 27's next piece. Keys, signatures and the PIN are the TPM's.
            let keychain = try EmulatedDevice(biometry: .none, passcode: "123456", enrolledIdentities: 0)
            let device = DeviceBackends(store: keychain, vault: fixture.vault, verifier: fixture.verifier)
            let userID = try await KeyboundClient(baseURL: baseURL, urlSession: session)
                .createAccount(username: "ada", password: Self.password)

            let first = try app(baseURL, device, session)
            try await first.loginWithPassword(username: "ada", password: Self.password)
            try await first.enable()
            #expect(try await first.state() == .enabled(.none))
            let deviceID = try #require(try await first.boundDeviceID())
            #expect(try await first.client.devices().map(\.deviceID) == [deviceID])
            // The flow's DPoP key is a TPM key too (no PIN: it signs every request).
            #expect(try await fixture.vault.keyExists("acme.dpop-key"))

            // Next launch: a wrong PIN gets no session and sends no signature.
            fixture.type("135799")
            let relaunched = try app(baseURL, device, session)
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await relaunched.unlock()
            }
            #expect(await relaunched.client.currentSession == nil)

            // The right PIN: the TPM signs the server's challenge, the server verifies it.
            fixture.type(pin)
            let unlocked = try await relaunched.unlock()
            let me = try await relaunched.client.me()
            #expect(me.authMethod == .device)
            #expect(me.userID == userID)
            #expect(unlocked.sessionID == me.sessionID)
            #expect(try fixture.tpm.transientHandles() == [])
        }

        @Test func afterTheTPMIsClearedTheUserEnrollsAgain() async throws {
            let (server, baseURL, directory) = try startServer()
            let session = URLSession(configuration: .ephemeral)
            defer {
                session.finishTasksAndInvalidate()
                server.stop(gracePeriod: 0)
                try? FileManager.default.removeItem(at: directory)
            }
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            let keychain = try EmulatedDevice(biometry: .none, passcode: "123456", enrolledIdentities: 0)
            let device = DeviceBackends(store: keychain, vault: fixture.vault, verifier: fixture.verifier)
            _ = try await KeyboundClient(baseURL: baseURL, urlSession: session)
                .createAccount(username: "ada", password: Self.password)
            let first = try app(baseURL, device, session)
            try await first.loginWithPassword(username: "ada", password: Self.password)
            try await first.enable()

            // A new owner seed: the device key (and the PIN object) no longer load.
            try fixture.tpm.run("tpm2_clear", [])
            let relaunched = try app(baseURL, device, session)
            await expectKeyboundError(.invalidated, recovery: .reenroll) { try await relaunched.unlock() }

            // The dead key and PIN are gone, as on a phone after an erase …
            #expect(try await relaunched.state() == .invalidated)
            #expect(!(try await fixture.vault.isPINSet()))
            // … and the recovery is what it says: a password login, a new PIN, enable again.
            try await fixture.vault.setPIN(pin)
            try await relaunched.loginWithPassword(username: "ada", password: Self.password)
            try await relaunched.enable()
            let again = try app(baseURL, device, session)
            _ = try await again.unlock()
            #expect(try await again.client.me().authMethod == .device)
        }
    }
#endif
