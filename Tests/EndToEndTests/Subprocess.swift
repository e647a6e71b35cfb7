import Foundation
import Keybound

/// The `keybound` executable under test: the one SwiftPM built beside the test bundle.
///
/// As in `KeyboundCLITests`: the test target depends on the `keybound` target, so SwiftPM
/// builds the executable first, into the same build-products folder as the test bundle. We
/// search upward from the test process's own bundle and path for a sibling `keybound`, so no
/// source path is baked in. `KEYBOUND_CLI_BINARY` overrides the search.
enum KeyboundExecutable {
    struct NotFound: Error, CustomStringConvertible {
        let searched: [String]
        var description: String {
            "the keybound executable was not found next to the test bundle. Build it with "
                + "`swift build --product keybound`, or set KEYBOUND_CLI_BINARY. Searched:\n  "
                + searched.joined(separator: "\n  ")
        }
    }

    static let located: Result<URL, NotFound> = locate()

    /// The executable, or a clear error saying where it was looked for.
    static func url() throws -> URL { try located.get() }

    private static func locate() -> Result<URL, NotFound> {
        if let explicit = ProcessInfo.processInfo.environment["KEYBOUND_CLI_BINARY"] {
            let url = URL(fileURLWithPath: explicit)
            return isExecutable(url) ? .success(url) : .failure(NotFound(searched: [explicit]))
        }
        var starts = [Bundle.main.bundleURL]
        starts += Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" }
        if let first = CommandLine.arguments.first {
            starts.append(URL(fileURLWithPath: first).deletingLastPathComponent())
        }
        var searched: [String] = []
        for start in starts {
            var directory = start.standardizedFileURL.resolvingSymlinksInPath()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("keybound")
                if !searched.contains(candidate.path) {
                    searched.append(candidate.path)
                    if isExecutable(candidate) { return .success(candidate) }
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        return .failure(NotFound(searched: searched))
    }

    /// A regular executable file (not, say, the `Sources/keybound` folder).
    private static func isExecutable(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            && !isDirectory.boolValue && FileManager.default.isExecutableFile(atPath: url.path)
    }
}

/// Runs a child process without blocking a thread of the cooperative pool: its output goes to
/// files (never pipes that could fill up), and its end is awaited through the termination
/// handler. A child that outlives `timeout` is terminated.
enum Subprocess {
    struct Run: Sendable {
        let status: Int32
        /// True when the process ended by a signal, not by `exit`.
        let crashed: Bool
        let timedOut: Bool
        let stdout: String
        let stderr: String
    }

    static func run(_ executable: URL, _ arguments: [String], timeout: TimeInterval) async throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-e2e-run-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("out")
        let errURL = directory.appendingPathComponent("err")
        try Data().write(to: outURL)
        try Data().write(to: errURL)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        defer {
            try? out.close()
            try? err.close()
        }

        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err

        let watch = Watch()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            process.terminationHandler = { _ in
                watch.finish()
                continuation.resume()
            }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            let pid = process.processIdentifier
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                // Only while our child has not been reaped yet, so the pid is still ours.
                if watch.expire() { kill(pid, SIGTERM) }
            }
        }
        return Run(
            status: process.terminationStatus, crashed: process.terminationReason != .exit,
            timedOut: watch.timedOut,
            stdout: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
    }

    /// Whether the child finished, and whether the timeout fired first.
    private final class Watch: Sendable {
        private let state = Mutex((finished: false, timedOut: false))
        var timedOut: Bool { state.withLock { $0.timedOut } }
        func finish() { state.withLock { $0.finished = true } }
        /// Marks the timeout; true when the child is still running (so it must be stopped).
        func expire() -> Bool {
            state.withLock { state in
                guard !state.finished else { return false }
                state.timedOut = true
                return true
            }
        }
    }
}
