import Foundation
import KeyboundWire
import Testing

/// The JSON reader and writer work on UTF-8 bytes; these pin what that must not change.
@Suite("JSON on bytes")
struct JSONBytesTests {
    @Test func invalidUTF8InAStringIsRefusedAlsoNextToAnEscape() throws {
        for bytes: [UInt8] in [
            [0x22, 0xC3, 0x22],  // a lead byte without its continuation
            [0x22, 0xC3, 0x5C, 0x6E, 0x22],  // … followed by an escape (\n)
            [0x22, 0x5C, 0x6E, 0xA9, 0x22],  // a continuation byte after an escape
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // an encoded surrogate
            [0x22, 0xFF, 0x22],
        ] {
            #expect(throws: WireError.self, "\(bytes)") { try JSON.parse(Data(bytes)) }
        }
        #expect(try JSON.parse(Data([0x22, 0xC3, 0xA9, 0x5C, 0x6E, 0x22])) == .string("é\n"))
    }

    @Test func writerEscapesExactlyQuoteBackslashAndControlCharacters() {
        let text = "\u{1F}\u{7F}\u{0}\"\\/é😀"
        #expect(JSON.quote(text) == #""\u001f\#u{7F}\u0000\"\\/é😀""#)
        #expect(String(decoding: JSON.serialize(.string(text)), as: UTF8.self) == JSON.quote(text))
        #expect((try? JSON.parse(JSON.serialize(.string(text)))) == .string(text))
    }
}
