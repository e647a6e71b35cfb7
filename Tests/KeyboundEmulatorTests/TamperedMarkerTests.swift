import Foundation
import Keybound
import KeyboundEmulator
import KeyboundTestSupport
import Testing

/// The invalidation markers are unprotected: whoever can write the store can forge one. A
/// forged marker may make Keybound report `invalidated`, but it never makes Keybound delete
/// material the backend still has.
@Suite struct TamperedMarkerTests {
    /// Rewrites the marker of `name` ("item" or "key") to claim another enrollment state.
    func tamper(_ device: EmulatedDevice, kind: String, _ name: String) async throws {
        let markerName = try JSONDecoder().decode(
            ItemName.self, from: Data("\"~keybound.\(kind).\(name)\"".utf8))
        let marker = try await device.read(markerName, verification: nil)
        var object = try #require(try JSONSerialization.jsonObject(with: marker) as? [String: Any])
        #expect(object["enrollmentState"] != nil, "the marker records the enrollment state")
        object["enrollmentState"] = Data(repeating: 0xAB, count: 16).base64EncodedString()
        try await device.store(
            try JSONSerialization.data(withJSONObject: object), as: markerName, policy: .noVerification,
            verification: nil)
    }

    @Test func aForgedMarkerNeverDeletesTheProtectedItemOrKey() async throws {
        let (device, _) = try makeDevice()
        let items = ProtectedStore(store: device, verifier: device)
        let keys = ProtectedKeys(vault: device, markers: device, verifier: device)
        try await items.store(Data("refresh-123".utf8), as: "tok", policy: .biometryCurrentSet)
        let publicKey = try await keys.createKey("device-key", policy: .biometryCurrentSet)
        try await tamper(device, kind: "item", "tok")
        try await tamper(device, kind: "key", "device-key")

        #expect(try await items.status("tok") == .invalidated)
        #expect(await expectKeyboundError { try await items.read("tok", verification: nil) } == .invalidated)
        #expect(
            await expectKeyboundError {
                try await keys.sign(Data("m".utf8), with: "device-key", verification: nil)
            }
                == .invalidated)

        // The backend still has both, untouched: the real token and the same key.
        #expect(await device.exists("tok"))
        #expect(await device.keyExists("device-key"))
        #expect(try await device.publicKey("device-key") == publicKey)
        await device.present(.match)
        let verification = try await device.verify(.biometryCurrentSet, prompt: prompt)
        #expect(try await device.read("tok", verification: verification) == Data("refresh-123".utf8))
    }

    @Test func aRealEnrollmentChangeStillCleansUpOnceTheBackendHasNothing() async throws {
        let (device, _) = try makeDevice()
        let items = ProtectedStore(store: device, verifier: device)
        try await items.store(Data("refresh-123".utf8), as: "tok", policy: .biometryCurrentSet)
        try await device.enroll()
        #expect(await expectKeyboundError { try await items.read("tok", verification: nil) } == .invalidated)
        // The backend confirmed it is gone, so the marker went too: now it is simply absent.
        #expect(try await items.status("tok") == .absent)
    }
}
