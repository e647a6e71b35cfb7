import Testing

@testable import KeyboundServer

@Suite("Client addresses and trusted proxies")
struct ClientAddressTests {
    private func range(_ text: String) throws -> CIDR {
        try #require(CIDR(text), "\(text)")
    }

    private func resolve(
        _ peer: String, _ headers: [String: String] = [:], trusting: [String] = [],
        header: ForwardedHeader = .xForwardedFor
    ) throws -> ClientAddress {
        ClientAddress.resolve(
            peer: peer, headers: headers, trustedProxies: try trusting.map(range), header: header)
    }

    @Test func addressesParseAndPrintCanonically() throws {
        #expect(IPAddress("192.0.2.1")?.description == "192.0.2.1")
        #expect(IPAddress("2001:DB8:0:0::1")?.description == "2001:db8::1")
        // What a dual-stack socket reports for an IPv4 client is that IPv4 client.
        #expect(IPAddress("::ffff:192.0.2.1") == IPAddress("192.0.2.1"))
        for text in ["", "192.0.2", "192.0.2.256", "host.example", "fe80::1%eth0", "192.0.2.1:80", "[::1]"] {
            #expect(IPAddress(text) == nil, "\(text)")
        }
    }

    @Test func rangesParseStrictly() throws {
        #expect(try range("10.0.0.0/8").description == "10.0.0.0/8")
        #expect(try range("2001:db8::/32").description == "2001:db8::/32")
        #expect(try range("192.0.2.7").description == "192.0.2.7/32")
        #expect(try range("::1").description == "::1/128")
        #expect(try range("0.0.0.0/0").prefixLength == 0)
        // Bits after the prefix are a typo, not a range: refused rather than guessed.
        for text in [
            "10.0.0.1/8", "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "/8", "10.0.0.0/+8", "10.0.0.0/8/8",
            "10.0.0.0/ 8", "example.org/24", "",
        ] {
            #expect(CIDR(text) == nil, "\(text)")
        }
    }

    @Test func rangesMatchTheirOwnFamilyOnly() throws {
        let tenSlash8 = try range("10.0.0.0/8")
        #expect(tenSlash8.contains(try #require(IPAddress("10.255.1.2"))))
        #expect(!tenSlash8.contains(try #require(IPAddress("11.0.0.1"))))
        #expect(tenSlash8.contains(try #require(IPAddress("::ffff:10.1.2.3"))))
        #expect(!tenSlash8.contains(try #require(IPAddress("::a01:203"))))
        let v6 = try range("2001:db8:aa00::/40")
        #expect(v6.contains(try #require(IPAddress("2001:db8:aaff:1::1"))))
        #expect(!v6.contains(try #require(IPAddress("2001:db8:ab00::1"))))
        #expect(try range("0.0.0.0/0").contains(try #require(IPAddress("203.0.113.9"))))
        #expect(!(try range("0.0.0.0/0")).contains(try #require(IPAddress("2001:db8::1"))))
        #expect(try range("192.0.2.7").contains(try #require(IPAddress("192.0.2.7"))))
        #expect(!(try range("192.0.2.7")).contains(try #require(IPAddress("192.0.2.8"))))
    }

    @Test func ipv6ClientsAreCountedPerSlash64() throws {
        let one = try resolve("2001:db8:1:2:aaaa::1")
        let other = try resolve("2001:db8:1:2:ffff:ffff:ffff:ffff")
        let elsewhere = try resolve("2001:db8:1:3::1")
        #expect(one.throttleKey == "2001:db8:1:2::/64")
        #expect(other.throttleKey == one.throttleKey)
        #expect(elsewhere.throttleKey != one.throttleKey)
        // The audit keeps the whole address.
        #expect(one.text == "2001:db8:1:2:aaaa::1")
        #expect(try resolve("192.0.2.1").throttleKey == "192.0.2.1")
        #expect(try resolve("::ffff:192.0.2.1").throttleKey == "192.0.2.1")
    }

