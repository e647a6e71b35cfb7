import Foundation
import KeyboundWire

extension Harness {
    /// Strict base64url: whatever decodes encodes back to the same text (one encoding per value).
    static let base64url = Harness(
        name: "base64url", covers: "KeyboundWire Base64URL.decode (strict, canonical) and encode"
    ) { data in
        let text = String(decoding: data, as: UTF8.self)
        guard let decoded = Base64URL.decode(text) else { return }
        expect(Base64URL.encode(decoded) == text, "base64url \(text) does not encode back to itself")
    }
}
