#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum DigestBackend {
        static func sha256(_ data: Data) -> Data {
            do {
                return try sha256Throwing(data)
            } catch {
                // Only a libcrypto without SHA-256 (or out of memory) gets here; see Digest.sha256.
                preconditionFailure("SHA-256 unavailable: \(error)")
            }
        }

        /// SHA-256 with the algorithm fetched once; used by signing and verification too.
        static func sha256Throwing(_ data: Data) throws -> Data {
            let md = try OpenSSLAlgorithms.sha256.get()
            var digest = Data(count: Digest.sha256ByteCount)
            var length: UInt32 = 0
            let ok = data.withNonNullBytes { input, count in
                digest.withUnsafeMutableBytes { output in
                    EVP_Digest(
                        input, count, output.bindMemory(to: UInt8.self).baseAddress, &length, md.pointer, nil)
                }
            }
            guard ok == 1, length == Digest.sha256ByteCount else {
                throw openSSLError("EVP_Digest(SHA-256)")
            }
            return digest
        }
    }
#endif
