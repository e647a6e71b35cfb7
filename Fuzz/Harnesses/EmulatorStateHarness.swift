import Foundation

@testable import Keybound
@testable import KeyboundEmulator

extension Harness {
    /// The emulator's state file after its seal is opened (the JSON `save(to:key:)` writes). A
    /// state that decodes must give a device that works: every call answers or throws, none
    /// crashes. The prompts consume the outcomes queued in the file itself.
    static let emulatorState = Harness(
        name: "emulator-state",
        covers: "KeyboundEmulator: the state file's decoder, then every operation on the decoded device"
    ) { data in
        guard
            let device = try? EmulatedDevice(
                statePlaintext: data, clock: Clock { Date(timeIntervalSince1970: 1_780_000_000) },
                random: RandomSource { Data(repeating: 0x5A, count: $0) })
        else { return }
        blocking { await exercise(device) }
    }
}

/// What an app and the CLI do with a device: look at it, prompt (as the file left it, then
/// unlocked), read every item, use every key.
private func exercise(_ device: EmulatedDevice) async {
    let snapshot = await device.snapshot()
    _ = await device.availability()
    let prompt = try? VerificationPrompt(reason: "fuzz")
    var verifications: [Verification] = []
    for unlocked in [false, true] {
        if unlocked { await device.unlock() }
        for policy in [AccessPolicy.biometryCurrentSet, .biometryOrPasscode, .devicePasscode] {
            if let prompt, let verification = try? await device.verify(policy, prompt: prompt) {
                verifications.append(verification)
            }
        }
    }
    for name in snapshot.items.map(ItemName.init(reserved:)) {
        _ = try? await device.itemPolicy(name)
        for verification in [nil] + verifications {
            _ = try? await device.read(name, verification: verification)
        }
    }
    let message = Data("fuzz".utf8)
    for name in snapshot.keys.map(ItemName.init(reserved:)) {
        _ = try? await device.keyPolicy(name)
        _ = try? await device.publicKey(name)
        for verification in [nil] + verifications {
            if let signature = try? await device.sign(message, with: name, verification: verification) {
                _ = try? await device.isValidSignature(signature, for: message, by: name)
            }
            if let sealed = try? await device.encrypt(message, for: name) {
                _ = try? await device.decrypt(sealed, with: name, verification: verification)
            }
        }
    }
    _ = try? await device.enroll()
    _ = await device.snapshot()
}

/// Runs `body` to its end from synchronous code (the fuzzer's callback).
private func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        await body()
        done.signal()
    }
    done.wait()
}
