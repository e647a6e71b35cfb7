#if canImport(CryptoKit)
    import Foundation
    import Security

    enum RandomBackend {
        static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
            guard let base = buffer.baseAddress else { return }
            let status = SecRandomCopyBytes(kSecRandomDefault, buffer.count, base)
            precondition(status == errSecSuccess, "SecRandomCopyBytes failed: \(status)")
        }
    }
#endif
