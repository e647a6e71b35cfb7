import Foundation
import Keybound
import KeyboundEmulator
import KeyboundTestSupport

let prompt = try! VerificationPrompt(reason: "Log in to Acme")  // a valid literal

/// A fresh Face ID device with a manual clock and deterministic randomness.
func makeDevice(
    biometry: BiometryType = .faceID, passcode: String? = "123456", enrolled: Int = 1
) throws -> (EmulatedDevice, ManualClock) {
    let time = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
    let device = try EmulatedDevice(
        biometry: biometry, passcode: passcode, enrolledIdentities: enrolled, clock: time.clock,
        random: .seeded(7))
    return (device, time)
}
