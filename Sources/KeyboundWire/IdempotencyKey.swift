import Foundation

/// The `Idempotency-Key` request header (IETF httpapi, draft-ietf-httpapi-idempotency-key-header):
/// a client sends one with a POST it may have to send again, and the same key with the same
/// request again when it does not know whether the first one took effect (a lost connection, a
/// 503); the server then answers with what it answered the first time, without doing the work
/// again. The SDK writes keys, the server reads them; what the server keeps is the server's.
///
/// The field is a Structured Field Item (RFC 8941) whose value is a String: `"…"`, printable
/// ASCII, `\"` and `\\` escaped; here 16 to 255 characters, without parameters. A random UUID
/// (``fresh()``) is what the draft recommends.
package enum IdempotencyKey {
    /// The request header.
    package static let header = "Idempotency-Key"
    /// How long the key's characters may be, escapes counted once.
    package static let lengths = 16...255

    /// A new key: a random UUID as a Structured Field String, the field's whole value.
    package static func fresh() -> String { "\"" + UUID().uuidString.lowercased() + "\"" }

    /// The key a field carries: its String, without the quotes and escapes; nil when the field
    /// is not one String of ``lengths`` characters (another Structured Field type, parameters,
    /// a character outside printable ASCII, a bad escape). Spaces around the value are allowed
    /// (RFC 8941 §4.2 discards them).
    package static func parse(_ field: String) -> String? {
        var bytes = Substring(field).utf8.drop { $0 == UInt8(ascii: " ") }
        while bytes.last == UInt8(ascii: " ") { bytes = bytes.dropLast() }
        guard bytes.first == UInt8(ascii: "\""), bytes.count >= 2 else { return nil }
        var key: [UInt8] = []
        var index = bytes.index(after: bytes.startIndex)
        while index < bytes.endIndex {
            let byte = bytes[index]
            index = bytes.index(after: index)
            switch byte {
            case UInt8(ascii: "\""):
                // The end of the String: nothing may follow it (no parameters, no second item).
                guard index == bytes.endIndex, lengths.contains(key.count) else { return nil }
                return String(decoding: key, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard index < bytes.endIndex,
                    bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "\\")
                else { return nil }
                key.append(bytes[index])
                index = bytes.index(after: index)
            case 0x20...0x7E:
                key.append(byte)
            default:
                return nil
            }
        }
        return nil  // no closing quote
    }
}
