import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Loopback ports for test servers that need theirs before they start (a PostgreSQL cluster, a
/// server whose issuer URL names its port).
package enum LoopbackPorts {
    /// No free port was found.
    package struct Exhausted: Error, CustomStringConvertible {
        /// Where it looked.
        package let description: String
    }

    /// The ports claimed and not yet released by this process.
    private static let takenPorts = Mutex<Set<UInt16>>([])

    /// A port to listen on: free on 127.0.0.1 now, below the range the kernel draws ephemeral
    /// ports from, and not claimed by this process already. Release it when done.
    ///
    /// Below the ephemeral range, because a server that is stopped and started again (a
    /// PostgreSQL cluster) needs its port back, and one whose URL must be known before it starts
    /// (an OAuth issuer) cannot take port 0. An ephemeral one can be taken meanwhile by any connection's local end (the
    /// tests keep hundreds of connections open, some of them for seconds), and the server then
    /// fails to listen, for as long as that connection lives. This happened in CI once.
    package static func claim() throws -> UInt16 {
        let candidates = UInt16(10_000)..<ephemeralPortsStart()
        for _ in 0..<100 {
            guard let port = candidates.randomElement() else { break }
            let claimed = takenPorts.withLock { $0.insert(port).inserted }
            guard claimed else { continue }
            if canListen(on: port) { return port }
            _ = takenPorts.withLock { $0.remove(port) }
        }
        throw Exhausted(description: "cannot find a free port in \(candidates)")
    }

    /// Two consecutive ports, `port` and `port + 1`, as ``claim()`` chooses one: for a server that
    /// listens on both (swtpm's command and control channels, which its TCTI finds at `port + 1`).
    /// Release both when done.
    package static func claimPair() throws -> UInt16 {
        let candidates = UInt16(10_000)..<(ephemeralPortsStart() - 1)
        for _ in 0..<100 {
            guard let port = candidates.randomElement() else { break }
            let claimed = takenPorts.withLock { taken in
                guard !taken.contains(port), !taken.contains(port + 1) else { return false }
                taken.formUnion([port, port + 1])
                return true
            }
            guard claimed else { continue }
            if canListen(on: port), canListen(on: port + 1) { return port }
            takenPorts.withLock { $0.subtract([port, port + 1]) }
        }
        throw Exhausted(description: "cannot find two free consecutive ports in \(candidates)")
    }

    /// The first port of the kernel's ephemeral range (Linux's setting; otherwise 32768, below
    /// both Linux's and macOS's defaults).
    private static func ephemeralPortsStart() -> UInt16 {
        let setting = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let first = setting?.split(whereSeparator: \.isWhitespace).first.flatMap { UInt16($0) }
        return min(first ?? 32_768, 32_768)
    }

    /// Gives `port` back for another claim.
    package static func release(_ port: UInt16) { _ = takenPorts.withLock { $0.remove(port) } }

    /// Whether a listening socket can be bound to 127.0.0.1:`port` now (with `SO_REUSEADDR`, as
    /// PostgreSQL binds).
    private static func canListen(on port: UInt16) -> Bool {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { return false }
        defer { close(socketDescriptor) }
        var reuse: Int32 = 1
        setsockopt(socketDescriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
