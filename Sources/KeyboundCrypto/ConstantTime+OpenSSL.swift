#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum ConstantTimeBackend {
        /// `a` and `b` are non-empty and of equal length.
        static func equalBytes(_ a: Data, _ b: Data) -> Bool {
            a.withUnsafeBytes { a in
                b.withUnsafeBytes { b in
                    CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
                }
            }
        }
    }
#endif
