import Foundation
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the abuse section measured (issue 10, item 5).
struct AbuseNumbers {
    /// Normal clients' `GET /healthz` alone, and while slow senders attack.
    var baseline = LoadResult()
    var underAttack = LoadResult()
    var normalClients = 0
    /// Slow-sender connections the attacker keeps trying to hold, from one address.
    var attackerSlots = 0
    /// Of them, how many the server held open (sampled during the attack; the rest are cut).
    var attackerHeld = 0
    /// Connections the server cut during the attack and the attacker opened again.
    var attackerReconnects = 0
    /// Seconds a request trickled one byte every 200 ms lived, with `--request-timeout 2`.
    var trickleLifetimes: [Double] = []
    /// Password-login medians in milliseconds: unknown user, wrong password.
    var unknownUserMedian = 0.0
    var wrongPasswordMedian = 0.0
    var loginSamples = 0
    var loginFailures = 0

    /// How far apart the two medians are, relative to the smaller.
    var loginDifference: Double {
        let low = min(unknownUserMedian, wrongPasswordMedian)
        return low > 0 ? abs(unknownUserMedian - wrongPasswordMedian) / low : 1
    }
}

/// A TCP connection from a chosen loopback address that sends without waiting for an answer:
/// the attacker's side of a slow-sender (slow loris) attack.
final class RawSocket {
    private(set) var descriptor: Int32 = -1

    /// Connects to 127.0.0.1:`port` from `source`, or returns nil.
    init?(port: UInt16, from source: String) {
        #if canImport(Glibc)
            let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let socketDescriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socketDescriptor >= 0 else { return nil }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketDescriptor, $0, size) }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketDescriptor, $0, size) }
        }
        guard bound == 0, connected == 0 else {
            close(socketDescriptor)
            return nil
        }
        descriptor = socketDescriptor
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Sends `bytes` without blocking; false when the server has closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
        #else
            let flags = Int32(MSG_DONTWAIT)
        #endif
        let sent = bytes.withUnsafeBytes { systemSend(descriptor, $0.baseAddress!, $0.count, flags) }
        return sent > 0 || (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    }

    /// Whether the server has closed (or shut down) the connection: end-of-file or an error.
    var closedByPeer: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        return count <= 0
    }
}

/// The C `send`, which the method of the same name hides inside ``RawSocket``.
private func systemSend(_ socket: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
    send(socket, bytes, count, flags)
}

/// `slots` slow senders from `source`: each opens a request whose headers never end and sends one
/// more byte every `interval` seconds; a connection the server cuts is opened again (at most once
/// per second per slot), as a persistent attacker would.
final class SlowLoris: @unchecked Sendable {
    private let state = Shared((running: true, held: 0, reconnects: 0))
    private let done = DispatchSemaphore(value: 0)

    init(port: UInt16, from source: String, slots: Int, interval: Double) {
        let thread = Thread { [state, done] in
            let opening = Array("POST /v1/accounts HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)
            var sockets: [RawSocket?] = (0..<slots).map { _ in
                let socket = RawSocket(port: port, from: source)
                socket?.send(opening)
                return socket
            }
            var lastReconnect = nanoseconds()
            while state.withLock({ $0.running }) {
                var held = 0
                for index in sockets.indices {
                    guard let socket = sockets[index] else { continue }
                    if socket.closedByPeer || !socket.send(Array("X".utf8)) {
                        sockets[index] = nil
                    } else {
                        held += 1
                    }
                }
                if seconds(since: lastReconnect) >= 1 {
                    lastReconnect = nanoseconds()
                    var reconnects = 0
                    for index in sockets.indices where sockets[index] == nil {
                        sockets[index] = RawSocket(port: port, from: source)
                        sockets[index]?.send(opening)
                        reconnects += 1
                    }
                    state.withLock { $0.reconnects += reconnects }
                }
                state.withLock { $0.held = held }
                usleep(UInt32(interval * 1e6))
            }
            sockets.removeAll()
            done.signal()
        }
        thread.start()
    }

    /// Connections the server holds open right now (as of the last round).
    var held: Int { state.withLock { $0.held } }

    /// Stops the attack, closes its connections, and returns how many were opened again.
    func stop() -> Int {
        state.withLock { $0.running = false }
        done.wait()
        return state.withLock { $0.reconnects }
    }
}

extension Benchmark {
    /// Item 5 of issue 10: slow senders against normal clients at the server's default
    /// connection limits, the request deadline, and the timing of refused password logins.
    func measureAbuse() throws {
        var numbers = AbuseNumbers()
        try measureSlowSenders(&numbers)
        try measureRequestDeadline(&numbers)
        try measureLoginTiming(&numbers)
        report.abuse = numbers
    }

    private func abuseConfiguration(_ name: String) -> Configuration {
        var configuration = Configuration()
        configuration.port = 0
        configuration.databaseURL = "sqlite:" + folder.appendingPathComponent("\(name).sqlite").path
        configuration.log = .discard
        return configuration
    }

