import Foundation
import Keybound
import KeyboundEmulator

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var clock: Clock { Clock { [current] in current.withLock { $0 } } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

let prompt = try! VerificationPrompt(reason: "Log in to Acme")  // a valid literal

/// A fresh Face ID device with a manual clock and deterministic randomness.
func makeDevice(
    biometry: BiometryType = .faceID, passcode: String? = "123456", enrolled: Int = 1
) throws -> (EmulatedDevice, ManualClock) {
    let time = ManualClock()
    let device = try EmulatedDevice(
        biometry: biometry, passcode: passcode, enrolledIdentities: enrolled, clock: time.clock,
        random: .seeded(7))
    return (device, time)
}

/// Runs `body` and returns the KeyboundError it threw (nil if it did not throw one).
func keyboundError(_ body: () async throws -> some Any) async -> KeyboundError? {
    do {
        _ = try await body()
        return nil
    } catch let error as KeyboundError {
        return error
    } catch {
        return nil
    }
}
