import CMicroHTTPD
import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The connection limits libmicrohttpd does not enforce itself: deadlines for a request to arrive
/// and for its response to leave, caps on the connections of one client network, and fair
/// admission when the server is full.
///
/// Every connection is registered here when it opens and forgotten when it closes (libmicrohttpd
/// reports both, the closing before it closes the socket). A connection is cut with
/// `shutdown(2)`: libmicrohttpd then reads end-of-file (or fails to write) and closes it itself.
/// The socket is only shut down under the lock that `closed` takes, so it is never one that was
/// closed and reused already.
///
/// **Deadlines.** libmicrohttpd's own timeout restarts with every byte, so a client trickling a
/// request, or reading a large response, a few bytes at a time would hold its connection for as
/// long as it likes. So a request must arrive whole within the request timeout of the moment the
/// connection could start sending it (its opening, or the end of the previous response on a
/// kept-alive connection), and a response must leave within the same time of being queued. A
/// watchdog cuts connections that miss either (it looks a few times per timeout, at least once a
/// second). A request the server is handling has no deadline here (the database timeout bounds it).
///
/// **Networks.** A connection counts toward its IPv4 address, or toward its IPv6 /64, /56 and /48:
/// one IPv6 client usually holds a whole /64, a home a /56 and a site a /48, so 16 /64s of one
/// /56 must not each get a share of their own. Each level has its cap (``NetworkCaps``); a
/// connection that takes any of its networks over its cap is cut as soon as it opens.
///
/// **Fair admission.** libmicrohttpd stops accepting at its own connection limit, and a client it
/// does not accept waits in the kernel's listen backlog until a connection closes: with every slot
/// held by half-open requests from a few networks, each within its cap, that is until a request
/// deadline, and the attacker reconnects at once. So the guard acts before libmicrohttpd's limit
/// is reached: libmicrohttpd gets ``libmicrohttpdLimit(connectionLimit:threads:)``, the
/// connection limit and a small reserve, and a connection that opens while `connectionLimit`
/// others are live (open and not cut) cuts one of them. It cuts a connection that waits on its
/// client (a request still arriving, an idle kept-alive connection, a response the client is
/// still reading), never a request the server is working on: of those, one of the network that
/// holds the most connections measured against its level's cap (a /48 holding 256 of 256 counts
/// as full as an address holding 64 of 64), and of that network's, the one that has waited
/// longest. The newcomer itself is not a candidate. So a newcomer is always admitted (within its
/// own network's cap), and a flood cannot grow: each connection it opens once the server is full
/// displaces a stalled one, its own while its networks hold more than the newcomers' (a client
/// holding one connection is displaced only when every network holds no more than one, each
/// after all that waited longer). "Near the limit" is thus exactly the limit for live
/// connections; the reserve holds what is above it for a moment: connections cut and not closed
/// yet (libmicrohttpd closes each in its worker's next poll round, and a worker accepts at most
/// one connection per round), and newcomers admitted while every live connection is being
/// handled (libmicrohttpd's limit bounds those). When the reserve runs out, libmicrohttpd only
/// waits for the next close to accept again.
final class ConnectionGuard: Sendable {
    private enum Phase: Equatable {
        /// The request is awaited or being received since `since` (uptime nanoseconds).
        case receiving(since: UInt64)
        /// The request arrived whole; the server handles it: no deadline of ours.
        case handling
        /// The response was queued at `since` and is being sent.
        case sending(since: UInt64)
        /// Shut down; libmicrohttpd has not noticed yet.
        case cut

        /// When the phase began, if the connection waits on its client (it then has a deadline
        /// and may be cut to admit a newcomer).
        var waitingSince: UInt64? {
            switch self {
            case .receiving(let since), .sending(let since): since
            case .handling, .cut: nil
            }
        }
    }

    private struct Connection {
        let socket: Int32
        let networks: [ClientNetwork]
        var phase: Phase
    }

    private struct State {
        /// Open connections by the address of their libmicrohttpd handle.
        var connections: [UInt: Connection] = [:]
        /// Open connections (cut ones too, until they close) per client network.
        var open: [ClientNetwork: Int] = [:]
        /// Open connections that are not cut.
        var live = 0
        /// The last phase start handed out: starts are distinct, so "waited longest" has one answer.
        var lastStart: UInt64 = 0

        /// The start of a phase beginning now.
        mutating func start() -> UInt64 {
            lastStart = max(ConnectionGuard.now, lastStart + 1)
            return lastStart
        }
    }

    private let state = Locked(State())
    private let timeout: UInt64
    private let connectionLimit: Int
    private let caps: NetworkCaps
    /// Cuts overdue connections; set once in `init`, taken by `stop()`.
    private let watchdog = Locked<(any DispatchSourceTimer)?>(nil)

