import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A numeric IPv4 or IPv6 address. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, what a
/// dual-stack socket reports for an IPv4 client) is taken as the IPv4 address it carries, so one
/// client has one spelling.
struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 bytes (IPv6), network order.
    let bytes: [UInt8]

    /// Parses the numeric text form (`inet_pton`); nil for anything else (names, zone ids, ports).
    init?(_ text: some StringProtocol) {
        let text = String(text)
        var v4 = [UInt8](repeating: 0, count: 4)
        if v4.withUnsafeMutableBytes({ inet_pton(AF_INET, text, $0.baseAddress) }) == 1 {
            bytes = v4
            return
        }
        var v6 = [UInt8](repeating: 0, count: 16)
        guard v6.withUnsafeMutableBytes({ inet_pton(AF_INET6, text, $0.baseAddress) }) == 1 else {
            return nil
        }
        let mappedPrefix: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
        bytes = v6.starts(with: mappedPrefix) ? Array(v6[12...]) : v6
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    var isIPv6: Bool { bytes.count == 16 }

    /// The address with every bit after the first `prefixLength` cleared.
    func masked(to prefixLength: Int) -> IPAddress {
        IPAddress(
            bytes: bytes.enumerated().map { index, byte in
                let kept = min(max(prefixLength - index * 8, 0), 8)
                return kept == 8 ? byte : byte & ~(0xFF >> kept)
            })
    }

    /// The canonical text (`inet_ntop`): `192.0.2.1`, `2001:db8::1`.
    var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = isIPv6 ? AF_INET6 : AF_INET
        let written = bytes.withUnsafeBytes { source in
            inet_ntop(family, source.baseAddress, &buffer, socklen_t(buffer.count))
        }
        guard written != nil else { return "invalid" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Whether `text` is one or more ASCII digits (a port, a prefix length).
private func isDigits(_ text: some StringProtocol) -> Bool {
    !text.isEmpty && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
}

/// An address range in CIDR notation: `10.0.0.0/8`, `2001:db8::/32`; a bare address is a range of
/// one (/32 or /128). `--trusted-proxy` takes these.
public struct CIDR: Hashable, Sendable, CustomStringConvertible {
    let network: IPAddress
    /// The number of leading bits that every address in the range shares.
    public let prefixLength: Int

    /// Parses `ADDRESS/BITS` or a bare `ADDRESS`. Returns nil for anything else, and for a range
    /// with bits set after the prefix (`10.0.0.1/8`): that is usually a typo, and guessing
    /// which range was meant would trust the wrong peers.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let bits = address.bytes.count * 8
        var prefixLength = bits
        if parts.count == 2 {
            guard isDigits(parts[1]), let length = Int(parts[1]), (0...bits).contains(length) else {
                return nil
            }
            prefixLength = length
        }
        guard address.masked(to: prefixLength) == address else { return nil }
        network = address
        self.prefixLength = prefixLength
    }

    /// Whether `address` lies in this range (an IPv4 range never contains an IPv6 address).
    func contains(_ address: IPAddress) -> Bool {
        address.bytes.count == network.bytes.count && address.masked(to: prefixLength) == network
    }

    /// `network/prefix`, canonical.
    public var description: String { "\(network)/\(prefixLength)" }
}

/// Which header names the client behind a trusted proxy (`--forwarded-header`). One, never both:
/// a proxy maintains the header it writes, but passes the other one on as the client sent it, so
/// reading both would let a client choose its address through the one the proxy leaves alone.
public enum ForwardedHeader: String, Sendable, CaseIterable {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx `$proxy_add_x_forwarded_for`, most load
    /// balancers).
    case xForwardedFor = "x-forwarded-for"
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    case forwarded
}

/// The client a request comes from, as throttling and the audit see it.
///
/// Normally the TCP peer. Only when the peer is one of the configured trusted proxies is the
/// client taken from the header the proxy added, the one ``ForwardedHeader`` names:
/// `X-Forwarded-For` or `Forwarded: for=` (RFC 7239). The other header is ignored, present or
/// not. Anyone but our proxies could write any address there.
struct ClientAddress: Hashable, Sendable {
    /// The address as the audit log and the access log record it (canonical text).
    let text: String
    /// The key the throttles count under: an IPv4 address, or an IPv6 address's /64. One IPv6
    /// subscriber is usually given a whole /64 (RFC 6177), so counting each /128 would give one
    /// client 2^64 budgets.
    let throttleKey: String

    init(_ address: IPAddress) {
        text = address.description
        throttleKey = address.isIPv6 ? "\(address.masked(to: 64))/64" : text
    }

    /// A peer that is not a numeric address (the in-process test mode may pass anything).
    private init(unparsed: String) {
        text = unparsed
        throttleKey = unparsed
    }

    /// Resolves the client of a request.
    ///
    /// A proxy appends the address it received the request from, so the header reads
    /// `client, proxy1, proxy2` and a client can prepend whatever it likes. We walk from the right
    /// past our own trusted proxies and take the first address that is not one of them. When the
    /// walk ends on something that is not an address (`unknown`, an obfuscated node) or runs out,
    /// the last trusted proxy it reached stands for the client: all clients behind it then share
    /// one budget, which is safe, never spoofable.
    ///
    /// libmicrohttpd hands us one value per header name (the last line if a client sent
    /// several): the last line is the one our proxy wrote, so it holds the rightmost addresses.
    /// - Parameters:
    ///   - peer: the TCP peer's numeric address.
    ///   - headers: the request's headers, names lowercased.
    ///   - trustedProxies: the `--trusted-proxy` ranges.
    ///   - header: the header our proxies write (`--forwarded-header`); the other is never read.
    static func resolve(
        peer: String, headers: [String: String], trustedProxies: [CIDR], header: ForwardedHeader
    ) -> ClientAddress {
        guard let peerAddress = IPAddress(peer) else { return ClientAddress(unparsed: peer) }
        func trusted(_ address: IPAddress) -> Bool { trustedProxies.contains { $0.contains(address) } }
        guard trusted(peerAddress) else { return ClientAddress(peerAddress) }
        let value = headers[header.rawValue] ?? ""
        let hops =
            switch header {
            case .xForwardedFor: value.split(separator: ",")
            case .forwarded: forwardedForValues(value)
            }
        var reached = peerAddress
        for hop in hops.reversed() {
            guard let address = node(hop) else { break }
            reached = address
            if !trusted(address) { break }
        }
        return ClientAddress(reached)
    }

    /// The `for=` values of a `Forwarded` header, in order (RFC 7239 §4: elements separated by
    /// commas, pairs by semicolons, values optionally quoted).
    private static func forwardedForValues(_ header: String) -> [Substring] {
        header.split(separator: ",").compactMap { element in
            for pair in element.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "for"
                else { continue }
                return parts[1]
            }
            // An element without `for=` still is a hop: an unknown one, which ends the walk.
            return "unknown"
        }
    }

    /// The address of one hop: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`, `[2001:db8::1]`,
    /// `[2001:db8::1]:8080`, optionally quoted; nil for anything else.
    private static func node(_ raw: Substring) -> IPAddress? {
        var text = raw.trimmingCharacters(in: .whitespaces)
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") {
            text = String(text.dropFirst().dropLast())
        }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isDigits(rest.dropFirst())) else { return nil }
            return IPAddress(text[text.index(after: text.startIndex)..<close])
        }
        // One colon: an IPv4 address with a port. More: a bare IPv6 address.
        if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            guard isDigits(text[text.index(after: colon)...]) else { return nil }
            return IPAddress(text[..<colon]).flatMap { $0.isIPv6 ? nil : $0 }
        }
        return IPAddress(text)
    }
}
