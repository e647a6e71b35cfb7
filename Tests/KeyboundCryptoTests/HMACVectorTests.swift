import Foundation
import KeyboundCrypto
import Testing

@Suite("HMAC-SHA-256 vectors")
struct HMACVectorTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let key: Data
        let data: Data
        /// The tag RFC 4231 gives; test case 5 gives only its first 128 bits.
        let tag: String
        var description: String { name }
    }

    /// RFC 4231 section 4, the SHA-256 results of test cases 1 to 7.
    static let rfc4231Cases: [Case] = [
        Case(
            name: "4.2 test case 1", key: Data(repeating: 0x0b, count: 20), data: Data("Hi There".utf8),
            tag: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        Case(
            name: "4.3 test case 2 (key shorter than the output)", key: Data("Jefe".utf8),
            data: Data("what do ya want for nothing?".utf8),
            tag: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        Case(
            name: "4.4 test case 3", key: Data(repeating: 0xaa, count: 20),
            data: Data(repeating: 0xdd, count: 50),
            tag: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        Case(
            name: "4.5 test case 4", key: Data(1...25), data: Data(repeating: 0xcd, count: 50),
            tag: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        Case(
            name: "4.6 test case 5 (truncated to 128 bits)", key: Data(repeating: 0x0c, count: 20),
            data: Data("Test With Truncation".utf8), tag: "a3b6167473100ee06e0c796c2955552b"),
        Case(
            name: "4.7 test case 6 (key larger than a block)", key: Data(repeating: 0xaa, count: 131),
            data: Data("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            tag: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        Case(
            name: "4.8 test case 7 (key and data larger than a block)",
            key: Data(repeating: 0xaa, count: 131),
            data: Data(
                ("This is a test using a larger than block-size key and a larger than block-size data. "
                    + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
            tag: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test("RFC 4231", arguments: rfc4231Cases)
    func rfc4231(_ test: Case) throws {
        let expected = try hex(test.tag)
        let code = try HMACSHA256.authenticationCode(for: test.data, key: test.key)
        #expect(code.count == HMACSHA256.byteCount, "\(test.name)")
        #expect(code.prefix(expected.count) == expected, "\(test.name): wrong tag")
        if expected.count == HMACSHA256.byteCount {
            #expect(try HMACSHA256.isValid(expected, for: test.data, key: test.key), "\(test.name)")
        }
    }

    @Test func anyChangedByteOrATruncatedTagIsNotValid() throws {
        let key = Data(repeating: 0x0b, count: 20)
        let message = Data("Hi There".utf8)
        let code = try HMACSHA256.authenticationCode(for: message, key: key)
        #expect(try HMACSHA256.isValid(code, for: message, key: key))
        for index in code.indices {
            var changed = code
            changed[index] ^= 0x01
            #expect(try !HMACSHA256.isValid(changed, for: message, key: key), "byte \(index)")
        }
        #expect(try !HMACSHA256.isValid(code.prefix(16), for: message, key: key))
        #expect(try !HMACSHA256.isValid(code, for: message + Data([0]), key: key))
        // (Not `key + [0]`: HMAC pads short keys with zero bytes, so that is the same key.)
        #expect(try !HMACSHA256.isValid(code, for: message, key: key + Data([1])))
    }

    @Test func emptyKeyAndMessage() throws {
        // The value other implementations give (Python's hmac module, OpenSSL's HMAC()).
        #expect(
            try HMACSHA256.authenticationCode(for: Data(), key: Data())
                == hex("b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"))
    }
}