    /// - Parameters:
    ///   - requestTimeoutSeconds: how long a request may take to arrive whole, and a response to
    ///     leave.
    ///   - connectionLimit: live connections beyond which a newcomer cuts one (see the type).
    ///   - caps: open connections allowed per client network.
    init(requestTimeoutSeconds: Int, connectionLimit: Int, caps: NetworkCaps) {
        timeout = UInt64(max(1, requestTimeoutSeconds)) * 1_000_000_000
        self.connectionLimit = max(1, connectionLimit)
        self.caps = caps
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        // A quarter of the timeout (at most a second): a late connection is cut within 25% of it.
        let interval = DispatchTimeInterval.nanoseconds(Int(min(timeout / 4, 1_000_000_000)))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.cutOverdue(at: Self.now) }
        timer.resume()
        watchdog.withLock { $0 = timer }
    }

    /// The connection limit libmicrohttpd enforces itself: `connectionLimit` live connections and
    /// a reserve of 4 per worker thread for those above it for a moment (see the type).
    static func libmicrohttpdLimit(connectionLimit: Int, threads: Int) -> Int {
        max(1, connectionLimit) + 4 * max(1, threads)
    }

    /// Stops the watchdog. Safe to call more than once.
    func stop() {
        watchdog.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }

    deinit { stop() }

    /// Uptime in nanoseconds, the clock of every deadline here.
    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// A new connection (libmicrohttpd's handle): see ``opened(_:socket:address:)``.
    func opened(_ connection: OpaquePointer) {
        var bytes = [UInt8](repeating: 0, count: 8)
        let count = kb_mhd_client_network(connection, &bytes)
        opened(
            connection, socket: kb_mhd_connection_socket(connection),
            address: count > 0 ? Array(bytes.prefix(Int(count))) : [])
    }

    /// A new connection: starts its first request's deadline; cuts it when one of its networks is
    /// over its cap, or else, when the server is full, cuts another to make room (see the type).
    /// - Parameters:
    ///   - socket: its socket, or -1 (then a cut only marks it).
    ///   - address: the client's IPv4 address (4 bytes) or the first 8 bytes of its IPv6 address;
    ///     empty when unknown.
    func opened(_ connection: OpaquePointer, socket: Int32, address: [UInt8]) {
        let key = UInt(bitPattern: connection)
        let networks = ClientNetwork.networks(of: address, counted: caps)
        state.withLock { state in
            var overCap = false
            for network in networks {
                let open = state.open[network, default: 0] + 1
                state.open[network] = open
                let cap = caps.cap(of: network)
                if cap > 0, open > cap { overCap = true }
            }
            state.connections[key] = Connection(
                socket: socket, networks: networks, phase: .receiving(since: state.start()))
            state.live += 1
            if overCap {
                Self.cut(key, in: &state)
            } else if state.live > connectionLimit, let displaced = displaced(in: state, keeping: key) {
                Self.cut(displaced, in: &state)
            }
        }
    }

    /// The connection is closing (its socket is still open).
    func closed(_ connection: OpaquePointer) {
        state.withLock { state in
            guard let entry = state.connections.removeValue(forKey: UInt(bitPattern: connection)) else {
                return
            }
            if entry.phase != .cut { state.live -= 1 }
            for network in entry.networks {
                let open = state.open[network, default: 1] - 1
                state.open[network] = open > 0 ? open : nil
            }
        }
    }

    /// The request arrived whole and is about to be handled: its deadline no longer runs.
    ///
    /// A whole request is answered even when its deadline passed since the watchdog's last round:
    /// the deadline is there to free connections that hold a request back, and this one holds
    /// nothing back any more. Refusing it would close, without an answer, a kept-alive connection
    /// that a client reused just at the end of its idle time, a request the client cannot tell
    /// from one the server dropped (a client that then sent it again without its body waited 30 s
    /// for nothing in the tests).
    /// - Returns: false when the connection was cut already (do not answer).
    func requestArrived(_ connection: OpaquePointer) -> Bool {
        state.withLock { state in
            let key = UInt(bitPattern: connection)
            guard var entry = state.connections[key] else { return true }
            switch entry.phase {
            case .receiving: entry.phase = .handling
            case .handling, .sending: return true
            case .cut: return false
            }
            state.connections[key] = entry
            return true
        }
    }

    /// The response was queued: it must leave within the timeout.
    func responseQueued(_ connection: OpaquePointer) { startWaiting(connection, Phase.sending(since:)) }

    /// The response was sent: the next request on this connection must arrive within the timeout.
    func requestCompleted(_ connection: OpaquePointer) { startWaiting(connection, Phase.receiving(since:)) }

    /// Starts a phase that waits on the client, unless the connection was cut.
    private func startWaiting(_ connection: OpaquePointer, _ phase: (UInt64) -> Phase) {
        state.withLock { state in
            let key = UInt(bitPattern: connection)
            guard var entry = state.connections[key], entry.phase != .cut else { return }
            entry.phase = phase(state.start())
            state.connections[key] = entry
        }
    }

    /// The watchdog: cuts every connection whose request or response is overdue at `now` (uptime
    /// nanoseconds; tests pass a later one).
    func cutOverdue(at now: UInt64) {
        state.withLock { state in
            for (key, entry) in state.connections {
                guard let since = entry.phase.waitingSince, since + timeout < now else { continue }
                Self.cut(key, in: &state)
            }
        }
    }

    /// The connection to cut so that `newcomer` fits (see the type), or nil when every other
    /// live connection is being handled.
    private func displaced(in state: State, keeping newcomer: UInt) -> UInt? {
        // The most crowded network of the best candidate so far: open / cap, compared crosswise.
        var best: (key: UInt, open: Int, cap: Int, since: UInt64)?
        for (key, entry) in state.connections where key != newcomer {
            guard let since = entry.phase.waitingSince else { continue }
            var open = 0
            var cap = 1
            for network in entry.networks {
                let count = state.open[network, default: 0]
                let weight = caps.weight(of: network, connectionLimit: connectionLimit)
                if count * cap > open * weight { (open, cap) = (count, weight) }
            }
            if let current = best {
                let crowding = open * current.cap - current.open * cap
                guard crowding > 0 || (crowding == 0 && since < current.since) else { continue }
            }
            best = (key, open, cap, since)
        }
        return best?.key
    }

    /// Shuts the connection's socket down both ways; libmicrohttpd sees end-of-file (or cannot
    /// write any more) and closes the connection. Lingering is turned off first, so that the close
    /// resets the connection and drops whatever the kernel still holds to send: a slow reader
    /// would otherwise go on getting the response from the kernel's buffers for minutes after
    /// the cut. Only called under the lock, while the connection is registered (its socket still
    /// open).
    private static func cut(_ key: UInt, in state: inout State) {
        guard var entry = state.connections[key], entry.phase != .cut else { return }
        if entry.socket >= 0 {
            var abort = linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(entry.socket, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
            _ = shutdown(entry.socket, Int32(SHUT_RDWR))
        }
        entry.phase = .cut
        state.connections[key] = entry
        state.live -= 1
    }
}

