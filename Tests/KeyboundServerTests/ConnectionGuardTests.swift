import Foundation
import Testing

@testable import KeyboundServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// ``ConnectionGuard`` fed connections from chosen addresses, IPv6 ones too (the loopback
/// interface has one IPv6 address only): network caps at each level, whom a full server cuts to
/// admit a newcomer, and the deadlines of each phase. Each connection's socket is one end of a
/// socket pair, so a cut shows as end-of-file at the other.
@Suite("Connection guard")
struct ConnectionGuardTests {
    @Test func ipv6PrefixesCountAtTheirOwnCaps() throws {
        let bench = GuardBench(limit: 1000, caps: NetworkCaps(address: 4, slash56: 8, slash48: 12))
        // One /64: the fifth connection is over its cap.
        let first = try bench.open(5, from: "2001:db8:0:100::1")
        #expect(bench.cut(first) == [4])
        bench.close(first[4])
        // Another /64 of the same /56 (2001:db8:0:100::/56): four more fit, and the /56 holds 8;
        // one more, from a third /64, is over the /56's cap.
        #expect(bench.cut(try bench.open(4, from: "2001:db8:0:1a0::1")) == [])
        let ninth = try bench.open(1, from: "2001:db8:0:1ff::2")
        #expect(bench.cut(ninth) == [0])
        bench.close(ninth[0])
        // Another /56 of the same /48 (2001:db8::/48): four fit, and the /48 holds 12; one more,
        // from a third /56, is over the /48's cap.
        #expect(bench.cut(try bench.open(4, from: "2001:db8:0:200::1")) == [])
        #expect(bench.cut(try bench.open(1, from: "2001:db8:0:300::1")) == [0])
        // Another /48 counts apart.
        #expect(bench.cut(try bench.open(4, from: "2001:db8:1::1")) == [])
        // IPv4 counts per address, and no wider: 10 addresses of one /24, 4 each.
        for host in 1...10 { #expect(bench.cut(try bench.open(4, from: "192.0.2.\(host)")) == []) }
        #expect(bench.cut(try bench.open(1, from: "192.0.2.1")) == [0])
    }

    @Test func aPrefixCapOfZeroCountsNothing() throws {
        let perSlash64 = GuardBench(limit: 1000, caps: NetworkCaps(address: 4))
        // 16 /64s of one /56, 4 each: only the /64 is counted.
        for subnet in 0..<16 {
            #expect(perSlash64.cut(try perSlash64.open(4, from: "2001:db8:0:1\(subnet)::1")) == [])
        }
        let none = GuardBench(limit: 1000, caps: NetworkCaps(address: 0))
        #expect(none.cut(try none.open(100, from: "2001:db8::1")) == [])
        #expect(none.cut(try none.open(100, from: "192.0.2.1")) == [])
    }

    /// A full server admits a newcomer by cutting a connection that waits on its client: of the
    /// network holding the most, the one that has waited longest; never one being handled.
    @Test func aFullServerCutsTheLongestWaitingConnectionOfTheMostCrowdedNetwork() throws {
        let bench = GuardBench(limit: 8, caps: NetworkCaps(address: 4))
        let a = try bench.open(4, from: "192.0.2.1")
        let b = try bench.open(3, from: "192.0.2.2")
        let c = try bench.open(1, from: "192.0.2.3")
        #expect(bench.cut(a + b + c) == [])
        // A holds the most.
        let d = try bench.open(1, from: "192.0.2.4")
        #expect(bench.cut(a + b + c + d) == [0])
        bench.close(a[0])
        // A and B hold 3 each: A's second has waited longest.
        let e = try bench.open(1, from: "192.0.2.5")
        #expect(bench.cut(a + b + c + d + e) == [1])
        bench.close(a[1])
        // A's and B's requests are being handled: of the rest, which hold one each, C waited longest.
        for connection in a[2...] + b { #expect(bench.connections.requestArrived(connection)) }
        let f = try bench.open(1, from: "192.0.2.6")
        #expect(bench.cut(Array(a[2...]) + b + c + d + e + f) == [5])
        bench.close(c[0])
        // B's first is answered and idle again, the newest to wait, but B holds the most.
        bench.connections.responseQueued(b[0])
        bench.connections.requestCompleted(b[0])
        let g = try bench.open(1, from: "192.0.2.7")
        #expect(bench.cut(Array(a[2...]) + b + d + e + f + g) == [2])
        bench.close(b[0])
        // A response still being sent waits on its client too: B's second is cut before D.
        bench.connections.responseQueued(b[1])
        let h = try bench.open(1, from: "192.0.2.8")
        #expect(bench.cut(Array(a[2...]) + b[1...] + d + e + f + g + h) == [2])
        bench.close(b[1])
    }

    @Test func aNewcomerIsAdmittedWhenEveryOtherConnectionIsBeingHandled() throws {
        let bench = GuardBench(limit: 4, caps: NetworkCaps(address: 4))
        let busy = try bench.open(4, from: "192.0.2.1")
        for connection in busy { #expect(bench.connections.requestArrived(connection)) }
        let newcomer = try bench.open(1, from: "192.0.2.2")
        #expect(bench.cut(busy + newcomer) == [])
        // The next newcomer displaces the one that waits.
        let next = try bench.open(1, from: "192.0.2.3")
        #expect(bench.cut(busy + newcomer + next) == [4])
    }

    /// Crowding is measured against each level's cap: an IPv4 address at its cap is fuller than a
    /// /48 that holds more connections but is below its own.
    @Test func crowdingIsMeasuredAgainstEachLevelsCap() throws {
        let bench = GuardBench(limit: 16, caps: NetworkCaps(address: 4, slash56: 8, slash48: 16))
        let address = try bench.open(4, from: "192.0.2.1")
        // 12 in one /48, 3 in each of four /56s: 12/16 of the /48's cap.
        let site = try ["100", "200", "300", "400"].flatMap { try bench.open(3, from: "2001:db8:0:\($0)::1") }
        #expect(bench.cut(address + site) == [])
        _ = try bench.open(1, from: "198.51.100.1")
        #expect(bench.cut(address + site) == [0])
        bench.close(address[0])
        // The /48 now holds 13 of 16, more than the address's 3 of 4: the /48's longest waiting goes.
        _ = try bench.open(1, from: "2001:db8:0:500::1")
        #expect(bench.cut(Array(address[1...]) + site) == [3])
    }

    /// A request must arrive, and a response leave, within the timeout; a request being handled
    /// has no deadline here.
    @Test func requestsAndResponsesHaveDeadlinesAndHandlingDoesNot() throws {
        let bench = GuardBench(limit: 100, caps: NetworkCaps(address: 0), timeoutSeconds: 30)
        let connections = try bench.open(4, from: "192.0.2.1")
        let (receiving, handling, sending, idle) = (
            connections[0], connections[1], connections[2], connections[3]
        )
        for connection in [handling, sending, idle] { #expect(bench.connections.requestArrived(connection)) }
        bench.connections.responseQueued(sending)
        bench.connections.responseQueued(idle)
        bench.connections.requestCompleted(idle)
        let start = ConnectionGuard.now
        bench.connections.cutOverdue(at: start + 29_000_000_000)
        #expect(bench.cut([receiving, handling, sending, idle]) == [])
        bench.connections.cutOverdue(at: start + 31_000_000_000)
        #expect(bench.cut([receiving, handling, sending, idle]) == [0, 2, 3])
        // A request that arrives whole on a connection cut meanwhile is not answered.
        #expect(!bench.connections.requestArrived(receiving))
    }
}

/// A ``ConnectionGuard`` with synthetic connections: each is a socket pair, the guard holding one
/// end as the connection's socket and the bench the other.
final class GuardBench {
    let connections: ConnectionGuard
    private var peers: [UInt: Int32] = [:]
    private var sockets: [UInt: Int32] = [:]
    private var next: UInt = 0x1000

    init(limit: Int, caps: NetworkCaps, timeoutSeconds: Int = 3600) {
        connections = ConnectionGuard(
            requestTimeoutSeconds: timeoutSeconds, connectionLimit: limit, caps: caps)
    }

    deinit {
        connections.stop()
        for descriptor in Array(peers.values) + Array(sockets.values) { closeDescriptor(descriptor) }
    }

    /// Opens `count` connections from `address` (numeric IPv4 or IPv6), one after another.
    func open(_ count: Int, from address: String) throws -> [OpaquePointer] {
        var bytes = [UInt8](repeating: 0, count: 16)
        let isIPv4 = inet_pton(AF_INET, address, &bytes) == 1
        guard isIPv4 || inet_pton(AF_INET6, address, &bytes) == 1 else {
            throw TestFailure("not an address: \(address)")
        }
        return try (0..<count).map { _ in
            var pair: [Int32] = [-1, -1]
            #if canImport(Glibc)
                let status = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair)
            #else
                let status = socketpair(AF_UNIX, SOCK_STREAM, 0, &pair)
            #endif
            guard status == 0 else {
                throw TestFailure("socketpair: errno \(errno)")
            }
            next += 16
            guard let connection = OpaquePointer(bitPattern: next) else { throw TestFailure("no handle") }
            sockets[next] = pair[0]
            peers[next] = pair[1]
            connections.opened(connection, socket: pair[0], address: Array(bytes.prefix(isIPv4 ? 4 : 8)))
            return connection
        }
    }

    /// The positions in `list` of the connections the guard has cut: their other end reads
    /// end-of-file.
    func cut(_ list: [OpaquePointer]) -> [Int] {
        list.indices.filter { index in
            guard let peer = peers[UInt(bitPattern: list[index])] else { return false }
            var byte: UInt8 = 0
            return recv(peer, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
        }
    }

    /// Closes the connection, as libmicrohttpd does after a cut.
    func close(_ connection: OpaquePointer) {
        let key = UInt(bitPattern: connection)
        connections.closed(connection)
        if let socket = sockets.removeValue(forKey: key) { closeDescriptor(socket) }
        if let peer = peers.removeValue(forKey: key) { closeDescriptor(peer) }
    }
}

/// The C `close`, which the method of the same name hides inside ``GuardBench``.
private func closeDescriptor(_ descriptor: Int32) { close(descriptor) }
