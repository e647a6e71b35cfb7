import Foundation
import Keybound
import KeyboundTestSupport

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

    /// - Parameter environment: the child's environment (default: ours).
    static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, timeout: TimeInterval
    ) async throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-e2e-run-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let child = try ChildProcess(
            executable, arguments, environment: environment, workingDirectory: directory, files: directory,
            name: "run")
        let process = child.process

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
        let output = try child.output()
        return Run(
            status: process.terminationStatus, crashed: child.crashed, timedOut: watch.timedOut,
            stdout: String(decoding: output.stdout, as: UTF8.self),
            stderr: String(decoding: output.stderr, as: UTF8.self))
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
