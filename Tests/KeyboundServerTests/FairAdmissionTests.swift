import Foundation
import KeyboundTestSupport
import Testing

@testable import KeyboundServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A server whose every slot is held by half-open requests from many client networks, each within
/// its own cap: a fresh client from elsewhere is still answered at once (issue 21). Linux puts all
/// of 127.0.0.0/8 on the loopback interface, so each attacker network is one address there.
@Suite("Fair admission", .serialized)
struct FairAdmissionTests {
    /// 16 networks × 64 half-open requests are exactly the default connection limit (1024); 17 are
    /// more. The attacker reconnects every connection the server cuts, at once; five fresh
    /// clients one after another must each get their answer within 3 s.
    @Test(
        .enabled(
            if: Flood.canRun(connections: 17 * 64), "needs 127.0.0.0/8 on lo and enough file descriptors"),
        arguments: [16, 17])
    func aFreshClientIsAnsweredWhileNetworksHoldEverySlot(networks: Int) async throws {
        let live = try TestServer()
        #expect(live.server.configuration.connectionLimit == 1024)
        #expect(live.server.configuration.perIPConnectionLimit == 64)
        let port = try #require(live.server.port)
        let flood = try await offThePool { try Flood(port: port, networks: networks, perNetwork: 64) }
        defer { flood.stop() }
        var reconnectsBefore = flood.reconnects
        for round in 1...5 {
            let (status, seconds) = try await offThePool {
                // The attacker's reconnections are under way: wait a moment so the flood is whole again.
                usleep(300_000)
                let start = DispatchTime.now().uptimeNanoseconds
                let victim = try RawConnection(port: port, from: "127.20.0.\(round)", timeoutSeconds: 6)
                _ = victim.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                let status = victim.response()?.status
                return (status, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            }
            #expect(status == 200, "round \(round): no answer within 6 s")
            #expect(seconds < 3, "round \(round): answered after \(seconds) s")
            // Each fresh client displaced one of the flood's connections, which reconnected.
            let reconnects = try await offThePool { [reconnectsBefore] in
                flood.reconnects(moreThan: reconnectsBefore, within: 2)
            }
            #expect(
                reconnects > reconnectsBefore, "round \(round): the flood was not cut to admit the client")
            reconnectsBefore = reconnects
            if status != 200 || seconds >= 3 { break }
        }
    }
}

/// Half-open requests from many loopback networks, held open: each connection sends the start of
/// a request whose headers never end. A thread of its own reconnects, at once and from the same
/// address, every connection the server closes, as an attacker would. Networks are 127.10.0.1,
/// 127.10.0.2, …
final class Flood: Sendable {
    private let stopping = Locked(false)
    private let counters = Locked((reconnects: 0, failures: 0))
    private let finished = DispatchSemaphore(value: 0)

    static let request = "GET /healthz HTTP/1.1\r\nHost: x\r\n"

    /// Whether `connections` can be held here: 127.10.0.1 can be bound, and the process may open
    /// their sockets, the server's ends of them and the rest of the suite's (the soft limit is
    /// raised to the hard one when it is lower).
    static func canRun(connections: Int) -> Bool {
        guard RawConnection.canBind("127.10.0.1") else { return false }
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return false }
        let needed = rlim_t(2 * connections + 4096)
        if limit.rlim_cur < needed, limit.rlim_max >= needed {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur >= needed
    }

    /// Opens every connection (each sends ``request``), then keeps them open until ``stop()``.
    /// - Throws: when a connection cannot be opened.
    init(port: UInt16, networks: Int, perNetwork: Int) throws {
        let ready = Locked<Result<Void, any Error>?>(nil)
        let started = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [stopping, counters, finished] in
            defer { finished.signal() }
            let sources = (1...networks).flatMap { network in
                Array(repeating: "127.10.0.\(network)", count: perNetwork)
            }
            var connections: [RawConnection] = []
            do {
                for source in sources {
                    let connection = try RawConnection(port: port, from: source)
                    _ = connection.send(Self.request)
                    connections.append(connection)
                }
                ready.withLock { $0 = .success(()) }
            } catch {
                ready.withLock { $0 = .failure(error) }
            }
            started.signal()
            guard connections.count == sources.count else { return }
            var entries = connections.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            while !stopping.withLock({ $0 }) {
                guard poll(&entries, nfds_t(entries.count), 50) > 0 else { continue }
                for index in entries.indices where entries[index].revents != 0 {
                    guard connections[index].closedByPeer(within: 0) else { continue }
                    // Cut by the server: connect again from the same network.
                    guard let again = try? RawConnection(port: port, from: sources[index]) else {
                        counters.withLock { $0.failures += 1 }
                        continue
                    }
                    _ = again.send(Self.request)
                    connections[index] = again
                    entries[index].fd = again.descriptor
                    counters.withLock { $0.reconnects += 1 }
                }
                for index in entries.indices { entries[index].revents = 0 }
            }
        }
        started.wait()
        if case .failure(let error) = ready.withLock({ $0 }) {
            finished.wait()
            throw error
        }
    }

    /// How many connections the server closed and the flood opened again.
    var reconnects: Int { counters.withLock { $0.reconnects } }

    /// ``reconnects`` once it is more than `count`, or after `seconds`.
    func reconnects(moreThan count: Int, within seconds: Double) -> Int {
        let deadline = DispatchTime.now() + seconds
        while reconnects <= count, DispatchTime.now() < deadline { usleep(10_000) }
        return reconnects
    }

    /// Closes every connection; returns when the flood's thread has ended. Call it once.
    func stop() {
        stopping.withLock { $0 = true }
        finished.wait()
    }
}
