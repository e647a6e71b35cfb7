#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum HKDFBackend {
        /// `outputByteCount` is already within RFC 5869's limit.
        static func deriveKey(
            inputKeyMaterial: Data, salt: Data, info: Data, outputByteCount: Int
        ) throws -> Data {
            let context = try KDFContext(try OpenSSLAlgorithms.hkdf.get())
            var output = Data(count: outputByteCount)
            // Every pointer the OSSL_PARAM array holds stays valid until EVP_KDF_derive returns.
            let ok = inputKeyMaterial.withNonNullBytes { ikm, ikmCount in
                salt.withNonNullBytes { salt, saltCount in
                    info.withNonNullBytes { info, infoCount in
                        output.withUnsafeMutableBytes { output in
                            let digest = UnsafeMutablePointer(mutating: keybound_digest_sha256)
                            var params = [
                                OSSL_PARAM_construct_utf8_string(keybound_param_kdf_digest, digest, 0),
                                OSSL_PARAM_construct_octet_string(
                                    keybound_param_kdf_key, UnsafeMutableRawPointer(mutating: ikm), ikmCount),
                                OSSL_PARAM_construct_octet_string(
                                    keybound_param_kdf_salt, UnsafeMutableRawPointer(mutating: salt),
                                    saltCount),
                                OSSL_PARAM_construct_octet_string(
                                    keybound_param_kdf_info, UnsafeMutableRawPointer(mutating: info),
                                    infoCount),
                                OSSL_PARAM_construct_end(),
                            ]
                            return EVP_KDF_derive(
                                context.pointer, output.bindMemory(to: UInt8.self).baseAddress, output.count,
                                &params)
                        }
                    }
                }
            }
            guard ok == 1 else { throw openSSLError("EVP_KDF_derive(HKDF-SHA256)") }
            return output
        }
    }
#endif