/// Open connections allowed per client network at each level a connection counts toward; 0 for
/// no cap (and, for the IPv6 /56 and /48, the level is not counted at all).
struct NetworkCaps: Sendable, Equatable {
    /// Per IPv4 address or IPv6 /64.
    var address: Int
    /// Per IPv6 /56.
    var slash56: Int = 0
    /// Per IPv6 /48.
    var slash48: Int = 0

    /// The cap of `network`'s level; 0 for none.
    func cap(of network: ClientNetwork) -> Int {
        switch network.length {
        case 56: slash56
        case 48: slash48
        default: address
        }
    }

    /// What `network`'s open connections are measured against when the server is full: its cap,
    /// or, without one, the connection limit.
    func weight(of network: ClientNetwork, connectionLimit: Int) -> Int {
        let cap = cap(of: network)
        return cap > 0 ? cap : connectionLimit
    }
}

/// A client network a connection counts toward: an IPv4 address, or an IPv6 prefix.
struct ClientNetwork: Hashable, Sendable {
    /// The prefix's bits from the top (an IPv4 address: in the low 32 bits).
    let prefix: UInt64
    /// 32 for an IPv4 address; 64, 56 or 48 for an IPv6 prefix; 0 when the address is unknown.
    let length: UInt8

    /// The networks a client counts toward: its IPv4 address (`address` has 4 bytes), or its IPv6
    /// /64, and its /56 and /48 where `caps` counts them (`address` holds the first 8 bytes of
    /// its IPv6 address); an unknown address (empty) is one network of its own.
    static func networks(of address: [UInt8], counted caps: NetworkCaps) -> [ClientNetwork] {
        let bits = address.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        switch address.count {
        case 4:
            return [ClientNetwork(prefix: bits, length: 32)]
        case 8:
            var networks = [ClientNetwork(prefix: bits, length: 64)]
            if caps.slash56 > 0 { networks.append(ClientNetwork(prefix: bits & ~0xFF, length: 56)) }
            if caps.slash48 > 0 { networks.append(ClientNetwork(prefix: bits & ~0xFFFF, length: 48)) }
            return networks
        default:
            return [ClientNetwork(prefix: 0, length: 0)]
        }
    }
}
