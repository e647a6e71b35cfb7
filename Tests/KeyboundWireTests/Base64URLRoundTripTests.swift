import Foundation
import KeyboundWire
import Testing

@Suite struct Base64URLRoundTripTests {
    /// The codec agrees with Foundation's base64 (alphabet swapped, padding dropped) at every
    /// length, and decodes what it encodes.
    @Test func agreesWithFoundationAtEveryLength() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...96 {
            let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let expected = data.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(data) == expected, "length \(length)")
            #expect(Base64URL.decode(expected) == data, "length \(length)")
        }
    }

    @Test func refusesNonCanonicalTrailingBitsAndForeignBytes() {
        #expect(Base64URL.decode("AB") == nil)  // 'B' leaves a non-zero bit after the one byte
        #expect(Base64URL.decode("AA") == Data([0]))
        #expect(Base64URL.decode("AAA=") == nil)
        #expect(Base64URL.decode("AA\u{e9}") == nil)
        #expect(Hex.encode(Data([0x00, 0x0f, 0xa5, 0xff])) == "000fa5ff")
    }
}
