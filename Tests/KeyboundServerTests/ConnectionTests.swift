import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The HTTP layer under attack: connection exhaustion, slow senders, oversized and mistyped
/// bodies, strict parsing, the metrics listener, and a log that cannot be written. The attacker
/// connects from a second loopback address (127.0.0.2), the victim from 127.0.0.1.
@Suite("Connections and limits")
struct ConnectionTests {
    static let attacker = "127.0.0.2"

    @Test(.enabled(if: RawConnection.canBind(attacker), "needs 127.0.0.2 on the loopback interface"))
    func oneAddressHoldingHalfOpenRequestsCannotStarveOthers() async throws {
        let live = try TestServer {
            $0.connectionLimit = 16
            $0.perIPConnectionLimit = 4
        }
        let port = try #require(live.server.port)
        let (held, status) = try await offThePool {
            // Twice the server's whole connection limit, each a request whose headers never end.
            var connections: [RawConnection] = []
            for _ in 0..<32 {
                let connection = try RawConnection(port: port, from: Self.attacker)
                _ = connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n")
                connections.append(connection)
            }
            let held = connections.filter { !$0.closedByPeer(within: 1) }.count
            let victim = try RawConnection(port: port)
            _ = victim.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            return (held, victim.response()?.status)
        }
        #expect(held == 4)
        #expect(status == 200)
    }

    /// A request trickled one byte a second, in its headers or its body: the connection is cut at
    /// the 2 s request deadline, long before the request (or the 30 s idle timeout) would end.
    @Test(
        .enabled(if: RawConnection.canBind(attacker), "needs 127.0.0.2 on the loopback interface"),
        arguments: ["headers", "body"])
    func slowSenderIsCutAtTheRequestDeadline(trickling part: String) async throws {
        let live = try TestServer { $0.requestTimeout = 2 }
        let port = try #require(live.server.port)
        let body = #"{"username":"slow","password":"correct horse battery"}"#
        let head =
            "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n"
        let (sentBeforeCut, healthz) = try await offThePool {
            let connection = try RawConnection(port: port, from: Self.attacker)
            var trickled = Array((part == "headers" ? head + body : body).utf8)
            if part == "body" { _ = connection.send(head) }
            trickled = Array(trickled.prefix(15))
            var sent = 0
            for byte in trickled {
                guard connection.send(Data([byte])) else { break }
                sent += 1
                if connection.closedByPeer(within: 1) { break }
            }
            let victim = try RawConnection(port: port)
            _ = victim.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            return (sent, victim.response()?.status)
        }
        #expect(sentBeforeCut < 15, "the slow request was never cut")
        #expect(healthz == 200)
        // Nothing of the trickled request was handled.
        #expect(!live.logs.all.contains { $0.contains(#""route":"\#(API.createAccount.template)""#) })
    }

