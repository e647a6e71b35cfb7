#if canImport(CryptoKit)
    internal import CryptoKit
    import Foundation

    enum HKDFBackend {
        /// `outputByteCount` is already within RFC 5869's limit.
        static func deriveKey(
            inputKeyMaterial: Data, salt: Data, info: Data, outputByteCount: Int
        ) throws -> Data {
            let key = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: inputKeyMaterial), salt: salt, info: info,
                outputByteCount: outputByteCount)
            return key.withUnsafeBytes { Data($0) }
        }
    }
#endif
