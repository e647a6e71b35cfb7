import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import Testing

/// The server example of the DocC article "Testing with the emulator"
/// (Sources/Keybound/Keybound.docc/TestingWithTheEmulator.md), verbatim, so it cannot rot.
@Suite struct DocumentationExampleTests {
    @Test func faceIDLoginAfterThePassword() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent(UUID().uuidString, isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = Configuration.testing(
            databasePath: directory.appendingPathComponent("keybound.sqlite").path)
        configuration.serverID = "api.acme.test"
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop(gracePeriod: 1) }

        let phone = try EmulatedDevice(biometry: .faceID)
        let client = KeyboundClient(baseURL: try #require(server.baseURL))
        _ = try await client.createAccount(username: "ada", password: "correct horse battery staple")
        let login = try BiometricLogin(
            client: client, device: DeviceBackends(phone),
            configuration: .init(clientID: "phone-1", serverID: "api.acme.test", keyProtection: .emulator))
        try await login.loginWithPassword(username: "ada", password: "correct horse battery staple")
        try await login.enable()

        await phone.present(.match)
        let session = try await login.unlock()
        #expect(try await client.me().authMethod == .device)
        #expect(await client.currentSession == session)
    }
}
