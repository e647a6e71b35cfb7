#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum PBKDF2Backend {
        /// The parameters are already within ``PBKDF2SHA256``'s ranges.
        static func deriveKey(password: Data, salt: Data, iterations: Int, outputByteCount: Int) throws
            -> Data
        {
            let context = try KDFContext(try OpenSSLAlgorithms.pbkdf2.get())
            var output = Data(count: outputByteCount)
            var rounds = UInt64(iterations)
            // Every pointer the OSSL_PARAM array holds stays valid until EVP_KDF_derive returns.
            let ok = password.withNonNullBytes { password, passwordCount in
                salt.withNonNullBytes { salt, saltCount in
                    withUnsafeMutablePointer(to: &rounds) { rounds in
                        output.withUnsafeMutableBytes { output in
                            let digest = UnsafeMutablePointer(mutating: keybound_digest_sha256)
                            var params = [
                                OSSL_PARAM_construct_utf8_string(keybound_param_kdf_digest, digest, 0),
                                OSSL_PARAM_construct_octet_string(
                                    keybound_param_kdf_password, UnsafeMutableRawPointer(mutating: password),
                                    passwordCount),
                                OSSL_PARAM_construct_octet_string(
                                    keybound_param_kdf_salt, UnsafeMutableRawPointer(mutating: salt),
                                    saltCount),
                                OSSL_PARAM_construct_uint64(keybound_param_kdf_iterations, rounds),
                                OSSL_PARAM_construct_end(),
                            ]
                            return EVP_KDF_derive(
                                context.pointer, output.bindMemory(to: UInt8.self).baseAddress, output.count,
                                &params)
                        }
                    }
                }
            }
            guard ok == 1 else { throw openSSLError("EVP_KDF_derive(PBKDF2-HMAC-SHA256)") }
            return output
        }
    }
#endif
