#if !canImport(CryptoKit)
    internal import COpenSSL
    import Foundation
    import KeyboundWire

    /// A P-256 key pair in OpenSSL.
    struct P256PrivateKeyBacking: Sendable {
        private let key: EVPKey
        let publicX963Representation: Data

        /// A fresh key from OpenSSL's key generator.
        init() throws {
            guard let pointer = keybound_ec_p256_generate() else {
                throw openSSLError("EVP_PKEY_Q_keygen(EC, P-256)")
            }
            try self.init(key: EVPKey(owning: pointer))
        }

        /// The key with private scalar `validatedScalar` (32 bytes, already checked to be in 1..<n).
        init(validatedScalar: Data) throws {
            // OpenSSL 3.0 cannot derive the public point from a private scalar through
            // EVP_PKEY_fromdata, but its PKCS #8 decoder does. The DER holds the secret, so it is
            // wiped as soon as it has been decoded (and built in one buffer, so no copy is left).
            var der: [UInt8] = []
            der.reserveCapacity(P256PKCS8.header.count + P256Curve.scalarByteCount)
            der.append(contentsOf: P256PKCS8.header)
            der.append(contentsOf: validatedScalar)
            defer { OPENSSL_cleanse(&der, der.count) }
            let decoded = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
                var cursor = buffer.baseAddress
                return d2i_PrivateKey_ex(EVP_PKEY_EC, nil, &cursor, buffer.count, nil, nil)
            }
            guard let decoded else { throw openSSLError("d2i_PrivateKey_ex(P-256 PKCS #8)") }
            try self.init(key: EVPKey(owning: decoded))
        }

        private init(key: EVPKey) throws {
            self.key = key
            self.publicX963Representation = try key.publicX963Representation()
        }

        var rawRepresentation: Data {
            do {
                return try key.privateScalar()
            } catch {
                // The key was decoded or generated here, so it has a private scalar: only running out
                // of memory can make exporting it fail, and Swift traps on that anyway.
                preconditionFailure("cannot export the P-256 private scalar: \(error)")
            }
        }

        func signatureRawRepresentation(for message: Data) throws -> Data {
            let digest = try DigestBackend.sha256Throwing(message)
            let context = try PKeyContext(for: key)
            guard EVP_PKEY_sign_init(context.pointer) == 1 else { throw openSSLError("EVP_PKEY_sign_init") }
            var der = [UInt8](repeating: 0, count: 72)  // The longest DER ECDSA-Sig-Value for P-256.
            var length = der.count
            let ok = digest.withNonNullBytes { digest, count in
                EVP_PKEY_sign(context.pointer, &der, &length, digest, count)
            }
            guard ok == 1 else { throw openSSLError("EVP_PKEY_sign(ECDSA P-256)") }
            guard let raw = ECDSASignatureDER.rawRepresentation(fromDER: Data(der.prefix(length))) else {
                throw CryptoError.backend("EVP_PKEY_sign produced a signature that is not strict DER")
            }
            return raw
        }
    }

    /// A P-256 public key in OpenSSL, with a small pool of verification contexts.
    ///
    /// Setting up an `EVP_PKEY_CTX` for verification looks up the ECDSA implementation under a
    /// lock; keeping initialised contexts makes repeated verifications with one key as fast as
    /// `openssl speed`.
    final class P256PublicKeyBacking: Sendable {
        private let key: EVPKey
        private let contexts: VerifyContextPool

        init(x963Representation point: Data) throws {
            let key = try point.withNonNullBytes { point, count in
                let context = try PKeyContext(forKeyType: keybound_key_type_ec)
                // The OSSL_PARAM array points at the point and at process-lifetime names; both stay
                // valid until EVP_PKEY_fromdata returns.
                var params = [
                    OSSL_PARAM_construct_utf8_string(
                        keybound_param_group_name, UnsafeMutablePointer(mutating: keybound_curve_p256), 0),
                    OSSL_PARAM_construct_octet_string(
                        keybound_param_pub_key, UnsafeMutableRawPointer(mutating: point), count),
                    OSSL_PARAM_construct_end(),
                ]
                var pointer: OpaquePointer?
                guard EVP_PKEY_fromdata_init(context.pointer) == 1,
                    EVP_PKEY_fromdata(context.pointer, &pointer, keybound_selection_public_key, &params) == 1,
                    let pointer
                else {
                    // Points off the curve or coordinates not below p end here.
                    throw CryptoError.invalidKey.with(detail: openSSLErrorText("EVP_PKEY_fromdata(P-256)"))
                }
                return EVPKey(owning: pointer)
            }
            // The context that validates the key becomes the first verification context.
            let context = try PKeyContext(for: key)
            guard EVP_PKEY_public_check_quick(context.pointer) == 1 else {
                throw CryptoError.invalidKey.with(detail: openSSLErrorText("EVP_PKEY_public_check_quick"))
            }
            guard EVP_PKEY_verify_init(context.pointer) == 1 else {
                throw openSSLError("EVP_PKEY_verify_init")
            }
            self.key = key
            self.contexts = try VerifyContextPool(first: context)
        }

        func isValidSignature(_ signature: P256Signature, for message: Data) -> Bool {
            guard let digest = try? DigestBackend.sha256Throwing(message),
                let context = contexts.take() ?? newVerifyContext()
            else {
                ERR_clear_error()
                return false
            }
            let der = signature.derRepresentation
            let result = der.withNonNullBytes { der, derCount in
                digest.withNonNullBytes { digest, digestCount in
                    EVP_PKEY_verify(context.pointer, der, derCount, digest, digestCount)
                }
            }
            if result != 1 {
                ERR_clear_error()  // A mismatch or a range failure is an answer, not an error to keep.
            }
            contexts.put(context)
            return result == 1
        }

        /// A new verification context, for when every pooled one is in use.
        private func newVerifyContext() -> PKeyContext? {
            guard let context = try? PKeyContext(for: key), EVP_PKEY_verify_init(context.pointer) == 1 else {
                return nil
            }
            return context
        }
    }

    /// Verification contexts not in use, each handed to one caller at a time.
    ///
    /// Guarded by a pthread mutex rather than `Synchronization.Mutex`: ThreadSanitizer cannot see
    /// the latter's futex-based locking on Linux and reports every contended use as a race, which
    /// would bury real ones.
    private final class VerifyContextPool: @unchecked Sendable {
        // Safe to share: `idle` is only touched between locking and unlocking `mutex`, the C mutex
        // this class owns, and a context taken out is referenced by its one caller only.
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private var idle: [PKeyContext]
        /// More idle contexts than threads that verify at once would only hold memory.
        private static let maximumIdle = 16

        init(first: PKeyContext) throws {
            let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            guard pthread_mutex_init(mutex, nil) == 0 else {
                mutex.deallocate()
                throw CryptoError.backend("pthread_mutex_init failed")
            }
            self.mutex = mutex
            self.idle = [first]
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        func take() -> PKeyContext? {
            withLock { idle.popLast() }
        }

        func put(_ context: PKeyContext) {
            withLock {
                if idle.count < Self.maximumIdle {
                    idle.append(context)
                }
            }
        }

        private func withLock<Result>(_ body: () -> Result) -> Result {
            let status = pthread_mutex_lock(mutex)
            // A default mutex that init set up fails to lock only if memory was corrupted.
            precondition(status == 0, "pthread_mutex_lock failed: \(status)")
            defer { pthread_mutex_unlock(mutex) }
            return body()
        }
    }

    /// Owns one `EVP_PKEY`.
    final class EVPKey: @unchecked Sendable {
        // Safe to share: the key is never modified after creation, and OpenSSL allows concurrent
        // operations on an unmodified EVP_PKEY as long as each uses its own EVP_PKEY_CTX.
        let pointer: OpaquePointer

        init(owning pointer: OpaquePointer) {
            self.pointer = pointer
        }

        deinit { EVP_PKEY_free(pointer) }

        /// The public point, uncompressed: `04 || X || Y`.
        func publicX963Representation() throws -> Data {
            var point = Data(count: P256Curve.x963ByteCount)
            var length = 0
            let ok = point.withUnsafeMutableBytes { buffer in
                EVP_PKEY_get_octet_string_param(
                    pointer, keybound_param_pub_key, buffer.bindMemory(to: UInt8.self).baseAddress,
                    buffer.count,
                    &length)
            }
            guard ok == 1, length == P256Curve.x963ByteCount, point.first == 0x04 else {
                throw openSSLError("EVP_PKEY_get_octet_string_param(pub)")
            }
            return point
        }

        /// The private scalar as 32 big-endian bytes.
        func privateScalar() throws -> Data {
            var number: OpaquePointer?
            guard EVP_PKEY_get_bn_param(pointer, keybound_param_priv_key, &number) == 1, let number else {
                throw openSSLError("EVP_PKEY_get_bn_param(priv)")
            }
            defer { BN_clear_free(number) }
            var scalar = Data(count: P256Curve.scalarByteCount)
            let written = scalar.withUnsafeMutableBytes { buffer in
                BN_bn2binpad(number, buffer.bindMemory(to: UInt8.self).baseAddress, Int32(buffer.count))
            }
            guard written == P256Curve.scalarByteCount else { throw openSSLError("BN_bn2binpad") }
            return scalar
        }
    }

    /// Owns one `EVP_PKEY_CTX`; never used by two threads at once.
    final class PKeyContext {
        let pointer: OpaquePointer

        init(for key: EVPKey) throws {
            guard let pointer = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
                throw openSSLError("EVP_PKEY_CTX_new_from_pkey")
            }
            self.pointer = pointer
        }

        init(forKeyType keyType: UnsafePointer<CChar>) throws {
            guard let pointer = EVP_PKEY_CTX_new_from_name(nil, keyType, nil) else {
                throw openSSLError("EVP_PKEY_CTX_new_from_name")
            }
            self.pointer = pointer
        }

        deinit { EVP_PKEY_CTX_free(pointer) }
    }

    /// The PKCS #8 `PrivateKeyInfo` of a P-256 key without its optional public key (RFC 5208,
    /// RFC 5915), up to the 32-byte scalar.
    private enum P256PKCS8 {
        static let header: [UInt8] = [
            0x30, 0x41, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
            0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x04, 0x27, 0x30, 0x25, 0x02, 0x01,
            0x01, 0x04, 0x20,
        ]
    }
#endif
