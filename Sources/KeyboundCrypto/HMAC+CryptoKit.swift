#if canImport(CryptoKit)
    internal import CryptoKit
    import Foundation

    enum HMACBackend {
        static func sha256(_ message: Data, key: Data) throws -> Data {
            Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        }
    }
#endif
