#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundLinux
    import KeyboundTestSupport
    import Testing

    let prompt = try! VerificationPrompt(reason: "Log in to Acme")  // a valid literal
    let pin = "246810"

    /// Runs a test only where swtpm runs. Elsewhere each test is skipped, and the first one
    /// records one warning that says why: one visible line, not one per test.
    struct SoftwareTPMRequirement: SuiteTrait, TestTrait, TestScoping {
        private static let warned = Mutex(false)

        var isRecursive: Bool { true }

        func provideScope(
            for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
        ) async throws {
            guard !test.isSuite, case .failure(let error) = SoftwareTPM.availability else {
                return try await function()
            }
            let first = Self.warned.withLock { warned in
                defer { warned = true }
                return !warned
            }
            if first {
                Issue.record("the TPM tests did not run: \(error)", severity: .warning)
            }
            try Test.cancel()
        }
    }

    extension Trait where Self == SoftwareTPMRequirement {
        /// The test needs swtpm and tpm2-tools; without them it is skipped (one warning says so).
        static var softwareTPM: SoftwareTPMRequirement { SoftwareTPMRequirement() }
    }

    /// Runs a test only where a component it needs runs: `availability` says why not, or nil.
    /// Elsewhere each test is skipped, and the first one of that component records one warning
    /// that says why: one visible line per component, not one per test.
    struct ComponentRequirement: SuiteTrait, TestTrait, TestScoping {
        private static let warned = Mutex<Set<String>>([])

        /// What the tests are ("the PAM tests"), for the warning.
        let tests: String
        /// Why the component cannot run here, or nil when it can.
        let unavailable: @Sendable () -> String?

        var isRecursive: Bool { true }

        func provideScope(
            for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
        ) async throws {
            guard !test.isSuite, let reason = unavailable() else { return try await function() }
            let first = Self.warned.withLock { $0.insert(tests).inserted }
            if first {
                Issue.record("\(tests) did not run: \(reason)", severity: .warning)
            }
            try Test.cancel()
        }
    }

    /// Finds an executable on `PATH`.
    func executable(_ name: String) -> URL? { PrivateBus.program(name) }

    /// Runs `program` with `input` on standard input in `folder` and waits for it.
    /// - Returns: its standard output.
    /// - Throws: when it cannot start or exits with a status other than 0 (its standard error
    ///   in the message).
    @discardableResult
    func runTool(
        _ program: URL, _ arguments: [String], input: Data = Data(), environment: [String: String]? = nil,
        in folder: URL
    ) throws -> Data {
        let name = "\(program.lastPathComponent)-\(UUID().uuidString.prefix(8))"
        let child = try ChildProcess(
            program, arguments, input: input, environment: environment, workingDirectory: folder,
            files: folder, name: name)
        try child.process.run()
        child.process.waitUntilExit()
        let (out, err) = try child.output()
        for suffix in [".out", ".err"] { unlink(folder.appendingPathComponent(name + suffix).path) }
        guard child.process.terminationStatus == 0 else {
            throw KeyboundError(
                .unexpected,
                message: "\(program.lastPathComponent) \(arguments.joined(separator: " ")) failed "
                    + "(\(child.process.terminationStatus)): \(String(decoding: err, as: UTF8.self))")
        }
        return out
    }

    /// A fresh TPM, a vault in a fresh directory on it, and a PIN verifier that types `typed` in
    /// order (the last one again when the list runs out).
    final class TPMFixture: Sendable {
        let tpm: SoftwareTPM
        let vault: TPMKeyVault
        let directory: URL
        let time: ManualClock
        private let typed: Mutex<[String]>
        private let copies = Mutex<[URL]>([])

        init(tpm: SoftwareTPM? = nil, typed: [String] = [pin]) throws {
            let tpm = try tpm ?? SoftwareTPM()
            self.tpm = tpm
            time = ManualClock()
            directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-tpm-vault-\(UUID().uuidString.prefix(8))")
            vault = try TPMKeyVault(
                directory: directory, connection: try TPMConnection(tcti: tpm.tcti), clock: time.clock)
            self.typed = Mutex(typed)
        }

        /// The PINs the user types next.
        func type(_ pins: String...) { typed.withLock { $0 = pins } }

        /// A verifier whose user types the queued PINs.
        var verifier: TPMPINVerifier {
            TPMPINVerifier(vault: vault, clock: time.clock) { [self] _ in nextPIN() }
        }

        /// What the user types at the next PIN prompt.
        func nextPIN() -> String {
            typed.withLock { queue in
                queue.count > 1 ? queue.removeFirst() : queue.first ?? ""
            }
        }

        /// A second vault over a copy of this one's directory, on `tpm`.
        func copy(to tpm: SoftwareTPM) throws -> TPMKeyVault {
            let copy = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-tpm-vault-\(UUID().uuidString.prefix(8))")
            try FileManager.default.copyItem(at: directory, to: copy)
            copies.withLock { $0.append(copy) }
            return try TPMKeyVault(
                directory: copy, connection: try TPMConnection(tcti: tpm.tcti), clock: time.clock)
        }

        func stop() {
            tpm.stop()
            for folder in [directory] + copies.withLock({ $0 }) {
                try? FileManager.default.removeItem(at: folder)
            }
        }
    }
#endif
