import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// `keybound serve` as a child process (``ChildProcess``: its log goes to a file that is
/// polled, no pipe whose blocking reads could tie up the cooperative thread pool).
final class ServeProcess: Sendable {
    private let directory: TemporaryDirectory
    private let child: ChildProcess
    let port: UInt16
    let client: Client

    static var executable: URL {
        get throws { try KeyboundExecutable.url() }
    }

    init(arguments: [String], environment: [String: String] = [:]) async throws {
        directory = try TemporaryDirectory()
        child = try ChildProcess(
            // A test machine running many PostgreSQL tests at once answers slowly: 15 s, as
            // Configuration.testing has, not the production default of 5.
            Self.executable, ["serve", "--listen", "127.0.0.1:0", "--db-timeout", "15"] + arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            workingDirectory: directory.url, files: directory.url, name: "serve")
        try child.process.run()
        var found: UInt16?
        for _ in 0..<400 where found == nil {
            try await Task.sleep(nanoseconds: 50_000_000)
            let log = String(decoding: try child.output().stderr, as: UTF8.self)
            for line in log.split(separator: "\n") {
                guard let value = try? JSON.parse(Data(line.utf8)),
                    OpenAPISpec.string(OpenAPISpec.member(value, "msg")) == "listening",
                    case .number(let port)? = OpenAPISpec.member(value, "port")
                else { continue }
                found = UInt16(port)
            }
            if !child.process.isRunning { break }
        }
        guard let found else {
            if child.process.isRunning { Foundation.kill(child.process.processIdentifier, SIGKILL) }
            throw TestFailure("keybound serve did not start (\((try? Self.executable.path) ?? "keybound"))")
        }
        port = found
        guard let baseURL = URL(string: "http://127.0.0.1:\(found)") else { throw TestFailure("bad URL") }
        client = Client(baseURL: baseURL)
    }

    func kill(_ signal: Int32) -> Int32 {
        Foundation.kill(child.process.processIdentifier, signal)
        child.process.waitUntilExit()
        return child.process.terminationStatus
    }

    /// The end of the process's standard error, for a failure's message.
    var logTail: String {
        let log = (try? child.output().stderr).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return String(log.suffix(3000))
    }

    deinit {
        if child.process.isRunning {
            Foundation.kill(child.process.processIdentifier, SIGKILL)
            child.process.waitUntilExit()
        }
    }
}