    /// A client that reads a large response a few bytes at a time: the connection is cut at the
    /// 2 s deadline for sending it, long before the response (or the 30 s idle timeout) would end.
    @Test func slowReaderIsCutAtTheResponseDeadline() async throws {
        let body = Data(repeating: UInt8(ascii: "x"), count: 16 << 20)
        let daemon = try HTTPDaemon(
            options: HTTPDaemonOptions(
                host: "127.0.0.1", port: 0, threads: 1, handlerThreads: 1, connectionTimeoutSeconds: 30,
                requestTimeoutSeconds: 2, connectionLimit: 16, perClientConnectionLimit: 4, bodyLimit: 1024,
                tlsKeyPEM: nil, tlsCertificatePEM: nil)
        ) { _ in HTTPResponse(status: 200, body: body) }
        defer { daemon.stop(gracePeriod: 0) }
        let port = daemon.port
        let (cut, received) = try await offThePool {
            let connection = try RawConnection(port: port, receiveBuffer: 4096)
            _ = connection.send("GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
            // About 5 KB a second for up to 10 s: the whole body would take an hour. (After the cut,
            // the few KB the kernel had received still come first.)
            let end = DispatchTime.now() + 10
            var received = 0
            while DispatchTime.now() < end {
                let count = connection.discard(atMost: 256)
                guard count > 0 else { return (true, received) }
                received += count
                usleep(50_000)
            }
            return (false, received)
        }
        #expect(cut, "the slow reader still held its connection after 10 s")
        #expect(received > 0 && received < body.count)
    }

    @Test func declaredBodyOverTheLimitIs413BeforeAnyOfItIsSent() async throws {
        let live = try TestServer()
        let port = try #require(live.server.port)
        let response = try await offThePool {
            let connection = try RawConnection(port: port)
            _ = connection.send(
                "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 10000000\r\n\r\n")
            return connection.response()
        }
        #expect(response?.status == 413)
        let problem = try Problem(jsonData: try #require(response?.body))
        #expect(problem.code == .bodyTooLarge)
    }

    @Test func aBodyMustBeDeclaredApplicationJSON() async throws {
        let live = try TestServer()
        let body = CreateAccountRequest(username: "alice", password: Client.password).jsonData
        for contentType in [
            nil, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
            "application/jsonp",
            "application/json-patch+json", "xapplication/json", "application/js on", "",
        ] {
            let reply = try await live.client.send(
                API.createAccount, raw: body, contentType: contentType)
            #expect(reply.status == 415, "\(contentType ?? "no type")")
            #expect(reply.problem?.code == .unsupportedMediaType)
        }
        // Also where the handler reads no body at all.
        try await live.client.createAccount("bob")
        let tokens = try await live.client.login("bob")
        let logout = try await live.client.send(
            API.logout, raw: Data("x".utf8), token: tokens.accessToken,
            contentType: "text/plain")
        #expect(logout.status == 415)
        // Case and blanks around the media type do not matter, nor its parameters.
        for (index, contentType) in [
            "Application/JSON; charset=utf-8", " application/json ", "APPLICATION/JSON\t;charset=UTF-8",
        ].enumerated() {
            let accepted = try await live.client.send(
                API.createAccount,
                raw: CreateAccountRequest(username: try Username("carol\(index)"), password: Client.password)
                    .jsonData,
                contentType: contentType)
            #expect(accepted.status == 201, "\(contentType)")
        }
        // The in-process mode goes through the same check.
        let inProcess = await live.server.handle(
            HTTPRequest(method: API.createAccount.method.rawValue, path: API.createAccount.path(), body: body)
        )
        #expect(inProcess.status == 415)
    }

    @Test func clientsAreParsedStrictlyAndADecodedQuestionMarkStaysInThePath() async throws {
        let live = try TestServer()
        let port = try #require(live.server.port)
        let withoutHost = try await offThePool {
            let connection = try RawConnection(port: port)
            _ = connection.send("GET /healthz HTTP/1.1\r\n\r\n")
            return connection.response()?.status
        }
        #expect(withoutHost == 400)
        // `%3F` decodes to `?`, which is part of the path: no route matches.
        let encoded = try await live.client.send("GET", API.health.path() + "%3Fa=b", checkSpec: false)
        #expect(encoded.status == 404)
    }

    @Test func metricsAreServedOnlyOnTheMetricsListener() async throws {
        let plain = try TestServer()
        #expect(plain.server.metricsURL == nil)
        #expect(try await plain.client.send("GET", "/metrics", checkSpec: false).status == 404)

        let live = try TestServer { $0.metricsListen = ListenAddress(host: "127.0.0.1", port: 0) }
        #expect(try await live.client.send(API.health).status == 200)
        #expect(try await live.client.send("GET", "/metrics", checkSpec: false).status == 404)
        let metricsURL = try #require(live.server.metricsURL)
        #expect(metricsURL.path == "/metrics")
        #expect(metricsURL.port != live.server.port.map(Int.init))
        let scraper = Client(baseURL: try #require(URL(string: "/", relativeTo: metricsURL)?.absoluteURL))
        let metrics = try await scraper.send("GET", "metrics", checkSpec: false)
        #expect(metrics.status == 200)
        #expect(
            metrics.text.contains(
                #"keybound_http_requests_total{route="\#(API.health.template)",status="200"} 1"#))
        // The metrics listener serves nothing else.
        #expect(try await scraper.send("GET", "healthz", checkSpec: false).status == 404)
    }

    @Test func serveFlagsForConnectionsAndMetrics() throws {
        let executable = try KeyboundExecutable.url().path
        let (status, help) = try runTool(executable, ["serve", "--help"])
        #expect(status == 0)
        for flag in [
            "--request-timeout", "--connection-limit", "--per-ip-connection-limit",
            "--per-ipv6-56-connection-limit", "--per-ipv6-48-connection-limit", "--metrics-listen",
        ] {
            #expect(help.contains(flag))
        }
        #expect(try runTool(executable, ["serve", "--request-timeout", "0"]).0 == 2)
        #expect(try runTool(executable, ["serve", "--per-ip-connection-limit", "-1"]).0 == 2)
        #expect(try runTool(executable, ["serve", "--per-ipv6-56-connection-limit", "-1"]).0 == 2)
        #expect(try runTool(executable, ["serve", "--per-ipv6-48-connection-limit", "x"]).0 == 2)
        #expect(try runTool(executable, ["serve", "--connection-limit", "0"]).0 == 2)
        #expect(try runTool(executable, ["serve", "--metrics-listen", "nonsense"]).0 == 2)
    }

    /// `keybound serve` whose standard error is a pipe nobody reads any more, a pipe nobody
    /// reads yet (it fills up), or a full disk: it keeps answering, and stops cleanly.
    @Test(arguments: ["closed pipe", "full pipe", "/dev/full"])
    func serverKeepsAnsweringWhenItsLogCannotBeWritten(standardError: String) async throws {
        let directory = try TemporaryDirectory()
        // The log cannot be read here, so the port is chosen beforehand; another test may bind it
        // between the choice and the child's bind (the child then exits): try another one.
        var started: (child: ChildProcess, pipe: Pipe, port: UInt16)?
        for attempt in 0..<5 where started == nil {
            let port = try RawConnection.freePort()
            let child = try ChildProcess(
                try KeyboundExecutable.url(),
                [
                    "serve", "--listen", "127.0.0.1:\(port)", "--db",
                    "sqlite:" + directory.path("k\(attempt).sqlite"),
                ],
                workingDirectory: directory.url, files: directory.url, name: "serve\(attempt)")
            let pipe = Pipe()
            switch standardError {
            case "closed pipe":
                try pipe.fileHandleForReading.close()
                child.process.standardError = pipe.fileHandleForWriting
            case "full pipe":
                child.process.standardError = pipe.fileHandleForWriting
            default:
                child.process.standardError = try FileHandle(
                    forWritingTo: URL(fileURLWithPath: standardError))
            }
            try child.process.run()
            let process = child.process
            if try await offThePool({
                RawConnection.waitUntilListening(port: port, while: { process.isRunning })
            }) {
                started = (child, pipe, port)
            }
        }
        let (child, pipe, port) = try #require(started)
        defer {
            if child.process.isRunning {
                kill(child.process.processIdentifier, SIGKILL)
                child.process.waitUntilExit()
            }
        }
        let process = child.process
        let answered = try await offThePool {
            // One log line per request: about 100 KB, more than a pipe holds (64 KiB).
            let connection = try RawConnection(port: port)
            var answered = 0
            for _ in 0..<600 {
                guard connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
                    connection.response()?.status == 200
                else { break }
                answered += 1
            }
            return answered
        }
        #expect(answered == 600)
        kill(process.processIdentifier, SIGTERM)
        // Its stop may take its 5 s grace period and a 1 s log flush; a machine busy with a whole
        // sanitizer run can need more (one such run waited 10 s in vain). Bounded at 30 s.
        let exited = try await offThePool {
            for _ in 0..<300 where process.isRunning { usleep(100_000) }
            return !process.isRunning
        }
        #expect(exited)
        if exited {
            #expect(!child.crashed)
            #expect(process.terminationStatus == 0)
        }
        try? pipe.fileHandleForReading.close()
    }
}

/// Runs blocking socket work on a Dispatch thread, not on the cooperative pool.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// A blocking TCP connection to a loopback port, from a chosen loopback source address, for
/// what the test ``Client`` does not do: half-open requests, trickled bytes, raw request lines. Every
/// read and write gives up after `timeoutSeconds` (10 s), so no test can hang on it.
final class RawConnection {
    /// The socket (to poll many connections at once).
    let descriptor: Int32
    private var received = HTTPResponseBuffer()

    /// - Parameter receiveBuffer: the socket's receive buffer in bytes (nil: the system's), small
    ///   to read a response slowly without the kernel taking it all in.
    init(
        port: UInt16, from source: String = "127.0.0.1", timeoutSeconds: Int = 10, receiveBuffer: Int32? = nil
    ) throws {
        descriptor = try Self.connected(
            to: port, from: source, timeoutSeconds: timeoutSeconds, receiveBuffer: receiveBuffer)
    }

    /// A connected socket, or a thrown error and no descriptor left open. (Not inside `init`:
    /// a class whose `init` throws after its properties are set runs `deinit`, which would close
    /// the descriptor a second time — by then perhaps another thread's file or socket.)
    private static func connected(
        to port: UInt16, from source: String, timeoutSeconds: Int, receiveBuffer: Int32?
    ) throws -> Int32 {
        let descriptor = try socket(boundTo: source)
        if var size = receiveBuffer {
            _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = address("127.0.0.1", port: port)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            let reason = errno
            close(descriptor)
            throw TestFailure("connect to port \(port) failed: errno \(reason)")
        }
        return descriptor
    }

    deinit { close(descriptor) }

    /// Sends the bytes; false when the peer closed the connection.
    @discardableResult
    func send(_ text: String) -> Bool { send(Data(text.utf8)) }

    /// Sends the bytes; false when the peer closed the connection.
    func send(_ data: Data) -> Bool {
        data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return true }
            var offset = 0
            while offset < bytes.count {
                #if canImport(Glibc)
                    // No SIGPIPE when the server has closed the connection: an error instead.
                    let sent = Glibc.send(
                        descriptor, base + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                #else
                    let sent = Darwin.send(descriptor, base + offset, bytes.count - offset, 0)
                #endif
                guard sent > 0 else { return false }
                offset += sent
            }
            return true
        }
    }

    /// Whether the peer closes the connection (end-of-file or reset) within `seconds`.
    func closedByPeer(within seconds: Double) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(seconds * 1000)) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) <= 0
    }

