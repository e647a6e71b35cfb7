import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// Story 5: an enrollment change destroys biometric login in both modes; the app says so
/// (`invalidated`, not "not found"), removes the dead material, and re-enrollment binds a new
/// key while the server revokes the old one.
@Suite("Story 5: enrollment change")
struct EnrollmentChangeTests {
    @Test(arguments: ["enroll", "unenrollAndEnroll"])
    func bothModesAreInvalidatedAndReenrollmentRevokesTheOldKey(change: String) async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let tokenApp = try await backend.enabledApp(.token, device: phone)
        let keyApp = try await backend.enabledApp(.deviceKey, device: phone)
        let oldDeviceID = try #require(try await keyApp.boundDeviceID())
        #expect(try await tokenApp.state() == .enabled(.faceID))
        #expect(try await keyApp.state() == .enabled(.faceID))

        // Someone adds a face in Settings (or removes them all and enrolls one again).
        if change == "enroll" {
            try await phone.enroll()
        } else {
            await phone.unenrollAll()
            try await phone.enroll()
        }

        // Both modes know without a prompt.
        #expect(try await tokenApp.state() == .invalidated)
        #expect(try await keyApp.state() == .invalidated)
        #expect(await phone.snapshot().items.contains("acme-token.refresh-token") == false)
        #expect(await phone.snapshot().keys.contains("acme-deviceKey.device-key") == false)

        // Unlock reports it, with the re-enrollment guidance, and shows no prompt: the new
        // face could not open the old material anyway. Nor is the server asked for anything.
        let challengesBefore = try await backend.requests(API.createChallenge)
        let flows = [
            (try backend.app(.token, device: phone), "acme-token.refresh-token"),
            (try backend.app(.deviceKey, device: phone), "acme-deviceKey.device-key"),
        ]
        for (app, material) in flows {
            await expectKeyboundError(.invalidated, recovery: .reenroll) { try await app.unlock() }
            #expect(await phone.snapshot().queuedOutcomes == 0)
            #expect(await app.client.currentSession == nil)
            // The dead material and its marker are gone: next time it is simply not enabled.
            #expect(try await app.state() == .notEnabled)
            let left = await phone.snapshot()
            #expect(!(left.items + left.keys).contains { $0.hasSuffix(material) }, "\(left)")
            await expectKeyboundError(.itemNotFound) { try await app.unlock() }
        }
        #expect(try await backend.requests(API.createChallenge) == challengesBefore)

        // Re-enrollment: password login, enable again.
        let keyAgain = try await backend.enabledApp(.deviceKey, device: phone)
        let newDeviceID = try #require(try await keyAgain.boundDeviceID())
        #expect(newDeviceID != oldDeviceID)
        let devices = try await keyAgain.client.devices()
        #expect(devices.first { $0.deviceID == oldDeviceID }?.status == .revoked)
        #expect(devices.first { $0.deviceID == newDeviceID }?.status == .active)
        // The old device id is dead on the server: no challenge for it.
        await expectKeyboundError(.server, recovery: .usePassword, serverCode: .deviceRevoked) {
            try await keyAgain.client.loginChallenge(deviceID: oldDeviceID)
        }
        // The new key logs in with the new face.
        let relaunched = try backend.app(.deviceKey, device: phone)
        await phone.present(.match)
        try await relaunched.unlock()
        #expect(try await relaunched.client.me().authMethod == .device)

        // Token mode re-enrolls the same way.
        _ = try await backend.enabledApp(.token, device: phone)
        let tokenRelaunched = try backend.app(.token, device: phone)
        await phone.present(.match)
        try await tokenRelaunched.unlock()
        #expect(try await tokenRelaunched.client.me().username == "ada")
    }
}
