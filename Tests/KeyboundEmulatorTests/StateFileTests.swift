import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import Testing

/// State files that made the emulator misbehave, replayed through ``EmulatedDevice/load(from:key:clock:random:)``
/// (docs/fuzzing.md: the inputs are in Fuzz/Crashes/emulator-state/).
@Suite("State files")
struct StateFileTests {
    /// Fuzz/Crashes/emulator-state/timeout-7d1124124a19880ff46f75307d7513507ee1e5f3: a Face ID
    /// device whose passcode verifier asks for 2,000,000,000 PBKDF2 iterations, with the passcode
    /// queued for the third prompt. It loaded, and that prompt then ran for many minutes.
    static let hugeIterationCount = Data(
        #"{"biometryType":"faceID","enrolledIdentities":1,"enrollmentState":"o7zuPnvA8DCek2J3jZKyRg==","passcode":{"salt":"hC36pg6DbsZC5YhGr93TEA==","iterations":2000000000,"derived":"j5SzM9d/8TKt58jsiFNDOq855gcg8SXj2Qorj+qmwm8="},"isLocked":false,"hasUnlockedSinceBoot":true,"consecutiveFailedMatches":0,"queue":[{"userCancel":{}},{"userCancel":{}},{"passcode":{"_0":"123456"}}],"items":[],"keys":[]}"#
            .utf8)

    @Test("a state file asking for more PBKDF2 iterations than the emulator writes is refused")
    func hugeIterationCountIsRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = SecureRandom.bytes(32)
        #expect(throws: KeyboundError.invalidInput) {
            try EmulatedDevice.load(from: seal(Self.hugeIterationCount, in: directory, key: key), key: key)
        }
        // The same file with the count the emulator writes loads: only the count is refused.
        let usual = String(decoding: Self.hugeIterationCount, as: UTF8.self)
            .replacingOccurrences(of: "2000000000", with: "100000")
        _ = try EmulatedDevice.load(from: seal(Data(usual.utf8), in: directory, key: key), key: key)
    }

    /// `plaintext` sealed as ``EmulatedDevice/save(to:key:)`` seals a state, in a new owner-only file.
    private func seal(_ plaintext: Data, in directory: URL, key: Data) throws -> URL {
        // The state file format's associated data (EmulatedDevice.fileContext).
        let sealed = try AES256GCM.seal(
            plaintext, key: key, authenticating: Data("keybound-emulated-device-v2".utf8))
        let file = directory.appendingPathComponent(UUID().uuidString)
        try sealed.write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return file
    }
}