@Suite("keybound serve as a process")
struct ProcessTests {
    @Test(arguments: ["full", "normal"])
    func killDashNineDuringABurstOfLoginsLosesNoAcknowledgedWrite(synchronous: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("durable.sqlite")
        let first = try await ServeProcess(
            arguments: [
                "--db", "sqlite:" + path, "--server-id", "durable", "--sqlite-synchronous", synchronous,
            ])
        try await first.client.createAccount("alice")
        let tokens = try await first.client.login("alice")
        let (key, deviceID) = try await first.client.bindDevice(tokens.accessToken)

        // Eight clients log in with the device key over and over; SIGKILL lands in the middle of
        // that, with logins in flight and in the writer's queue.
        let acknowledged = Locked<[String]>([])
        let client = first.client
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    while let challenge = try? await client.send(
                        API.createChallenge, raw: ChallengeRequest(deviceID: deviceID).jsonData,
                        checkSpec: false),
                        challenge.status == 201,
                        let issued = try? ChallengeResponse(jsonData: challenge.body),
                        let login = try? await client.send(
                            API.deviceLogin,
                            raw: DeviceLoginRequest(
                                challengeID: issued.challengeID,
                                signature: try sign(issued.payload, with: key)
                            ).jsonData, checkSpec: false),
                        login.status == 200
                    {
                        let session = try TokenResponse(jsonData: login.body).sessionID
                        acknowledged.withLock { $0.append(session) }
                    }
                }
            }
            // Bounded: at most 30 s of logins before the kill.
            for _ in 0..<3000 where acknowledged.withLock({ $0.count }) < 40 {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            _ = first.kill(SIGKILL)
            try await group.waitForAll()
        }
        let sessions = acknowledged.withLock { $0 }
        #expect(sessions.count >= 40)

        // Every acknowledged login is there, and no login was applied twice: each device session
        // used exactly one challenge and has exactly one audit event.
        let database = try SQLiteDatabase(path: path, readers: 1, synchronous: .normal)
        let stored = try database.read { connection in
            try connection.query("SELECT id FROM sessions WHERE auth_method = 'device'", []).map {
                try $0.text(0)
            }
        }
        #expect(Set(sessions).isSubset(of: Set(stored)))
        #expect(Set(sessions).count == sessions.count)
        let counts = try database.read { connection in
            try ["used_challenges", "audit_events WHERE type = 'login' AND method = 'device'"].map {
                try connection.queryOne("SELECT COUNT(*) FROM \($0)", [])?.integer(0) ?? -1
            }
        }
        #expect(counts == [Int64(stored.count), Int64(stored.count)])

        let second = try await ServeProcess(
            arguments: ["--server-id", "durable"], environment: ["KEYBOUND_DB": "sqlite:" + path])
        let again = try await second.client.login("alice")
        let devices = try await second.client.send(API.listDevices, token: again.accessToken)
            .decode(DeviceListResponse.self).devices
        #expect(devices.map(\.deviceID) == [deviceID])
        // The earlier sessions were replaced by the new login of the same client.
        #expect(try await second.client.send(API.me, token: tokens.accessToken).status == 401)
        #expect(second.kill(SIGTERM) == 0, "\(second.logTail)")
    }

    @Test func oneChallengeUsedThirtyTwoTimesAcrossTwoProcessesOpensOneSession() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("shared.sqlite")
        let arguments = ["--db", "sqlite:" + path, "--server-id", "shared", "--sqlite-synchronous", "normal"]
        let first = try await ServeProcess(arguments: arguments)
        let second = try await ServeProcess(arguments: arguments)
        let (_, key, deviceID) = try await first.client.userWithDevice("alice")
        // Issued by the first process, used at both: they share the challenge key and the file.
        let challenge = try await first.client.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        let clients = [first.client, second.client]
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<32 {
                group.addTask {
                    try await clients[index % 2].deviceLogin(
                        challengeID: challenge.challengeID, signature: signature
                    )
                    .status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 200 }.count == 1)
        #expect(statuses.filter { $0 == 409 }.count == 31)
        #expect(first.kill(SIGTERM) == 0)
        #expect(second.kill(SIGTERM) == 0)
        let database = try SQLiteDatabase(path: path, readers: 1, synchronous: .normal)
        #expect(
            try database.read {
                try $0.queryOne("SELECT COUNT(*) FROM sessions WHERE auth_method = 'device'", [])?.integer(0)
            } == 1)
    }

    @Test func helpAndUsageErrors() throws {
        func run(_ arguments: [String]) throws -> (Int32, String) {
            try runTool(ServeProcess.executable.path, arguments)
        }
        let (status, help) = try run(["serve", "--help"])
        #expect(status == 0)
        #expect(help.contains("--listen HOST:PORT"))
        #expect(help.contains("KEYBOUND_DB"))
        // The help is generated from the option table: every option line's summary and variable
        // start in the same columns, across all sections.
        let optionLines = help.split(separator: "\n").filter { $0.hasPrefix("  --") }
        #expect(optionLines.count >= 25)
        func column(_ line: Substring, of pattern: String) -> Int? {
            line.range(of: pattern).map { line.distance(from: line.startIndex, to: $0.lowerBound) }
        }
        // The summary starts after the synopsis's padding (the first run of two or more spaces).
        let summaryColumns = Set(
            optionLines.compactMap { line -> Int? in
                guard let gap = line.dropFirst(2).range(of: "  ") else { return nil }
                let start = line[gap.lowerBound...].firstIndex { $0 != " " } ?? line.endIndex
                return line.distance(from: line.startIndex, to: start)
            })
        #expect(summaryColumns.count == 1, "\(summaryColumns)")
        let variableColumns = Set(optionLines.compactMap { column($0, of: "KEYBOUND_") })
        #expect(variableColumns.count == 1, "\(variableColumns)")
        // Every option the help names is one the parser accepts.
        for line in optionLines {
            let flag = String(line.dropFirst(2).prefix { $0 != " " })
            if flag != "--help" {
                #expect(
                    try run(["serve", flag] + (line.contains("\(flag) ") ? [""] : []) + ["--help"]).0 == 0,
                    "\(flag)")
            }
        }
        #expect(try run(["serve", "--bogus", "1"]).0 == 2)
        #expect(try run(["serve", "--argon2-memory", "1024"]).0 == 2)
        #expect(try run(["serve", "--listen", "nonsense"]).0 == 2)
        #expect(try run(["serve", "--db", "mysql://x"]).0 == 2)
        #expect(try run(["serve", "--sqlite-synchronous", "off"]).0 == 2)
    }
}