    /// Reads one response (status line, headers, a `Content-Length` body); nil when the
    /// connection ends or stalls first, or the response is malformed.
    func response() -> (status: Int, body: Data)? {
        while true {
            do {
                if let (result, _) = try received.takeResponse() { return (result.status, result.body) }
            } catch {
                return nil
            }
            guard fill() else { return nil }
        }
    }

    /// Reads and drops at most `count` bytes: how many, 0 when the peer closed the connection,
    /// -1 after an error or a stall of the timeout.
    func discard(atMost count: Int) -> Int {
        var bytes = [UInt8](repeating: 0, count: count)
        return recv(descriptor, &bytes, count, 0)
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = recv(descriptor, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        received.append(chunk[..<count])
        return true
    }

    /// Whether a socket can be bound to `source` (127.0.0.2 is on the loopback interface on
    /// Linux; elsewhere it may need an alias).
    static func canBind(_ source: String) -> Bool {
        guard let descriptor = try? socket(boundTo: source) else { return false }
        close(descriptor)
        return true
    }

    /// A loopback port that was free a moment ago.
    static func freePort() throws -> UInt16 {
        let descriptor = try socket(boundTo: "127.0.0.1")
        defer { close(descriptor) }
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard status == 0 else { throw TestFailure("getsockname failed: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Polls `GET /healthz` on `port` for up to 20 s, while `running()` holds.
    static func waitUntilListening(port: UInt16, while running: () -> Bool) -> Bool {
        for _ in 0..<200 where running() {
            if let connection = try? RawConnection(port: port),
                connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
                connection.response()?.status == 200
            {
                return true
            }
            usleep(100_000)
        }
        return false
    }

    private static func socket(boundTo source: String) throws -> Int32 {
        #if canImport(Glibc)
            let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        #if canImport(Darwin)
            var one: Int32 = 1
            _ = setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = address(source, port: 0)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            close(descriptor)
            throw TestFailure("cannot bind to \(source): errno \(errno)")
        }
        return descriptor
    }

    private static func address(_ host: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }
}
