import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import Testing

@Suite("CBOR")
struct CBORTests {
    static func bytes(_ hex: String) throws -> Data {
        try #require(Data(hex: hex.replacingOccurrences(of: " ", with: "")))
    }

    @Test("decodes every item kind WebAuthn uses, and encodes it back to the same bytes")
    func roundTrip() throws {
        let cases: [(String, CBOR)] = [
            ("00", .unsigned(0)),
            ("17", .unsigned(23)),
            ("1818", .unsigned(24)),
            ("190100", .unsigned(256)),
            ("1a00010000", .unsigned(65536)),
            ("1b0000000100000000", .unsigned(1 << 32)),
            ("1bffffffffffffffff", .unsigned(.max)),
            ("20", .integer(-1)),
            ("390100", .integer(-257)),
            ("3bffffffffffffffff", .negative(.max)),
            ("40", .bytes(Data())),
            ("4401020304", .bytes(Data([1, 2, 3, 4]))),
            ("6449455446", .text("IETF")),
            ("62c3bc", .text("ü")),
            ("80", .array([])),
            ("820102", .array([.unsigned(1), .unsigned(2)])),
            ("f4", .bool(false)),
            ("f5", .bool(true)),
            ("f6", .null),
            ("a201020320", .map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .integer(-1))])),
        ]
        for (hex, value) in cases {
            let data = try Self.bytes(hex)
            #expect(try CBOR(decoding: data) == value, "\(hex)")
            #expect(value.encoded() == data, "\(hex)")
        }
        #expect(CBOR.unsigned(.max).integerValue == nil)
        #expect(CBOR.negative(.max).integerValue == nil)
        #expect(CBOR.integer(.min).integerValue == .min)
    }

    @Test("the encoder sorts map keys as CTAP2 requires: major type, then length, then bytes")
    func canonicalKeyOrder() throws {
        let map = CBOR.map([
            (.text("aa"), .null), (.integer(-1), .null), (.text("b"), .null), (.unsigned(24), .null),
            (.unsigned(3), .null), (.integer(-3), .null), (.unsigned(1), .null),
        ])
        let encoded = map.encoded()
        // 1, 3, 24, -1, -3, "b", "aa"
        #expect(encoded == (try Self.bytes("a7 01f6 03f6 1818f6 20f6 22f6 6162f6 626161f6")))
        let decoded = try CBOR(decoding: encoded)
        #expect(
            decoded.mapValue?.entries.map(\.key) == [1, 3, 24, -1, -3].map(CBOR.integer) + [
                .text("b"), .text("aa"),
            ])
        #expect(decoded.mapValue?[integer: -3] == .null)
    }

    @Test("map keys in any order decode to the same meaning; only duplicates are refused")
    func anyKeyOrder() throws {
        // 3, 1, "b", -1: not CTAP2's order, as some authenticators write it.
        let decoded = try CBOR(decoding: Self.bytes("a4 0300 0101 6162f6 20f5"))
        let map = try #require(decoded.mapValue)
        #expect(map.entries.map(\.key) == [.unsigned(3), .unsigned(1), .text("b"), .integer(-1)])
        #expect(map[integer: 1] == .unsigned(1) && map[integer: -1] == .bool(true) && map[text: "b"] == .null)
        // Encoding writes the canonical order again.
        #expect(decoded.encoded() == (try Self.bytes("a4 0101 0300 20f5 6162f6")))
    }

    /// Fuzz/Crashes/authenticator-data/extension-map-keys-out-of-ctap2-order, in short: the
    /// extensions map of authenticator data, like any map, may arrive out of CTAP2 order.
    @Test(
        "authenticator data with extensions out of CTAP2 order keeps its bytes and rebuilds to the same meaning"
    )
    func unorderedExtensions() throws {
        // rpIdHash, flags ED|UP, signCount 7, then the extensions {"b": 1, "a": 2}: "b" before "a".
        let bytes = Data(repeating: 0xAB, count: 32) + (try Self.bytes("81 00000007 a2 616201 616102"))
        let parsed = try AuthenticatorData(bytes, allowingUnflaggedExtensions: false)
        #expect(parsed.rawValue == bytes)
        let extensions = try #require(parsed.extensions)
        #expect(extensions.entries.map(\.key) == [.text("b"), .text("a")])
        let rebuilt = try AuthenticatorData(
            rpIdHash: parsed.rpIdHash, flags: parsed.flags, signCount: parsed.signCount,
            attestedCredential: nil,
            extensions: extensions)
        // Written back in CTAP2 order: as many bytes, the same members.
        #expect(
            rebuilt.rawValue == Data(repeating: 0xAB, count: 32)
                + (try Self.bytes("81 00000007 a2 616102 616201")))
        #expect(
            rebuilt.extensions?[text: "a"] == .unsigned(2) && rebuilt.extensions?[text: "b"] == .unsigned(1))
    }

    @Test("a COSE key whose labels are out of canonical order parses to the same key")
    func unorderedCOSEKey() throws {
        let key = try P256SigningKey().publicKey
        let point = [UInt8](key.x963Representation)
        let x = CBOR.bytes(Data(point[1..<33]))
        let y = CBOR.bytes(Data(point[33..<65]))
        // alg (3), y (-3), kty (1), x (-2), crv (-1): every label present once, in no order.
        let unordered =
            try Self.bytes("a5 0326 22") + y.encoded() + Self.bytes("0102 21") + x.encoded()
            + Self.bytes("2001")
        #expect(try CBOR(decoding: unordered).encoded() != unordered)
        let parsed = try CredentialPublicKey(coseKey: unordered)
        #expect(parsed == CredentialPublicKey(key))
    }

    @Test(
        "refuses what WebAuthn's CBOR never holds",
        arguments: [
            ("5f4101ff", "indefinite byte string"),
            ("9fff", "indefinite array"),
            ("bfff", "indefinite map"),
            ("1805", "24 in one byte is 5: not the shortest form"),
            ("190010", "16 in two bytes"),
            ("1a0000ffff", "65535 in four bytes"),
            ("1b00000000ffffffff", "a 32-bit value in eight bytes"),
            ("5801ff", "a one-byte length in the long form"),
            ("1c", "reserved additional information 28"),
            ("c0 6161", "a tag"),
            ("f90000", "a half float"),
            ("fb3ff0000000000000", "a double"),
            ("f7", "undefined"),
            ("f820", "a one-byte simple value"),
            ("a2 0101 0102", "duplicate keys"),
            ("a3 0101 0300 0102", "duplicate keys, not next to each other"),
            ("a2 6161f6 6161f6", "duplicate text keys"),
            ("a1 4101 00", "a byte-string key"),
            ("a1 80 00", "an array key"),
            ("62 c328", "invalid UTF-8"),
            ("63 eda080", "a UTF-8 surrogate"),
            ("4201", "a truncated byte string"),
            ("8201", "a truncated array"),
            ("19 01", "a truncated argument"),
            ("", "nothing"),
            ("0101", "bytes after the item"),
            ("5b ffffffffffffffff", "a byte string longer than the input"),
            ("9b ffffffffffffffff", "an array longer than the input"),
            ("bb 00000000ffffffff 00", "a map longer than the input"),
            ("7a ffffffff", "a text longer than the input"),
        ])
    func refuses(hex: String, reason: String) throws {
        let data = try Self.bytes(hex)
        expectRefusal(.malformedCBOR, reason) { try CBOR(decoding: data) }
    }

    @Test("nesting is limited to maximumDepth, however deep the input claims to go")
    func depth() throws {
        let deepest = Data(repeating: 0x81, count: CBOR.maximumDepth) + Data([0x00])
        _ = try CBOR(decoding: deepest)
        let tooDeep = Data(repeating: 0x81, count: CBOR.maximumDepth + 1) + Data([0x00])
        expectRefusal(.malformedCBOR) { try CBOR(decoding: tooDeep) }
        // A hundred thousand levels stop at the limit: no stack overflow.
        expectRefusal(.malformedCBOR) { try CBOR(decoding: Data(repeating: 0xA1, count: 100_000)) }
    }
}
