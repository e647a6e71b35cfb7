import Foundation
import KeyboundTestSupport
import KeyboundWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One delivery as scripts/webhooks/receiver.py logged it, after the PyPI `standardwebhooks`
/// library checked it.
struct ReceivedDelivery: Sendable {
    /// The `webhook-id` header.
    let id: String
    /// Whether the library accepted the signature (and, unless `anyTime`, the timestamp).
    let verified: Bool
    /// What the receiver answered.
    let status: Int
    /// The body's `type`.
    let type: String
    /// The body's `data`.
    let data: JSONValue

    /// The text of `data`'s member `name`.
    func string(_ name: String) -> String? { OpenAPISpec.string(OpenAPISpec.member(data, name)) }
}

/// scripts/webhooks/receiver.py on a loopback port, run by Python from a virtual environment
/// with `standardwebhooks` (made under .build/webhooks the first time, as `make test` does):
/// every delivery is verified by that library, never by Keybound's code.
final class WebhookReceiver: Sendable {
    let port: UInt16
    private let directory: TemporaryDirectory
    private let child: ChildProcess
    private let logPath: String

    /// `http://127.0.0.1:PORT/hook`.
    var url: String { Self.url(port) }

    static func url(_ port: UInt16) -> String { "http://127.0.0.1:\(port)/hook" }

    /// Starts the receiver on `port` with the endpoint's `secret` (`whsec_…`).
    /// - Parameters:
    ///   - failFirst: each webhook-id is answered 500 this many times, then 200.
    ///   - anyTime: the library's timestamp tolerance is off (for a server on a moved clock).
    ///   - log: where the deliveries are logged (a new receiver on the same file adds to it).
    init(
        port: UInt16, secret: String, failFirst: Int = 0, anyTime: Bool = false, log: String? = nil
    ) async throws {
        self.port = port
        directory = try TemporaryDirectory()
        logPath = log ?? directory.path("deliveries.jsonl")
        var arguments = [
            Repository.file("scripts/webhooks/receiver.py").path, String(port), secret, logPath,
            "--fail-first", String(failFirst),
        ]
        if anyTime { arguments.append("--any-time") }
        child = try ChildProcess(
            URL(fileURLWithPath: try Self.python.get()), arguments, workingDirectory: directory.url,
            files: directory.url, name: "receiver")
        try child.process.run()
        for _ in 0..<200 {
            if String(decoding: try child.output().stdout, as: UTF8.self).contains("listening") { return }
            if !child.process.isRunning { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let errors = String(decoding: try child.output().stderr, as: UTF8.self)
        stop()
        throw TestFailure("the webhook receiver did not start: \(errors)")
    }

    deinit { stop() }

    /// Stops the receiver (it is down from then on).
    func stop() {
        if child.process.isRunning {
            Foundation.kill(child.process.processIdentifier, SIGKILL)
            child.process.waitUntilExit()
        }
    }

    /// Every delivery logged so far, in the order received.
    func deliveries() throws -> [ReceivedDelivery] {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let entry = try JSON.parse(Data(line.utf8))
            let headers = OpenAPISpec.member(entry, "headers") ?? .null
            let body = OpenAPISpec.member(entry, "body") ?? .null
            guard case .number(let status)? = OpenAPISpec.member(entry, "status") else {
                throw TestFailure("no status in \(line)")
            }
            return ReceivedDelivery(
                id: OpenAPISpec.string(OpenAPISpec.member(headers, "webhook-id")) ?? "",
                verified: OpenAPISpec.member(entry, "verified") == .bool(true), status: Int(status) ?? 0,
                type: OpenAPISpec.string(OpenAPISpec.member(body, "type")) ?? "",
                data: OpenAPISpec.member(body, "data") ?? .null)
        }
    }

    /// Waits (up to `seconds`) until `done` holds for the deliveries logged, and returns them.
    func wait(
        seconds: Int = 30, until done: ([ReceivedDelivery]) -> Bool
    ) async throws -> [ReceivedDelivery] {
        for _ in 0..<(seconds * 20) {
            let received = try deliveries()
            if done(received) { return received }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        return try deliveries()
    }

    /// The virtual environment's Python, with `standardwebhooks` installed: made once per test
    /// run when missing (pip from PyPI, the version pinned here).
    static let python: Result<String, TestFailure> = {
        let venv = Repository.file(".build/webhooks").path
        let python = venv + "/bin/python"
        let check = "import standardwebhooks.webhooks"
        if run(python, ["-c", check]) { return .success(python) }
        guard run("/usr/bin/env", ["python3", "-m", "venv", venv]),
            run(
                venv + "/bin/pip",
                ["install", "--quiet", "--disable-pip-version-check", "standardwebhooks==1.1.0"]),
            run(python, ["-c", check])
        else {
            return .failure(
                TestFailure("cannot install standardwebhooks into \(venv) (make webhook-test-deps)"))
        }
        return .success(python)
    }()

    private static func run(_ executable: String, _ arguments: [String]) -> Bool {
        guard FileManager.default.isExecutableFile(atPath: executable) else { return false }
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationReason == .exit && process.terminationStatus == 0
    }

    /// A loopback port below the ephemeral range that nothing holds now
    /// (``LoopbackPorts/claim()``), so it stays free while the receiver is down.
    static func freePort() throws -> UInt16 { try LoopbackPorts.claim() }
}
