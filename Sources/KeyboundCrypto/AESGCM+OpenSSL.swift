#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation

    enum AESGCMBackend {
        /// Key and nonce sizes are already checked.
        static func seal(_ plaintext: Data, key: Data, nonce: Data, aad: Data) throws -> (
            ciphertext: Data, tag: Data
        ) {
            let context = try GCMContext(encrypting: true, key: key, nonce: nonce)
            try context.authenticate(aad)
            let ciphertext = try context.transform(plaintext)
            guard context.finish() else { throw openSSLError("EVP_CipherFinal_ex(AES-256-GCM)") }
            return (ciphertext, try context.tag())
        }

        /// Key, nonce and tag sizes are already checked.
        static func open(ciphertext: Data, tag: Data, key: Data, nonce: Data, aad: Data) throws -> Data {
            let context = try GCMContext(encrypting: false, key: key, nonce: nonce)
            try context.setExpectedTag(tag)
            try context.authenticate(aad)
            var plaintext = try context.transform(ciphertext)
            guard context.finish() else {
                // The tag did not match: release nothing of what was decrypted.
                plaintext.resetBytes(in: 0..<plaintext.count)
                ERR_clear_error()
                throw CryptoError.authenticationFailure
            }
            return plaintext
        }
    }

    /// Owns one `EVP_CIPHER_CTX` for a single seal or open; never shared between threads.
    private final class GCMContext {
        private let pointer: OpaquePointer
        /// EVP_CipherUpdate takes an Int32 length: longer inputs go through in pieces.
        private static let maximumChunk = 1 << 30

        init(encrypting: Bool, key: Data, nonce: Data) throws {
            let cipher = try OpenSSLAlgorithms.aes256GCM.get()
            guard let pointer = EVP_CIPHER_CTX_new() else { throw openSSLError("EVP_CIPHER_CTX_new") }
            self.pointer = pointer
            guard EVP_CipherInit_ex2(pointer, cipher.pointer, nil, nil, encrypting ? 1 : 0, nil) == 1 else {
                throw openSSLError("EVP_CipherInit_ex2(AES-256-GCM)")
            }
            if nonce.count != AES256GCM.nonceByteCount {
                guard
                    EVP_CIPHER_CTX_ctrl(pointer, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil) == 1
                else { throw openSSLError("EVP_CTRL_AEAD_SET_IVLEN(\(nonce.count))") }
            }
            let ok = key.withNonNullBytes { key, _ in
                nonce.withNonNullBytes { nonce, _ in
                    EVP_CipherInit_ex2(pointer, nil, key, nonce, -1, nil)
                }
            }
            guard ok == 1 else { throw openSSLError("EVP_CipherInit_ex2(key, nonce)") }
        }

        deinit { EVP_CIPHER_CTX_free(pointer) }

        /// Feeds associated data, which must come before any plaintext or ciphertext.
        func authenticate(_ aad: Data) throws {
            try aad.withNonNullBytes { input, count in
                var offset = 0
                while offset < count {
                    let chunk = min(count - offset, Self.maximumChunk)
                    var written: Int32 = 0
                    guard EVP_CipherUpdate(pointer, nil, &written, input + offset, Int32(chunk)) == 1 else {
                        throw openSSLError("EVP_CipherUpdate(AAD)")
                    }
                    offset += chunk
                }
            }
        }

        /// Encrypts or decrypts; GCM is a stream mode, so the output is as long as the input.
        func transform(_ input: Data) throws -> Data {
            var output = Data(count: input.count)
            try input.withNonNullBytes { input, count in
                try output.withUnsafeMutableBytes { buffer in
                    let output = buffer.bindMemory(to: UInt8.self)
                    var offset = 0
                    while offset < count {
                        let chunk = min(count - offset, Self.maximumChunk)
                        var written: Int32 = 0
                        guard
                            EVP_CipherUpdate(
                                pointer, output.baseAddress?.advanced(by: offset), &written, input + offset,
                                Int32(chunk)) == 1, Int(written) == chunk
                        else { throw openSSLError("EVP_CipherUpdate") }
                        offset += chunk
                    }
                }
            }
            return output
        }

        /// Finishes the operation; when decrypting, `false` means the tag did not match.
        func finish() -> Bool {
            var scratch = [UInt8](repeating: 0, count: AES256GCM.tagByteCount)
            var written: Int32 = 0
            return EVP_CipherFinal_ex(pointer, &scratch, &written) == 1 && written == 0
        }

        /// The tag computed by a finished encryption.
        func tag() throws -> Data {
            var tag = Data(count: AES256GCM.tagByteCount)
            let ok = tag.withUnsafeMutableBytes { buffer in
                EVP_CIPHER_CTX_ctrl(pointer, EVP_CTRL_AEAD_GET_TAG, Int32(buffer.count), buffer.baseAddress)
            }
            guard ok == 1 else { throw openSSLError("EVP_CTRL_AEAD_GET_TAG") }
            return tag
        }

        /// The tag a decryption must match, checked by ``finish()``.
        func setExpectedTag(_ tag: Data) throws {
            let ok = tag.withNonNullBytes { tag, count in
                EVP_CIPHER_CTX_ctrl(
                    pointer, EVP_CTRL_AEAD_SET_TAG, Int32(count), UnsafeMutableRawPointer(mutating: tag))
            }
            guard ok == 1 else { throw openSSLError("EVP_CTRL_AEAD_SET_TAG") }
        }
    }
#endif
