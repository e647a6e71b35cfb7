#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum HMACBackend {
        static func sha256(_ message: Data, key: Data) throws -> Data {
            let context = try MACContext(try OpenSSLAlgorithms.hmac.get())
            var code = Data(count: HMACSHA256.byteCount)
            var length = 0
            // The OSSL_PARAM array and the key stay valid until EVP_MAC_init returns.
            let ok = key.withNonNullBytes { key, keyCount in
                message.withNonNullBytes { message, messageCount in
                    code.withUnsafeMutableBytes { output in
                        let digest = UnsafeMutablePointer(mutating: keybound_digest_sha256)
                        var params = [
                            OSSL_PARAM_construct_utf8_string(keybound_param_mac_digest, digest, 0),
                            OSSL_PARAM_construct_end(),
                        ]
                        guard EVP_MAC_init(context.pointer, key, keyCount, &params) == 1,
                            EVP_MAC_update(context.pointer, message, messageCount) == 1
                        else { return false }
                        return EVP_MAC_final(
                            context.pointer, output.bindMemory(to: UInt8.self).baseAddress, &length,
                            output.count) == 1
                    }
                }
            }
            guard ok, length == HMACSHA256.byteCount else { throw openSSLError("EVP_MAC(HMAC-SHA256)") }
            return code
        }
    }

    extension OpenSSLAlgorithms {
        /// HMAC, fetched once like the algorithms in OpenSSLSupport.swift.
        static let hmac = Result { try Fetched<MACKind>(name: "HMAC") }
    }

    /// `EVP_MAC`.
    enum MACKind: FetchableAlgorithm {
        static let fetchFunction = "EVP_MAC_fetch"
        static func fetch(_ name: String) -> OpaquePointer? { EVP_MAC_fetch(nil, name, nil) }
        static func free(_ pointer: OpaquePointer) { EVP_MAC_free(pointer) }
    }

    /// Owns one `EVP_MAC_CTX`, created per computation so no context is shared between threads.
    private final class MACContext {
        let pointer: OpaquePointer

        init(_ mac: Fetched<MACKind>) throws {
            guard let pointer = EVP_MAC_CTX_new(mac.pointer) else { throw openSSLError("EVP_MAC_CTX_new") }
            self.pointer = pointer
        }

        deinit { EVP_MAC_CTX_free(pointer) }
    }
#endif