    @Test func forwardedHeadersFromAnUntrustedPeerAreIgnored() throws {
        let headers = ["x-forwarded-for": "198.51.100.1", "forwarded": "for=198.51.100.2"]
        #expect(try resolve("203.0.113.9", headers).text == "203.0.113.9")
        #expect(try resolve("203.0.113.9", headers, trusting: ["10.0.0.0/8"]).text == "203.0.113.9")
    }

    @Test func theRightmostAddressThatIsNotATrustedProxyIsTheClient() throws {
        let proxies = ["10.0.0.0/8", "2001:db8:ffff::/48"]
        // The client wrote "1.2.3.4" itself; our two proxies appended what they saw.
        let chain = ["x-forwarded-for": "1.2.3.4, 198.51.100.7, 10.0.0.2"]
        #expect(try resolve("10.0.0.1", chain, trusting: proxies).text == "198.51.100.7")
        #expect(
            try resolve("10.0.0.1", ["x-forwarded-for": "198.51.100.7:5123"], trusting: proxies).text
                == "198.51.100.7")
        #expect(
            try resolve(
                "10.0.0.1", ["x-forwarded-for": "[2001:db8::5]:443, 2001:db8:ffff::1"], trusting: proxies
            )
            .text == "2001:db8::5")
        // Only proxies in the header: the farthest one stands for the client.
        #expect(
            try resolve("10.0.0.1", ["x-forwarded-for": "10.0.0.9, 10.0.0.8"], trusting: proxies).text
                == "10.0.0.9")
        // Something that is not an address ends the walk at the last proxy reached.
        #expect(
            try resolve("10.0.0.1", ["x-forwarded-for": "198.51.100.7, unknown, 10.0.0.8"], trusting: proxies)
                .text
                == "10.0.0.8")
        // No header from a proxy: the proxy itself.
        #expect(try resolve("10.0.0.1", [:], trusting: proxies).text == "10.0.0.1")
    }

    @Test func forwardedIsReadWhenChosen() throws {
        let proxies = ["10.0.0.0/8"]
        let forwarded = [
            "forwarded":
                #"for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711", for=10.0.0.3"#
        ]
        func resolve(_ headers: [String: String]) throws -> String {
            try self.resolve("10.0.0.1", headers, trusting: proxies, header: .forwarded).text
        }
        #expect(try resolve(forwarded) == "2001:db8:cafe::17")
        #expect(try resolve(["forwarded": "for=unknown"]) == "10.0.0.1")
        #expect(try resolve(["forwarded": "proto=https"]) == "10.0.0.1")
    }

    /// A proxy maintains the header it writes and passes the other on as the client sent it: the
    /// server reads the chosen one only, also when only the other one is there.
    @Test func onlyTheChosenHeaderIsEverRead() throws {
        let proxies = ["10.0.0.0/8"]
        let both = ["x-forwarded-for": "198.51.100.7", "forwarded": "for=192.0.2.60"]
        #expect(try resolve("10.0.0.1", both, trusting: proxies).text == "198.51.100.7")
        #expect(try resolve("10.0.0.1", both, trusting: proxies, header: .forwarded).text == "192.0.2.60")
        // The chosen header is absent: the proxy stands for the client, whatever the other says.
        #expect(
            try resolve("10.0.0.1", ["forwarded": "for=192.0.2.60"], trusting: proxies).text == "10.0.0.1")
        #expect(
            try resolve(
                "10.0.0.1", ["x-forwarded-for": "198.51.100.7"], trusting: proxies, header: .forwarded
            ).text == "10.0.0.1")
    }

    @Test func aPeerThatIsNotAnAddressIsKeptAsIs() throws {
        let unknown = try resolve("unknown", ["x-forwarded-for": "198.51.100.7"], trusting: ["0.0.0.0/0"])
        #expect(unknown.text == "unknown")
        #expect(unknown.throttleKey == "unknown")
    }
}
