import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The SSRF guard: a webhook target must be a public address, unless private ones are allowed
/// (``Configuration/allowPrivateWebhooks``).
enum WebhookTarget {
    /// Why `url` cannot be a webhook target (its form), or nil when it can.
    static func formProblem(_ url: String) -> String? {
        guard url.count <= 2048, let parsed = URLComponents(string: url),
            let scheme = parsed.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = parsed.host, !host.isEmpty
        else { return "the URL must be http:// or https:// with a host" }
        if parsed.user != nil || parsed.password != nil { return "the URL must not carry a user or password" }
        if parsed.fragment != nil { return "the URL must not have a fragment" }
        return nil
    }

    /// The first address `host` resolves to that is not public (loopback, private, link-local,
    /// unspecified, multicast, shared or reserved), or a reason it does not resolve; nil when
    /// every address is public.
    static func nonPublicAddress(of url: String) -> String? {
        guard let host = URLComponents(string: url)?.host else { return "no host" }
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &results) == 0, let first = results else {
            return "\(name) does not resolve"
        }
        defer { freeaddrinfo(first) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            if let address = current.pointee.ai_addr, let problem = nonPublic(address) { return problem }
            entry = current.pointee.ai_next
        }
        return nil
    }

    /// The address, when it is not public.
    private static func nonPublic(_ address: UnsafeMutablePointer<sockaddr>) -> String? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
            }
            return isPublic(v4: bytes) ? nil : bytes.map(String.init).joined(separator: ".")
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
            return isPublic(v6: bytes) ? nil : "[\(bytes.map { String(format: "%02x", $0) }.joined())]"
        default:
            return "an address of family \(address.pointee.sa_family)"
        }
    }

    /// Whether an IPv4 address is public: not 0/8, 10/8, 100.64/10, 127/8, 169.254/16,
    /// 172.16/12, 192.0.0/24, 192.168/16, 198.18/15, multicast or reserved (224/3).
    static func isPublic(v4 bytes: [UInt8]) -> Bool {
        guard bytes.count == 4 else { return false }
        let (a, b) = (bytes[0], bytes[1])
        switch a {
        case 0, 10, 127: return false
        case 100 where (64...127).contains(b): return false
        case 169 where b == 254: return false
        case 172 where (16...31).contains(b): return false
        case 192 where b == 168 || (b == 0 && bytes[2] == 0): return false
        case 198 where b == 18 || b == 19: return false
        case 224...: return false
        default: return true
        }
    }

    /// Whether an IPv6 address is public: not ::, ::1, fc00::/7, fe80::/10, multicast, and an
    /// IPv4-mapped address (::ffff:a.b.c.d) as its IPv4 address.
    static func isPublic(v6 bytes: [UInt8]) -> Bool {
        guard bytes.count == 16 else { return false }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return isPublic(v4: Array(bytes[12...]))
        }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return false }  // :: and ::1
        if bytes[0] & 0xFE == 0xFC || bytes[0] == 0xFF { return false }
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return false }
        return true
    }
}
