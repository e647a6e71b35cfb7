#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum RandomBackend {
        static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                // RAND_bytes takes an Int32 count.
                let chunk = min(buffer.count - offset, Int(Int32.max))
                let ok = RAND_bytes(
                    base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(chunk))
                precondition(ok == 1, "RAND_bytes failed: \(openSSLError("RAND_bytes"))")
                offset += chunk
            }
        }
    }
#endif
