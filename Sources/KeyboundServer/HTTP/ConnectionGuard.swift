import CMicroHTTPD
import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The connection limits libmicrohttpd does not enforce itself: a whole-request deadline and a
/// cap on the connections of one client network.
///
/// libmicrohttpd's own timeout restarts with every byte, so a client trickling a request one
/// byte at a time would hold its connection for as long as it likes; and its per-IP limit counts
/// every IPv6 address alone, while one IPv6 client usually holds a whole /64. So every
/// connection is registered here when it opens and forgotten when it closes (libmicrohttpd
/// reports both, the closing before it closes the socket). A request must arrive whole within
/// the request timeout of the moment the connection could start sending it: its opening, or the
/// end of the previous response on a kept-alive connection. A watchdog cuts connections that
/// miss it (it looks a few times per timeout, at least once a second), and a connection over its
/// network's cap is cut at once, with `shutdown(2)`:
/// libmicrohttpd then reads end-of-file and closes the connection itself. The socket is
/// only shut down under the lock that `closed` takes, so it is never one that was closed and
/// reused already.
final class ConnectionGuard: Sendable {
    private enum Phase: Equatable {
        /// The request is being received; it must be complete by `deadline` (uptime nanoseconds).
        case receiving(deadline: UInt64)
        /// The server handles the request or sends its response: no deadline of ours.
        case handling
        /// Shut down; libmicrohttpd has not noticed yet.
        case cut
    }

    private struct Connection {
        let socket: Int32
        let network: [UInt8]
        var phase: Phase
    }

    private struct State {
        /// Open connections by the address of their libmicrohttpd handle.
        var connections: [UInt: Connection] = [:]
        /// Open connections per client network (IPv4 address or IPv6 /64).
        var perNetwork: [[UInt8]: Int] = [:]
    }

    private let state = Locked(State())
    private let requestTimeout: UInt64
    private let perNetworkLimit: Int
    /// Cuts overdue connections; set once in `init`, taken by `stop()`.
    private let watchdog = Locked<(any DispatchSourceTimer)?>(nil)

    /// - Parameters:
    ///   - requestTimeoutSeconds: how long a request may take to arrive whole.
    ///   - perNetworkLimit: open connections allowed per client network; 0 for no limit.
    init(requestTimeoutSeconds: Int, perNetworkLimit: Int) {
        requestTimeout = UInt64(max(1, requestTimeoutSeconds)) * 1_000_000_000
        self.perNetworkLimit = perNetworkLimit
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        // A quarter of the timeout (at most a second): a late request is cut within 25% of it.
        let interval = DispatchTimeInterval.nanoseconds(Int(min(requestTimeout / 4, 1_000_000_000)))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.cutOverdue() }
        timer.resume()
        watchdog.withLock { $0 = timer }
    }

    /// Stops the watchdog. Safe to call more than once.
    func stop() {
        watchdog.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }

    deinit { stop() }

    private static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// A new connection: starts its first request's deadline; cuts it when its network is over the cap.
    func opened(_ connection: OpaquePointer) {
        let socket = kb_mhd_connection_socket(connection)
        var bytes = [UInt8](repeating: 0, count: 8)
        let count = kb_mhd_client_network(connection, &bytes)
        let network = count > 0 ? Array(bytes.prefix(Int(count))) : []
        state.withLock { state in
            let open = state.perNetwork[network, default: 0] + 1
            state.perNetwork[network] = open
            var entry = Connection(
                socket: socket, network: network, phase: .receiving(deadline: Self.now + requestTimeout))
            if perNetworkLimit > 0, open > perNetworkLimit { Self.cut(&entry) }
            state.connections[UInt(bitPattern: connection)] = entry
        }
    }

    /// The connection is closing (its socket is still open).
    func closed(_ connection: OpaquePointer) {
        state.withLock { state in
            guard let entry = state.connections.removeValue(forKey: UInt(bitPattern: connection)) else {
                return
            }
            let open = state.perNetwork[entry.network, default: 1] - 1
            state.perNetwork[entry.network] = open > 0 ? open : nil
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
            case .handling: return true
            case .cut: return false
            }
            state.connections[key] = entry
            return true
        }
    }

    /// The response was sent: the next request on this connection must arrive within the timeout.
    func requestCompleted(_ connection: OpaquePointer) {
        state.withLock { state in
            let key = UInt(bitPattern: connection)
            guard var entry = state.connections[key], entry.phase != .cut else { return }
            entry.phase = .receiving(deadline: Self.now + requestTimeout)
            state.connections[key] = entry
        }
    }

    /// The watchdog: cuts every connection whose request is overdue.
    private func cutOverdue() {
        let now = Self.now
        state.withLock { state in
            for (key, var entry) in state.connections {
                guard case .receiving(let deadline) = entry.phase, deadline < now else { continue }
                Self.cut(&entry)
                state.connections[key] = entry
            }
        }
    }

    /// Shuts the socket down both ways; libmicrohttpd sees end-of-file and closes the connection.
    /// Only called under the lock, while the connection is registered (its socket still open).
    private static func cut(_ entry: inout Connection) {
        if entry.socket >= 0 { _ = shutdown(entry.socket, Int32(SHUT_RDWR)) }
        entry.phase = .cut
    }
}
