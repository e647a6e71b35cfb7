import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// Device binding attested by App Attest, end to end: the emulated App Attest service under a
/// test CA, which the server is configured to trust as Apple's root, and `--app-id`.
@Suite("App Attest–attested device binding")
struct AttestedBindingTests {
    static let appID = "TEAMID1234.com.acme.bank"

    /// The test CA, issuing at `time`: the server's clock too (see ``backend(_:time:)``), so its
    /// certificates are valid at the server's time however long the test runs.
    static func authority(_ time: ManualClock) throws -> EmulatedAppAttestAuthority {
        try EmulatedAppAttestAuthority(clock: time.clock)
    }

    /// A server that takes attestations of `appID` from the development environment under the
    /// test CA, and requires them; its clock is `time`.
    static func backend(_ authority: EmulatedAppAttestAuthority, time: ManualClock) throws -> Backend {
        try Backend(clock: time) {
            $0.appIDs = [appID]
            $0.appAttestEnvironment = .development
            $0.appAttestRoots = [authority.rootCertificate]
            $0.requireAppAttest = true
        }
    }

    /// Ada's app in device-key mode, attesting its binding with `appAttest`.
    static func app(_ backend: Backend, device: EmulatedDevice, appAttest: EmulatedAppAttestService) throws
        -> BiometricLogin
    {
        try BiometricLogin(
            client: backend.client(), device: DeviceBackends(device),
            configuration: .init(
                clientID: "phone-attested", serverID: Backend.serverID, deviceName: "Ada's iPhone",
                keyProtection: .emulator, namespace: "acme-attested"),
            clock: backend.clientClock, appAttest: appAttest)
    }

    @Test("the genuine app's attested binding is accepted, and its logins carry assertions")
    func genuineAppBindsAndLogsIn() async throws {
        let time = ManualClock()
        let authority = try Self.authority(time)
        let backend = try Self.backend(authority, time: time)
        defer { backend.shutDown() }
        try await backend.createUser("ada")
        let phone = try makePhone()
        let appAttest = try EmulatedAppAttestService(device: phone, appID: Self.appID, authority: authority)

        let app = try Self.app(backend, device: phone, appAttest: appAttest)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        try await app.enable()
        let devices = try await app.client.devices()
        #expect(devices.count == 1 && devices.first?.attested == true)

        // The server requires App Attest: every device login carries an assertion whose counter
        // rises, and succeeds, also from the app relaunched (a new App Attest service: the key
        // and its counter are the device's).
        for _ in 0..<2 {
            let relaunchedAppAttest = try EmulatedAppAttestService(
                device: phone, appID: Self.appID, authority: authority)
            let relaunched = try Self.app(backend, device: phone, appAttest: relaunchedAppAttest)
            await phone.present(.match)
            try await relaunched.unlock()
            #expect(try await relaunched.client.me().authMethod == .device)
        }
    }

    @Test("where App Attest is not supported the binding goes on unattested, unless the server requires it")
    func unsupportedAppAttestBindsUnattested() async throws {
        let time = ManualClock()
        let authority = try Self.authority(time)
        let phone = try makePhone()
        // The Simulator: DCAppAttestService.isSupported is false.
        let simulator = try EmulatedAppAttestService(
            device: phone, appID: Self.appID, authority: authority, isSupported: false)

        let requiring = try Self.backend(authority, time: time)
        defer { requiring.shutDown() }
        try await requiring.createUser("ada")
        let refused = try Self.app(requiring, device: phone, appAttest: simulator)
        try await refused.loginWithPassword(username: "ada", password: Backend.password)
        // Final: binding again cannot help a device that cannot attest.
        await expectKeyboundError(
            .server, recovery: KeyboundError.Recovery.none, serverCode: .appAttestRequired
        ) {
            try await refused.enable()
        }
        #expect(try await refused.client.devices().isEmpty)
        #expect(try await refused.state() == .notEnabled)

        let lenient = try Backend(clock: time) {
            $0.appIDs = [Self.appID]
            $0.appAttestRoots = [authority.rootCertificate]
        }
        defer { lenient.shutDown() }
        try await lenient.createUser("ada")
        let app = try Self.app(lenient, device: phone, appAttest: simulator)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        try await app.enable()
        #expect(try await app.client.devices().map(\.attested) == [false])
        await phone.present(.match)
        let relaunched = try Self.app(lenient, device: phone, appAttest: simulator)
        try await relaunched.unlock()
        #expect(try await relaunched.client.me().authMethod == .device)
    }

    @Test("an attestation made for another app is refused, and nothing stays bound")
    func anotherAppIsRefused() async throws {
        let time = ManualClock()
        let authority = try Self.authority(time)
        let backend = try Self.backend(authority, time: time)
        defer { backend.shutDown() }
        try await backend.createUser("ada")
        let phone = try makePhone()
        // A repackaged app: same device, same Apple CA, another App ID.
        let repackaged = try EmulatedAppAttestService(
            device: phone, appID: "EVILTEAM99.com.acme.bank", authority: authority)

        let app = try Self.app(backend, device: phone, appAttest: repackaged)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        await expectKeyboundError(.server, serverCode: .rpIDMismatch) { try await app.enable() }
        #expect(try await app.client.devices().isEmpty)
        #expect(try await app.state() == .notEnabled)
        #expect(try await app.boundDeviceID() == nil)
    }
}
