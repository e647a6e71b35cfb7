#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum PBKDF2Backend {
        /// The parameters are already within ``PBKDF2SHA256``'s ranges.
        static func deriveKey(password: Data, salt: Data, iterations: Int, outputByteCount: Int) throws
            -> Data
        {
            let context = try KDFContext(try OpenSSLAlgorithms.pbkdf2.get())
            var rounds = UInt64(iterations)
            // Every pointer the parameters hold stays valid until deriveSHA256 returns.
            return try password.withNonNullBytes { password, passwordCount in
                try salt.withNonNullBytes { salt, saltCount in
                    try withUnsafeMutablePointer(to: &rounds) { rounds in
                        try context.deriveSHA256(
                            "PBKDF2-HMAC-SHA256", byteCount: outputByteCount,
                            [
                                octetStringParameter(keybound_param_kdf_password, password, passwordCount),
                                octetStringParameter(keybound_param_kdf_salt, salt, saltCount),
                                OSSL_PARAM_construct_uint64(keybound_param_kdf_iterations, rounds),
                            ])
                    }
                }
            }
        }
    }
#endif
