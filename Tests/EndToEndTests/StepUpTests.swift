import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// The step-up window is the server's (`Configuration.stepUpWindow`): the SDK learns it from
/// `GET /v1/me` (`step_up_expires_at`) and never assumes one of its own.
@Suite("The step-up window comes from the server")
struct StepUpTests {
    /// A server with a 60 s window: after 60 s the SDK asks for a fresh password login before it
    /// touches the bound key, so the key already enabled keeps working; a fresh login lets the
    /// new binding through.
    @Test func aSixtySecondWindowAsksForThePasswordAfterSixtySeconds() async throws {
        let backend = try Backend { $0.stepUpWindow = 60 }
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try backend.app(.deviceKey, device: phone)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        let me = try await app.client.me()
        #expect(me.stepUpExpiresAt == me.authTime.addingTimeInterval(60))
        try await app.enable()
        let deviceID = try #require(try await app.boundDeviceID())
        let keyBefore = try await phone.publicKey("acme-deviceKey.device-key")

        // 61 s later, turning it on again (say, after the user toggled it) needs the password.
        backend.clock.advance(by: 61)
        await expectKeyboundError(.server, recovery: .usePassword, serverCode: .stepUpRequired) {
            try await app.enable()
        }
        // The SDK stopped before it made a new key: nothing was sent, the bound key still logs in.
        #expect(try await backend.requests(API.bindDevice, status: 403) == 0)
        #expect(try await phone.publicKey("acme-deviceKey.device-key") == keyBefore)
        #expect(try await app.boundDeviceID() == deviceID)
        await phone.present(.match)
        #expect(try await backend.app(.deviceKey, device: phone).unlock().userID == me.userID)

        // A fresh password login opens the window again.
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        try await app.enable()
        #expect(try await app.boundDeviceID() != deviceID)
    }

    /// A server with a window longer than 5 minutes: the SDK binds after 10 minutes, as the
    /// server allows (a hard-coded 5 minutes refused it).
    @Test func aLongerWindowIsHonouredToo() async throws {
        let backend = try Backend { $0.stepUpWindow = 15 * 60 }
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try backend.app(.deviceKey, device: phone)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        backend.clock.advance(by: 10 * 60)
        try await app.enable()
        #expect(try await app.boundDeviceID() != nil)
    }
}
