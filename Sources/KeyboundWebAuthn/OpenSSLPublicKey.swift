internal import COpenSSL
import Foundation
import KeyboundCrypto

/// An RSA or Ed25519 public key in OpenSSL, for the algorithms KeyboundCrypto does not have.
///
/// ES256 keys go through KeyboundCrypto's `P256PublicKey` instead; this class covers RS256
/// (RSASSA-PKCS1-v1_5 with SHA-256) and EdDSA over Ed25519.
final class OpenSSLPublicKey: @unchecked Sendable {
    // Safe to share: the EVP_PKEY is never modified after init, and every verification creates
    // its own EVP_MD_CTX, which OpenSSL allows from many threads at once.
    private let pointer: OpaquePointer

    /// RSA moduli accepted: WebAuthn's minimum, and a ceiling that bounds the cost of a verify.
    static let rsaModulusBits = 2048...8192

    private init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }

    /// An Ed25519 key from its 32-byte encoding (RFC 8032).
    static func ed25519(raw: Data) throws -> OpenSSLPublicKey {
        guard raw.count == 32 else {
            throw WebAuthnError.invalidPublicKey.with("an Ed25519 key is 32 bytes, not \(raw.count)")
        }
        let pointer = raw.withNonNullBytes { bytes, count in
            EVP_PKEY_new_raw_public_key_ex(nil, keybound_key_type_ed25519, nil, bytes, count)
        }
        guard let pointer else { throw invalidKey("EVP_PKEY_new_raw_public_key_ex(ED25519)") }
        return OpenSSLPublicKey(owning: pointer)
    }

    /// An RSA key from its modulus and public exponent, big-endian unsigned (RFC 8230).
    static func rsa(modulus: Data, exponent: Data) throws -> OpenSSLPublicKey {
        // An exponent is odd and at least 3; OpenSSL refuses exponents over 64 bits for large
        // moduli anyway.
        guard (1...8).contains(exponent.count), let last = exponent.last, last & 1 == 1,
            exponent.dropLast().contains(where: { $0 != 0 }) || last > 1
        else {
            throw WebAuthnError.invalidPublicKey.with("RSA exponent must be odd, 3 or more, at most 64 bits")
        }
        guard modulus.count <= rsaModulusBits.upperBound / 8 + 1 else {
            throw WebAuthnError.invalidPublicKey.with("RSA modulus over \(rsaModulusBits.upperBound) bits")
        }
        guard let builder = OSSL_PARAM_BLD_new() else { throw invalidKey("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        let n = modulus.withNonNullBytes { BN_bin2bn($0, Int32($1), nil) }
        let e = exponent.withNonNullBytes { BN_bin2bn($0, Int32($1), nil) }
        defer {
            BN_free(n)
            BN_free(e)
        }
        guard let n, let e, OSSL_PARAM_BLD_push_BN(builder, keybound_param_rsa_n, n) == 1,
            OSSL_PARAM_BLD_push_BN(builder, keybound_param_rsa_e, e) == 1,
            let parameters = OSSL_PARAM_BLD_to_param(builder)
        else { throw invalidKey("OSSL_PARAM_BLD (RSA n, e)") }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, keybound_key_type_rsa, nil) else {
            throw invalidKey("EVP_PKEY_CTX_new_from_name(RSA)")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pointer: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(context, &pointer, keybound_selection_public_key, parameters) == 1,
            let pointer
        else { throw invalidKey("EVP_PKEY_fromdata(RSA)") }
        let key = OpenSSLPublicKey(owning: pointer)
        try key.checkRSASize()
        return key
    }

    /// A key from a DER `SubjectPublicKeyInfo`, if it is RSA or Ed25519.
    static func fromSPKI(_ der: Data) throws -> OpenSSLPublicKey {
        guard
            let pointer = decodeWholeDER(
                der, decode: { d2i_PUBKEY(nil, $0, $1) }, free: { EVP_PKEY_free($0) })
        else { throw invalidKey("d2i_PUBKEY") }
        let key = OpenSSLPublicKey(owning: pointer)
        if key.isRSA { try key.checkRSASize() }
        return key
    }

    /// Whether this is an RSA key.
    var isRSA: Bool { EVP_PKEY_is_a(pointer, "RSA") == 1 }

    /// Whether this is an Ed25519 key.
    var isEd25519: Bool { EVP_PKEY_is_a(pointer, "ED25519") == 1 }

    private func checkRSASize() throws {
        let bits = Int(EVP_PKEY_get_bits(pointer))
        guard Self.rsaModulusBits.contains(bits) else {
            let range = "\(Self.rsaModulusBits.lowerBound)–\(Self.rsaModulusBits.upperBound)"
            throw WebAuthnError.invalidPublicKey.with("RSA modulus of \(bits) bits, not \(range)")
        }
    }

    /// Whether `signature` verifies over `message`: RSASSA-PKCS1-v1_5 with SHA-256 for RSA keys,
    /// pure EdDSA for Ed25519 keys. Any failure inside OpenSSL is a `false`.
    func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()  // A mismatch is an answer, not an error to keep on the thread's queue.
        }
        // Ed25519 hashes internally and takes no digest; RSA here is always SHA-256.
        let digest = isRSA ? EVP_sha256() : nil
        guard EVP_DigestVerifyInit(context, nil, digest, nil, pointer) == 1 else { return false }
        let result = signature.withNonNullBytes { signature, signatureCount in
            message.withNonNullBytes { message, messageCount in
                EVP_DigestVerify(context, signature, signatureCount, message, messageCount)
            }
        }
        return result == 1
    }

    private static func invalidKey(_ function: String) -> WebAuthnError {
        ERR_clear_error()
        return WebAuthnError.invalidPublicKey.with("\(function) failed")
    }
}
