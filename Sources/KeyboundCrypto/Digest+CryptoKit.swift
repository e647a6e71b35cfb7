#if canImport(CryptoKit)
    internal import CryptoKit
    import Foundation

    enum DigestBackend {
        static func sha256(_ data: Data) -> Data {
            Data(SHA256.hash(data: data))
        }
    }
#endif
