import Foundation
import KeyboundTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// docs/design.md, The emulator, rule 9: the state file is "written atomically", so a save cut
/// off at any byte never loses the previous state.
///
/// The crash is real and lands at a chosen byte. The command runs under `prlimit --fsize=N`: the
/// kernel writes the first N bytes of the new file, then refuses the rest (EFBIG; its SIGXFSZ
/// does not end the process, because the save runs on a Dispatch worker thread, which blocks
/// that signal). Under `strace`, the process is then killed with SIGKILL as it makes its first
/// `unlink` — the clean-up of the failed save — so nothing runs after the torn bytes, as in a
/// crash (or a power cut) in the middle of the write.
@Suite("State file crash safety")
struct StateFileCrashTests {
    static let prlimit = "/usr/bin/prlimit"
    static let strace = "/usr/bin/strace"
    /// Both tools installed, strace allowed to trace here (a container may forbid ptrace), and no
    /// sanitizer runtime in the child: under ThreadSanitizer the cut child never left its torn
    /// temporary file (its runtime's own file work meets the limit and the injected kill first),
    /// so the test would check the runtime, not the save (scripts/test-sanitizers.sh sets
    /// KEYBOUND_SANITIZER).
    static let toolsAvailable: Bool = {
        guard ProcessInfo.processInfo.environment["KEYBOUND_SANITIZER"] == nil,
            FileManager.default.isExecutableFile(atPath: prlimit),
            FileManager.default.isExecutableFile(atPath: strace)
        else { return false }
        let probe = SpawnedProcess()
        probe.executableURL = URL(fileURLWithPath: strace)
        probe.arguments = ["-qq", "-o", "/dev/null", "/bin/true"]
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    /// Runs `keybound ARGUMENTS…` with files limited to `fileSize` bytes, killed at its first
    /// `unlink`.
    private static func runLimited(_ sandbox: Sandbox, fileSize: Int, _ arguments: [String], input: Data)
        throws -> (crashed: Bool, status: Int32)
    {
        var environment = ProcessInfo.processInfo.environment
        environment["KEYBOUND_DEVICE"] = nil
        let files = sandbox.directory.appendingPathComponent("limited-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        let child = try ChildProcess(
            URL(fileURLWithPath: prlimit),
            [
                "--fsize=\(fileSize)", strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=unlink,unlinkat",
                "-e", "inject=unlink,unlinkat:signal=KILL", try KeyboundExecutable.url().path,
            ] + arguments, input: input,
            environment: environment, workingDirectory: sandbox.directory, files: files, name: "limited")
        try child.process.run()
        child.process.waitUntilExit()
        return (child.crashed, child.process.terminationStatus)
    }

    @Test(
        .enabled(
            if: toolsAvailable, "needs prlimit (util-linux) and strace allowed to trace, and no sanitizer"))
    func aSaveCutOffAtAnyByteLeavesThePreviousState() throws {
        let sandbox = try Sandbox()
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "first", "--policy", "none", input: "one"))
        let size = try Data(contentsOf: sandbox.state).count
        // The new state is larger than the old one: every cut below lands inside its write.
        let value = Data(repeating: UInt8(ascii: "x"), count: 4096)
        var random = SystemRandomNumberGenerator()
        let cuts =
            [0, 1, size / 2, size - 1, size, size + 1]
            + (0..<4).map { _ in Int.random(in: 0..<(size + value.count), using: &random) }
        for cut in cuts {
            // Every command saves (a read too, with a fresh nonce): compare with the latest.
            let previous = try Data(contentsOf: sandbox.state)
            let run = try Self.runLimited(
                sandbox, fileSize: cut,
                ["device", "--state", sandbox.state.path, "--json", "store", "second", "--policy", "none"],
                input: value)
            // Killed in the middle of the save: the torn new state, exactly its first `cut`
            // bytes, lies beside the state file.
            #expect(run.crashed && run.status == SIGKILL, "cut at \(cut): \(run)")
            let beside = try FileManager.default.contentsOfDirectory(atPath: sandbox.directory.path)
                .filter { $0.hasPrefix(".device.state.") }
                .map { try Data(contentsOf: sandbox.directory.appendingPathComponent($0)).count }
            #expect(beside.contains(cut), "cut at \(cut): \(beside)")
            // The previous state, byte for byte, and it loads.
            #expect(try Data(contentsOf: sandbox.state) == previous, "cut at \(cut)")
            #expect(try expectSuccess(try sandbox.device("read", "first"))["value"] as? String == "one")
            try expectFailure(
                try sandbox.device("read", "second"), code: "itemNotFound", native: -25300, recovery: "none")
        }
        // What a cut-off save left behind does not stand in the way of the next one.
        try expectSuccess(try sandbox.device(["store", "second", "--policy", "none"], input: value))
        #expect(
            try expectSuccess(try sandbox.device("read", "second"))["value"] as? String
                == String(decoding: value, as: UTF8.self))
        #expect(try expectSuccess(try sandbox.device("read", "first"))["value"] as? String == "one")
    }

    /// The first save also creates the key that seals the state: cut off in the middle of that,
    /// it must leave no half key that would refuse every later `init` ("the key file is damaged").
    @Test(
        .enabled(
            if: toolsAvailable, "needs prlimit (util-linux) and strace allowed to trace, and no sanitizer"))
    func aFirstSaveCutOffInsideTheKeyLeavesNothingInTheWay() throws {
        for cut in [0, 1, 16, 31] {
            let sandbox = try Sandbox()
            let run = try Self.runLimited(
                sandbox, fileSize: cut, ["device", "--state", sandbox.state.path, "--json", "init"],
                input: Data())
            #expect(run.crashed && run.status == SIGKILL, "cut at \(cut): \(run)")
            try expectSuccess(try sandbox.device("init"))
            try expectSuccess(try sandbox.device("store", "first", "--policy", "none", input: "one"))
            #expect(try expectSuccess(try sandbox.device("read", "first"))["value"] as? String == "one")
        }
    }
}
