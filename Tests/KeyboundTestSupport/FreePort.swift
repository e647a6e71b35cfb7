import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// No free loopback port was found.
public struct PortError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String { "no free loopback port below 32000" }
}

/// A loopback port below the ephemeral range that nothing holds now: one the kernel does not
/// hand to outgoing connections, so it stays free for what a test starts on it later (a server
/// whose issuer URL names the port, a receiver that is down for a while).
public func freeLoopbackPort() throws -> UInt16 {
    for _ in 0..<100 {
        let port = UInt16.random(in: 20_000...32_000)
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { continue }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        if bound { return port }
    }
    throw PortError()
}
