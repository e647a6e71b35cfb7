import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

/// A JSON object as `JSONSerialization` gives it.
typealias JSONObject = [String: Any]

/// What one run of the executable did.
struct Reply {
    let arguments: [String]
    let status: Int32
    /// True when the process ended by a signal (a crash), not by `exit`.
    let crashed: Bool
    let stdout: Data
    let stderr: String

    var text: String { String(decoding: stdout, as: UTF8.self) }

    /// The single JSON object `--json` prints, on one line.
    func object(sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(
            lines.count == 1, "one JSON line expected from \(arguments): \(text)",
            sourceLocation: sourceLocation)
        let parsed = try JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8))
        return try #require(
            parsed as? JSONObject, "not a JSON object from \(arguments): \(text)",
            sourceLocation: sourceLocation)
    }
}

enum RunError: Error, CustomStringConvertible {
    case timedOut([String])
    var description: String {
        switch self {
        case .timedOut(let arguments): "keybound \(arguments.joined(separator: " ")) did not finish in time"
        }
    }
}

/// One test's private folder: its state file, key file and working directory.
final class Sandbox {
    let directory: URL
    private let io: URL
    private var runs = 0

    /// The `--state` file every `device(…)` call passes.
    var state: URL { directory.appendingPathComponent("device.state") }
    /// The sealing key the CLI keeps beside the state file.
    var key: URL { state.appendingPathExtension("key") }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-cli-tests-\(UUID().uuidString)", isDirectory: true)
        io = directory.appendingPathComponent("io", isDirectory: true)
        try FileManager.default.createDirectory(at: io, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// `keybound device --state STATE --json ARGUMENTS…`, with `input` on standard input.
    @discardableResult
    func device(_ arguments: String..., input: String = "") throws -> Reply {
        try run(["device", "--state", state.path, "--json"] + arguments, input: Data(input.utf8))
    }

    /// `keybound device --state STATE --json ARGUMENTS…`, with raw bytes on standard input.
    func device(_ arguments: [String], input: Data) throws -> Reply {
        try run(["device", "--state", state.path, "--json"] + arguments, input: input)
    }

    /// Runs the executable with exactly these arguments. `KEYBOUND_DEVICE` is cleared unless
    /// `environment` sets it; the working directory is the sandbox unless given.
    func run(
        _ arguments: [String], input: Data = Data(), environment: [String: String] = [:],
        workingDirectory: URL? = nil
    ) throws -> Reply {
        var variables = ProcessInfo.processInfo.environment
        variables["KEYBOUND_DEVICE"] = nil
        variables.merge(environment) { $1 }
        runs += 1
        let child = try ChildProcess(
            try KeyboundExecutable.url(), arguments, input: input, environment: variables,
            workingDirectory: workingDirectory ?? directory, files: io, name: "\(runs)")
        let process = child.process

        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        if exited.wait(timeout: .now() + 20) == .timedOut {
            process.terminate()
            exited.wait()
            throw RunError.timedOut(arguments)
        }
        let output = try child.output()
        return Reply(
            arguments: arguments, status: process.terminationStatus, crashed: child.crashed,
            stdout: output.stdout, stderr: String(decoding: output.stderr, as: UTF8.self))
    }
}

// MARK: - Expectations

/// Exit 0 and `{"ok":true,…}`; returns the object.
@discardableResult
func expectSuccess(_ reply: Reply, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
    #expect(!reply.crashed, "crashed: \(reply.stderr)", sourceLocation: sourceLocation)
    #expect(
        reply.status == 0, "exit \(reply.status) for \(reply.arguments): \(reply.text) \(reply.stderr)",
        sourceLocation: sourceLocation)
    let object = try reply.object(sourceLocation: sourceLocation)
    #expect(object["ok"] as? Bool == true, "\(object)", sourceLocation: sourceLocation)
    return object
}

/// Exit 1 and `{"ok":false,"error":{"code":…,"native":…,"recovery":…}}`. `native: nil` means
/// the error carries no native code.
func expectFailure(
    _ reply: Reply, code: String, native: Int?, recovery: String,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    #expect(!reply.crashed, "crashed: \(reply.stderr)", sourceLocation: sourceLocation)
    #expect(
        reply.status == 1, "exit \(reply.status) for \(reply.arguments): \(reply.text) \(reply.stderr)",
        sourceLocation: sourceLocation)
    let object = try reply.object(sourceLocation: sourceLocation)
    #expect(object["ok"] as? Bool == false, "\(object)", sourceLocation: sourceLocation)
    let error = try #require(object["error"] as? JSONObject, "\(object)", sourceLocation: sourceLocation)
    #expect(error["code"] as? String == code, "\(error)", sourceLocation: sourceLocation)
    #expect(error["native"] as? Int == native, "\(error)", sourceLocation: sourceLocation)
    #expect(error["recovery"] as? String == recovery, "\(error)", sourceLocation: sourceLocation)
}

/// Exit 2, nothing on standard output, a `keybound device:` (or `command`) message on standard
/// error.
func expectUsageError(
    _ reply: Reply, mentioning fragment: String, command: String = "keybound device:",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(!reply.crashed, "crashed: \(reply.stderr)", sourceLocation: sourceLocation)
    #expect(
        reply.status == 2, "exit \(reply.status) for \(reply.arguments): \(reply.text) \(reply.stderr)",
        sourceLocation: sourceLocation)
    #expect(
        reply.text.isEmpty, "usage errors print nothing on stdout: \(reply.text)",
        sourceLocation: sourceLocation)
    #expect(reply.stderr.contains(command), "\(reply.stderr)", sourceLocation: sourceLocation)
    #expect(reply.stderr.contains(fragment), "\(reply.stderr)", sourceLocation: sourceLocation)
}

/// The device's `state` object.
func deviceState(_ sandbox: Sandbox, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
    try expectSuccess(try sandbox.device("state"), sourceLocation: sourceLocation)
}

/// Decodes unpadded base64url, as the CLI prints keys and signatures.
