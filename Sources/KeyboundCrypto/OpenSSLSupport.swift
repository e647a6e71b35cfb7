#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    /// Drains this thread's libcrypto error queue into a ``CryptoError/backend(_:)`` naming the
    /// function that failed.
    func openSSLError(_ function: String) -> CryptoError {
        .backend(openSSLErrorText(function))
    }

    /// Drains this thread's libcrypto error queue into one line naming the function that failed.
    func openSSLErrorText(_ function: String) -> String {
        var reasons: [String] = []
        var code = ERR_get_error()
        while code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            reasons.append(String(decoding: bytes, as: UTF8.self))
            code = ERR_get_error()
        }
        if reasons.isEmpty {
            return "\(function) failed"
        }
        return "\(function) failed: \(reasons.joined(separator: "; "))"
    }

    /// Algorithms fetched from the default provider once per process.
    ///
    /// Fetching by name costs a lookup under a lock on every use; a fetched `EVP_MD` / `EVP_CIPHER`
    /// / `EVP_KDF` is immutable and reference-counted, and OpenSSL documents it as safe to use from
    /// many threads at once. A failed fetch (libcrypto without the default provider) is kept and
    /// reported by every operation that needs it.
    enum OpenSSLAlgorithms {
        static let sha256 = Result { try Fetched<DigestKind>(name: "SHA256") }
        static let aes256GCM = Result { try Fetched<CipherKind>(name: "AES-256-GCM") }
        static let hkdf = Result { try Fetched<KDFKind>(name: "HKDF") }
        static let pbkdf2 = Result { try Fetched<KDFKind>(name: "PBKDF2") }
    }

    /// Owns one algorithm fetched from the default provider: an `EVP_MD`, `EVP_CIPHER`, `EVP_KDF`
    /// or `EVP_MAC`, as `Kind` says (so a context cannot be handed an algorithm of another kind).
    final class Fetched<Kind: FetchableAlgorithm>: @unchecked Sendable {
        // Safe to share: a fetched algorithm is never modified after its fetch returns it.
        let pointer: OpaquePointer

        init(name: String) throws {
            guard let pointer = Kind.fetch(name) else { throw openSSLError("\(Kind.fetchFunction)(\(name))") }
            self.pointer = pointer
        }

        deinit { Kind.free(pointer) }
    }

    /// How libcrypto fetches and frees one kind of algorithm.
    protocol FetchableAlgorithm {
        /// The fetch function's name, for errors.
        static var fetchFunction: String { get }
        /// Fetches `name` from the default provider.
        static func fetch(_ name: String) -> OpaquePointer?
        /// Frees what ``fetch(_:)`` returned.
        static func free(_ pointer: OpaquePointer)
    }

    /// `EVP_MD`.
    enum DigestKind: FetchableAlgorithm {
        static let fetchFunction = "EVP_MD_fetch"
        static func fetch(_ name: String) -> OpaquePointer? { EVP_MD_fetch(nil, name, nil) }
        static func free(_ pointer: OpaquePointer) { EVP_MD_free(pointer) }
    }

    /// `EVP_CIPHER`.
    enum CipherKind: FetchableAlgorithm {
        static let fetchFunction = "EVP_CIPHER_fetch"
        static func fetch(_ name: String) -> OpaquePointer? { EVP_CIPHER_fetch(nil, name, nil) }
        static func free(_ pointer: OpaquePointer) { EVP_CIPHER_free(pointer) }
    }

    /// `EVP_KDF`.
    enum KDFKind: FetchableAlgorithm {
        static let fetchFunction = "EVP_KDF_fetch"
        static func fetch(_ name: String) -> OpaquePointer? { EVP_KDF_fetch(nil, name, nil) }
        static func free(_ pointer: OpaquePointer) { EVP_KDF_free(pointer) }
    }

    /// Owns one `EVP_KDF_CTX`, created per derivation so no context is shared between threads.
    final class KDFContext {
        let pointer: OpaquePointer

        init(_ kdf: Fetched<KDFKind>) throws {
            guard let pointer = EVP_KDF_CTX_new(kdf.pointer) else { throw openSSLError("EVP_KDF_CTX_new") }
            self.pointer = pointer
        }

        deinit { EVP_KDF_CTX_free(pointer) }

        /// Derives `byteCount` bytes with SHA-256 as the KDF's digest and `parameters` as its
        /// inputs: the one place HKDF and PBKDF2 call `EVP_KDF_derive`.
        ///
        /// Every pointer `parameters` hold must stay valid until this returns.
        /// - Parameter algorithm: Names the KDF in the error (`HKDF-SHA256`).
        func deriveSHA256(_ algorithm: String, byteCount: Int, _ parameters: [OSSL_PARAM]) throws -> Data {
            var output = Data(count: byteCount)
            let digest = UnsafeMutablePointer(mutating: keybound_digest_sha256)
            var params =
                [OSSL_PARAM_construct_utf8_string(keybound_param_kdf_digest, digest, 0)] + parameters
                + [OSSL_PARAM_construct_end()]
            let ok = output.withUnsafeMutableBytes { output in
                EVP_KDF_derive(pointer, output.bindMemory(to: UInt8.self).baseAddress, output.count, &params)
            }
            guard ok == 1 else { throw openSSLError("EVP_KDF_derive(\(algorithm))") }
            return output
        }
    }

    /// An `OSSL_PARAM` naming `count` bytes at `bytes`, which OpenSSL reads but never writes.
    func octetStringParameter(_ name: UnsafePointer<CChar>, _ bytes: UnsafePointer<UInt8>, _ count: Int)
        -> OSSL_PARAM
    {
        OSSL_PARAM_construct_octet_string(name, UnsafeMutableRawPointer(mutating: bytes), count)
    }
#endif
