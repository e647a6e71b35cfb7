#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum HKDFBackend {
        /// `outputByteCount` is already within RFC 5869's limit.
        static func deriveKey(
            inputKeyMaterial: Data, salt: Data, info: Data, outputByteCount: Int
        ) throws -> Data {
            let context = try KDFContext(try OpenSSLAlgorithms.hkdf.get())
            // Every pointer the parameters hold stays valid until deriveSHA256 returns.
            return try inputKeyMaterial.withNonNullBytes { ikm, ikmCount in
                try salt.withNonNullBytes { salt, saltCount in
                    try info.withNonNullBytes { info, infoCount in
                        try context.deriveSHA256(
                            "HKDF-SHA256", byteCount: outputByteCount,
                            [
                                octetStringParameter(keybound_param_kdf_key, ikm, ikmCount),
                                octetStringParameter(keybound_param_kdf_salt, salt, saltCount),
                                octetStringParameter(keybound_param_kdf_info, info, infoCount),
                            ])
                    }
                }
            }
        }
    }
#endif
