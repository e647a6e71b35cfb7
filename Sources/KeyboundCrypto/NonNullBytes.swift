import Foundation

extension Data {
    /// Calls `body` with a pointer that is never null, even for empty data: OpenSSL refuses a null
    /// pointer in places where a zero length would be fine (an empty HKDF key, for one).
    ///
    /// Pure Swift, so it exists on every platform: KeyboundWebAuthn uses OpenSSL on Apple
    /// platforms too, where this module's own OpenSSL backend is not compiled.
    ///
    /// - Parameter body: Receives the first byte's address and the byte count.
    /// - Returns: What `body` returns.
    package func withNonNullBytes<R>(_ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
        try withUnsafeBytes { raw in
            if let base = raw.baseAddress {
                return try body(base.assumingMemoryBound(to: UInt8.self), raw.count)
            }
            var empty: UInt8 = 0
            return try withUnsafePointer(to: &empty) { try body($0, 0) }
        }
    }
}
