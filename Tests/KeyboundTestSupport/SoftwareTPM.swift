import Foundation
import Keybound

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A throwaway TPM 2.0 for tests: `swtpm socket --tpm2` on two free loopback ports (commands
/// and control) with a fresh state directory, already started (`startup-clear`), its
/// dictionary-attack lockout configured through tpm2-tools; stopped and deleted by ``stop()``,
/// at exit, or, should the test process die first, by a small watchdog shell.
///
/// Each test that changes the lockout gets its own: the lockout is the whole TPM's. There is no
/// resource manager in front of it, so whatever a client leaves loaded stays
/// (``transientHandles()`` shows it).
public final class SoftwareTPM: Sendable {
    /// Why no TPM could be started (swtpm or tpm2-tools is missing, or swtpm failed).
    public struct Unavailable: Error, CustomStringConvertible {
        /// What is missing or what failed.
        public let description: String
    }

    /// Whether swtpm runs here: one is started and stopped on first use; or why it does not.
    /// Before that, the environment tss2 reads is set, once (``capturePath``).
    public static let availability: Result<Void, Unavailable> = Result {
        _ = environment
        try SoftwareTPM().stop()
    }.mapError { $0 as? Unavailable ?? Unavailable(description: "\($0)") }

    /// Where tss2's `pcap` TCTI (`pcap:swtpm:…`) writes what crosses the bus (`TCTI_PCAP_FILE`):
    /// one file for the process, so only one test at a time may use that TCTI.
    public static let capturePath = FileManager.default.temporaryDirectory
        .appendingPathComponent("keybound-tpm-capture-\(getpid()).pcap").path

    /// Sets what tss2 reads from the environment, once, before any TPM is started: tss2 logs every
    /// TPM error it passes on (a wrong PIN is a test's point) to standard error unless told not
    /// to; its pcap TCTI writes to ``capturePath``. (`setenv` races with a concurrent `getenv`:
    /// doing it once, early, keeps that window small.)
    private static let environment: Void = {
        setenv("TSS2_LOG", "all+none", 0)
        setenv("TCTI_PCAP_FILE", capturePath, 1)
    }()

    /// The command port on 127.0.0.1.
    public let port: UInt16
    /// The TCTI configuration that reaches it (`swtpm:host=127.0.0.1,port=…`).
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }
    /// The TPM's state directory (its NV memory, including the owner seed).
    public let stateDirectory: URL
    private let controlPort: UInt16
    private let process: SpawnedProcess
    private let folder: URL
    private let stopped = Mutex(false)

    /// Starts a new TPM with the given dictionary-attack parameters (the TPM's defaults are 3
    /// tries, then 1000 s per try; these defaults leave room for the failures a test makes).
    /// - Throws: ``Unavailable``.
    public init(maxTries: Int = 32, recoveryTime: Int = 1000, lockoutRecovery: Int = 1000) throws {
        guard let swtpm = Self.tool("swtpm"), Self.tool("tpm2_dictionarylockout") != nil,
            Self.tool("tpm2_getcap") != nil
        else {
            throw Unavailable(
                description: "swtpm or tpm2-tools is not installed (run `make test-deps`, which installs "
                    + "Debian's swtpm and tpm2-tools)")
        }
        _ = Self.environment
        folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-tpm-\(UUID().uuidString.prefix(8))")
        stateDirectory = folder.appendingPathComponent("state")
        try FileManager.default.createDirectory(
            at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // swtpm's TCTI finds the control channel at the command port + 1.
        port = try LoopbackPorts.claimPair()
        controlPort = port + 1
        do {
            process = SpawnedProcess()
            process.executableURL = swtpm
            process.arguments = [
                "socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory.path)",
                "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(controlPort),bindaddr=127.0.0.1",
                "--flags", "not-need-init,startup-clear", "--log", "file=\(folder.path)/swtpm.log",
            ]
            let log = folder.appendingPathComponent("swtpm.out")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let output = try FileHandle(forWritingTo: log)
            process.standardOutput = output
            process.standardError = output
            try process.run()
            try? output.close()
        } catch {
            LoopbackPorts.release(port)
            LoopbackPorts.release(controlPort)
            try? FileManager.default.removeItem(at: folder)
            throw Unavailable(description: "swtpm did not start: \(error)")
        }
        Self.watch(pid: process.processIdentifier, folder: folder)
        do {
            try waitUntilListening()
            try setDictionaryAttack(
                maxTries: maxTries, recoveryTime: recoveryTime, lockoutRecovery: lockoutRecovery)
        } catch {
            stop()
            throw error as? Unavailable ?? Unavailable(description: "\(error)")
        }
    }

    deinit { stop() }

    /// Stops the TPM (its state is thrown away) and gives its ports back. Later calls do nothing.
    public func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: folder)
        LoopbackPorts.release(port)
        LoopbackPorts.release(controlPort)
    }

    // MARK: The TPM's settings, through tpm2-tools

    /// `tpm2_dictionarylockout --setup-parameters`: failures before lockout, seconds per
    /// forgiven failure, seconds before the lockout authorization may be tried again after a
    /// failure of its own.
    public func setDictionaryAttack(maxTries: Int, recoveryTime: Int, lockoutRecovery: Int) throws {
        try run(
            "tpm2_dictionarylockout",
            [
                "--setup-parameters", "--max-tries=\(maxTries)", "--recovery-time=\(recoveryTime)",
                "--lockout-recovery-time=\(lockoutRecovery)",
            ])
    }

    /// `tpm2_dictionarylockout --clear-lockout`: the failure counter back to 0.
    public func clearLockout() throws {
        try run("tpm2_dictionarylockout", ["--clear-lockout"])
    }

    /// The TPM's dictionary-attack failure counter, `TPM2_PT_LOCKOUT_COUNTER`
    /// (`tpm2_getcap properties-variable`): what the TPM itself counted.
    public func lockoutCounter() throws -> Int {
        let output = try run("tpm2_getcap", ["properties-variable"])
        for line in output.split(separator: "\n") where line.hasPrefix("TPM2_PT_LOCKOUT_COUNTER:") {
            let value = line.split(separator: " ").last.map(String.init) ?? ""
            if let count = Int(value.replacingOccurrences(of: "0x", with: ""), radix: 16) { return count }
        }
        throw Unavailable(description: "tpm2_getcap did not report TPM2_PT_LOCKOUT_COUNTER: \(output)")
    }

    /// The handles of the transient objects loaded in the TPM now (`tpm2_getcap handles-transient`).
    public func transientHandles() throws -> [String] { try handles("handles-transient") }

    /// The handles of the sessions loaded in the TPM now (`tpm2_getcap handles-loaded-session`).
    public func loadedSessions() throws -> [String] { try handles("handles-loaded-session") }

    private func handles(_ capability: String) throws -> [String] {
        try run("tpm2_getcap", [capability]).split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("- ") }
            .map { String($0.dropFirst(2)) }
    }

    /// Runs a tpm2-tools program against this TPM and waits for it.
    /// - Returns: its standard output.
    @discardableResult
    public func run(_ tool: String, _ arguments: [String]) throws -> String {
        guard let program = Self.tool(tool) else {
            throw Unavailable(description: "\(tool) is not installed")
        }
        let name = "\(tool)-\(UUID().uuidString.prefix(8))"
        var environment = ProcessInfo.processInfo.environment
        environment["TSS2_LOG"] = "all+none"
        let child = try ChildProcess(
            program, ["--tcti=\(tcti)"] + arguments, environment: environment,
            workingDirectory: folder, files: folder, name: name)
        try child.process.run()
        child.process.waitUntilExit()
        let (out, err) = try child.output()
        for suffix in [".out", ".err"] { unlink(folder.appendingPathComponent(name + suffix).path) }
        guard child.process.terminationStatus == 0 else {
            throw Unavailable(
                description: "\(tool) \(arguments.joined(separator: " ")) failed "
                    + "(\(child.process.terminationStatus)): \(String(decoding: err, as: UTF8.self))")
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Helpers

    /// Waits (up to 10 s) until the command port accepts a connection.
    private func waitUntilListening() throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard process.isRunning else {
                let log =
                    (try? String(contentsOf: folder.appendingPathComponent("swtpm.out"), encoding: .utf8))
                throw Unavailable(description: "swtpm exited at once: \(log ?? "")")
            }
            if Self.accepts(port) { return }
            usleep(20_000)
        }
        throw Unavailable(description: "swtpm did not listen on 127.0.0.1:\(port) within 10 s")
    }

    private static func accepts(_ port: UInt16) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A program on `PATH` (or in /usr/bin, /usr/sbin).
    private static func tool(_ name: String) -> URL? {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for folder in path + ["/usr/bin", "/usr/sbin"] {
            let candidate = folder + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) {
                return URL(fileURLWithPath: candidate)
            }
        }
        return nil
    }

    /// Stops swtpm and deletes its folder if this process dies without doing it: a shell that
    /// waits while we live and the folder exists (it ignores the SIGINT and SIGHUP a Ctrl-C sends
    /// the whole group, to outlive us and clean up).
    private static func watch(pid: Int32, folder: URL) {
        let script = """
            trap '' INT HUP
            while kill -0 "$1" 2>/dev/null && [ -d "$3" ]; do sleep 1; done
            if [ -d "$3" ]; then kill "$2" 2>/dev/null; rm -rf "$3"; fi
            """
        let detached = "(" + script + "\n) >/dev/null 2>&1 &"
        let watchdog = SpawnedProcess()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        watchdog.arguments = [
            "-c", detached, "keybound-tpm-watchdog", String(getpid()), String(pid), folder.path,
        ]
        guard (try? watchdog.run()) != nil else { return }
        watchdog.waitUntilExit()
    }
}