    /// Normal clients from 127.0.0.1 alone, then while 512 slow senders from 127.0.0.2 try to hold
    /// connections; the server runs with its default limits (1024 connections, 64 per address,
    /// 30 s request deadline).
    private func measureSlowSenders(_ numbers: inout AbuseNumbers) throws {
        let configuration = abuseConfiguration("abuse-connections")
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop(gracePeriod: 1) }
        guard let port = server.port else { throw HTTPClientError(description: "the server has no port") }
        let clients = 8
        let workers = try (0..<clients).map { _ in
            GetWorker(connection: try HTTPConnection(port: port), endpoint: API.health, bearer: nil)
        }
        let seconds = durations.reads
        progress("abuse: GET /healthz, \(clients) clients from 127.0.0.1, \(seconds) s")
        numbers.baseline = runLoad(workers, warmup: durations.warmup, duration: seconds)
        numbers.normalClients = clients
        numbers.attackerSlots = 512
        progress("abuse: the same while \(numbers.attackerSlots) slow senders from 127.0.0.2 trickle headers")
        let attack = SlowLoris(port: port, from: "127.0.0.2", slots: numbers.attackerSlots, interval: 0.1)
        Thread.sleep(forTimeInterval: 1)
        numbers.attackerHeld = attack.held
        numbers.underAttack = runLoad(workers, warmup: durations.warmup, duration: seconds)
        numbers.attackerHeld = max(numbers.attackerHeld, attack.held)
        numbers.attackerReconnects = attack.stop()
    }

    /// How long a request trickled one byte every 200 ms lives, with a 2 s request deadline.
    private func measureRequestDeadline(_ numbers: inout AbuseNumbers) throws {
        var configuration = abuseConfiguration("abuse-deadline")
        configuration.requestTimeout = 2
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop(gracePeriod: 1) }
        guard let port = server.port else { throw HTTPClientError(description: "the server has no port") }
        progress("abuse: 16 requests trickled a byte per 200 ms, --request-timeout 2")
        let body = Array(#"{"username":"slow","password":"correct horse battery"}"#.utf8)
        let head = Array(
            ("POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.count)\r\n\r\n").utf8)
        numbers.trickleLifetimes = try parallelMap(16, threads: 16) { index -> Double in
            guard let socket = RawSocket(port: port, from: "127.0.0.2") else {
                throw HTTPClientError(description: "cannot connect from 127.0.0.2")
            }
            let started = nanoseconds()
            // Half trickle their headers, half send the headers at once and trickle the body.
            var trickled = index.isMultiple(of: 2) ? head + body : body
            if !index.isMultiple(of: 2) { socket.send(head) }
            while !trickled.isEmpty, seconds(since: started) < 20 {
                if socket.closedByPeer || !socket.send([trickled.removeFirst()]) { break }
                usleep(200_000)
            }
            return seconds(since: started)
        }.sorted()
    }

    /// The medians of password logins with an unknown username and with a known username and a
    /// wrong password, alternating on one connection, at the default Argon2id cost and the
    /// default throttling. Each attempt comes from its own client address (`X-Forwarded-For` from
    /// a trusted proxy on loopback) and the wrong passwords are spread over 64 accounts, so no
    /// throttle (5 per account and address, 20 per address, 100 per account) is reached and
    /// every attempt runs the hash.
    private func measureLoginTiming(_ numbers: inout AbuseNumbers) throws {
        var configuration = abuseConfiguration("abuse-logins")
        configuration.trustedProxies = [CIDR("127.0.0.0/8")].compactMap { $0 }
        let path = String(configuration.databaseURL.dropFirst("sqlite:".count))
        try Seed.createSchema(path: path)
        let hasher = try PasswordHasher(parameters: configuration.argon2, concurrency: 1)
        let users = (0..<64).map { "timing\($0)" }
        _ = try Seed.sessions(
            path: path, count: 0, passwordHash: try hasher.hash("the right password"), loginUsers: users)
        let server = try Server(configuration: configuration)
        try server.start()
        defer { server.stop(gracePeriod: 1) }
        guard let port = server.port else { throw HTTPClientError(description: "the server has no port") }
        let connection = try HTTPConnection(port: port)
        let pairs = options.quick ? 30 : 200
        progress("abuse: \(pairs) unknown-user and \(pairs) wrong-password logins, alternating")
        var unknown: [Double] = []
        var wrong: [Double] = []
        var address = 0
        func attempt(_ username: String) throws -> Double {
            address += 1
            let body = PasswordLoginRequest(
                username: try Username(username), password: "a wrong password", clientID: "bench-timing"
            ).jsonData
            let began = nanoseconds()
            let reply = try connection.send(
                API.passwordLogin, raw: body,
                headers: [
                    "X-Forwarded-For": "10.\(address >> 16 & 255).\(address >> 8 & 255).\(address & 255)"
                ])
            let elapsed = seconds(since: began) * 1000
            if reply.status != 401 { numbers.loginFailures += 1 }
            return elapsed
        }
        // One of each first, unmeasured; then each pair in alternating order.
        _ = try attempt("nobody-warmup")
        _ = try attempt(users[0])
        for index in 0..<pairs {
            let ghost = "nobody\(index)-\(UInt32.random(in: 0...UInt32.max))"
            let known = users[index % users.count]
            if index.isMultiple(of: 2) {
                unknown.append(try attempt(ghost))
                wrong.append(try attempt(known))
            } else {
                wrong.append(try attempt(known))
                unknown.append(try attempt(ghost))
            }
        }
        unknown.sort()
        wrong.sort()
        numbers.unknownUserMedian = unknown[unknown.count / 2]
        numbers.wrongPasswordMedian = wrong[wrong.count / 2]
        numbers.loginSamples = pairs
    }
}
