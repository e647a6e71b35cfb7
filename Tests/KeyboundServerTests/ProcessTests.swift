import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// `keybound serve` as a child process.
final class ServeProcess: Sendable {
    let process: Process
    let port: UInt16
    let client: Client

    static var executable: URL {
        get throws { try KeyboundExecutable.url() }
    }

    init(arguments: [String], environment: [String: String] = [:]) async throws {
        process = Process()
        process.executableURL = try Self.executable
        process.arguments = ["serve", "--listen", "127.0.0.1:0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        // The log goes to a file that is polled: no pipe whose blocking reads could tie up the
        // cooperative thread pool, and no pipe end another child could inherit.
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-serve-\(UUID().uuidString).log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw TestFailure("no log file")
        }
        defer { try? FileManager.default.removeItem(at: log) }
        let logHandle = try FileHandle(forWritingTo: log)
        defer { try? logHandle.close() }
        process.standardError = logHandle
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var found: UInt16?
        for _ in 0..<400 where found == nil {
            try await Task.sleep(nanoseconds: 50_000_000)
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") {
                guard let value = try? JSON.parse(Data(line.utf8)),
                    let reader = try? JSONReader(
                        value, allowed: ["time", "level", "msg", "address", "port", "tls", "server_id"]),
                    (try? reader.string("msg")) == "listening", let port = try? reader.integer("port")
                else { continue }
                found = UInt16(port)
            }
            if !process.isRunning { break }
        }
        guard let found else {
            if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
            throw TestFailure("keybound serve did not start (\((try? Self.executable.path) ?? "keybound"))")
        }
        port = found
        guard let baseURL = URL(string: "http://127.0.0.1:\(found)") else { throw TestFailure("bad URL") }
        client = Client(baseURL: baseURL)
    }

    func kill(_ signal: Int32) -> Int32 {
        Foundation.kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
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
                        "POST", "/v1/challenges", body: ChallengeRequest(deviceID: deviceID).jsonData,
                        checkSpec: false),
                        challenge.status == 201,
                        let issued = try? ChallengeResponse(jsonData: challenge.body),
                        let login = try? await client.send(
                            "POST", "/v1/sessions/device",
                            body: DeviceLoginRequest(
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
        let devices = try await second.client.get("/v1/devices", token: again.accessToken)
            .decode(DeviceListResponse.self).devices
        #expect(devices.map(\.deviceID) == [deviceID])
        // The earlier sessions were replaced by the new login of the same client.
        #expect(try await second.client.get("/v1/me", token: tokens.accessToken).status == 401)
        #expect(second.kill(SIGTERM) == 0)
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
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days",
            "1",
            "-subj", "/CN=127.0.0.1",
        ]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        #expect(openssl.terminationStatus == 0)

        let live = try LiveServer {
            $0.tlsKeyPath = key
            $0.tlsCertificatePath = certificate
        }
        let baseURL = try #require(live.server.baseURL)
        #expect(baseURL.scheme == "https")
        let curl = try runTool(
            "/usr/bin/curl", ["-sk", "--max-time", "10", baseURL.absoluteString + "/healthz"])
        #expect(curl.1 == #"{"status":"ok"}"#)
    }
}

/// Runs a short-lived tool; its standard output and error go through a temporary file (no pipe).
func runTool(_ path: String, _ arguments: [String]) throws -> (Int32, String) {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent(
        "keybound-tool-\(UUID().uuidString)")
    guard FileManager.default.createFile(atPath: output.path, contents: nil) else {
        throw TestFailure("no file")
    }
    defer { try? FileManager.default.removeItem(at: output) }
    let handle = try FileHandle(forWritingTo: output)
    defer { try? handle.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = handle
    process.standardError = handle
    try process.run()
    process.waitUntilExit()
    return (process.terminationStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
}