@Suite("TLS")
struct TLSTests {
    static var toolsAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")
    }

    @Test(.enabled(if: TLSTests.toolsAvailable, "needs /usr/bin/openssl and /usr/bin/curl"))
    func servesHTTPSWithTheGivenCertificate() async throws {
        let directory = try TemporaryDirectory()
        let key = directory.path("key.pem")
        let certificate = directory.path("cert.pem")
        let openssl = try runTool(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days",
                "1",
                "-subj", "/CN=127.0.0.1",
            ])
        #expect(openssl.0 == 0, "\(openssl.1)")

        let live = try TestServer {
            $0.tlsKeyPath = key
            $0.tlsCertificatePath = certificate
        }
        let baseURL = try #require(live.server.baseURL)
        #expect(baseURL.scheme == "https")
        let curl = try runTool(
            "/usr/bin/curl", ["-sk", "--max-time", "10", baseURL.absoluteString + API.health.path()])
        #expect(curl.1 == #"{"status":"ok"}"#)
    }
}

/// Runs a short-lived tool as a ``ChildProcess`` and waits for it.
/// - Returns: its exit status, and what it wrote (standard output, then standard error).
func runTool(_ path: String, _ arguments: [String]) throws -> (Int32, String) {
    let directory = try TemporaryDirectory()
    let child = try ChildProcess(
        URL(fileURLWithPath: path), arguments, workingDirectory: directory.url, files: directory.url,
        name: "tool")
    try child.process.run()
    child.process.waitUntilExit()
    let output = try child.output()
    return (child.process.terminationStatus, String(decoding: output.stdout + output.stderr, as: UTF8.self))
}

/// ``SpawnedProcess``, which every subprocess test launches through, keeps `Process`'s meanings.
@Suite("Spawned process")
struct SpawnedProcessTests {
    /// Runs `/bin/sh -c SCRIPT` as a ``ChildProcess`` and waits for it.
    private func shell(_ script: String, input: String = "", environment: [String: String]? = nil) throws -> (
        child: ChildProcess, stdout: String, directory: TemporaryDirectory
    ) {
        let directory = try TemporaryDirectory()
        let child = try ChildProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script], input: Data(input.utf8),
            environment: environment,
            workingDirectory: directory.url, files: directory.url, name: "sh")
        try child.process.run()
        child.process.waitUntilExit()
        #expect(!child.process.isRunning)
        return (child, String(decoding: try child.output().stdout, as: UTF8.self), directory)
    }

    @Test func reportsTheExitCodeAndWhatTheChildWasGiven() throws {
        let run = try shell(
            #"read line; echo "$line $KEYBOUND_X $(pwd -P)"; exit 3"#, input: "hello\n",
            environment: ["KEYBOUND_X": "x", "PATH": "/usr/bin:/bin"])
        #expect(run.child.process.terminationStatus == 3)
        #expect(!run.child.crashed)
        let directory = run.directory.url.resolvingSymlinksInPath().path
        #expect(run.stdout == "hello x \(directory)\n")
    }

    @Test func reportsTheSignalThatEndedTheChild() throws {
        let run = try shell("kill -TERM $$")
        #expect(run.child.crashed)
        #expect(run.child.process.terminationStatus == SIGTERM)
    }

    /// Only standard input, output and error: no other descriptor of the test process leaks.
    @Test func theChildInheritsNoOtherDescriptor() throws {
        let run = try shell("ls /proc/self/fd")
        // The fourth is the directory `ls` itself opened to list.
        #expect(run.stdout.split(separator: "\n") == ["0", "1", "2", "3"])
    }

    @Test func aMissingExecutableThrows() throws {
        let directory = try TemporaryDirectory()
        let child = try ChildProcess(
            URL(fileURLWithPath: directory.path("missing")), [], workingDirectory: directory.url,
            files: directory.url, name: "missing")
        #expect(throws: SpawnedProcess.LaunchError.self) { try child.process.run() }
        #expect(!child.process.isRunning)
        child.process.waitUntilExit()
    }
}
