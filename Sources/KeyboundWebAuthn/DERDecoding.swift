internal import COpenSSL
import Foundation
import KeyboundCrypto

/// Decodes `der` with an OpenSSL `d2i_*` function, and only when the one object fills every byte:
/// a certificate or key followed by anything else is not one. Trailing bytes free what was
/// decoded.
///
/// - Parameters:
///   - decode: Calls the `d2i_*` function with the cursor and the byte count.
///   - free: The object's `*_free` function.
/// - Returns: The object, or nil when `der` is not exactly one; the caller reports which.
func decodeWholeDER(
    _ der: Data, decode: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> OpaquePointer?,
    free: (OpaquePointer) -> Void
) -> OpaquePointer? {
    der.withNonNullBytes { bytes, count in
        var cursor: UnsafePointer<UInt8>? = bytes
        guard let object = decode(&cursor, count) else { return nil }
        guard cursor == bytes + count else {
            free(object)
            return nil
        }
        return object
    }
}
