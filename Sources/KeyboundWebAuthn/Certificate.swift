internal import COpenSSL
import Foundation

/// An X.509 certificate, parsed and checked once.
///
/// Attestation statements carry certificates (`x5c`), and relying parties configure the roots
/// they trust with them. Equal certificates have equal DER.
///
/// ```swift
/// let root = try Certificate(pemRepresentation: String(contentsOfFile: "Apple_WebAuthn_Root_CA.pem"))
/// ```
public struct Certificate: Sendable, Hashable {
    /// The DER encoding, exactly as given.
    public let derRepresentation: Data
    let handle: X509Handle

    /// Parses one DER certificate.
    ///
    /// - Throws: ``WebAuthnError/malformedCertificate`` if the bytes are not exactly one X.509
    ///   certificate OpenSSL can read.
    public init(derRepresentation: Data) throws {
        self.handle = try X509Handle(der: derRepresentation)
        self.derRepresentation = Data(derRepresentation)
    }

    /// Parses the one `CERTIFICATE` block of a PEM text.
    ///
    /// - Throws: ``WebAuthnError/malformedCertificate`` if there is not exactly one block, or it
    ///   does not hold a certificate.
    public init(pemRepresentation: String) throws {
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        let blocks = pemRepresentation.components(separatedBy: begin)
        let parts = blocks.count == 2 ? blocks[1].components(separatedBy: end) : []
        guard parts.count == 2, let der = Data(base64Encoded: parts[0], options: .ignoreUnknownCharacters)
        else {
            throw WebAuthnError.malformedCertificate.with("expected exactly one PEM CERTIFICATE block")
        }
        try self.init(derRepresentation: der)
    }

    /// The certificate's DER `SubjectPublicKeyInfo`.
    var subjectPublicKeyInfo: Data {
        get throws { try handle.subjectPublicKeyInfo() }
    }

    /// Certificates are equal when their DER is.
    public static func == (lhs: Certificate, rhs: Certificate) -> Bool {
        lhs.derRepresentation == rhs.derRepresentation
    }

    /// Hashes the DER.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(derRepresentation)
    }
}

/// What verifying a certificate chain against a set of roots found.
enum ChainVerdict: Sendable, Equatable {
    /// The chain verifies up to one of the roots at the given time.
    case trusted
    /// The chain does not lead to any of the roots: nothing is said about it.
    case unknownRoot
}

extension Certificate {
    /// Verifies that `self`, helped by `intermediates`, chains up to one of `roots` at `time`.
    ///
    /// The roots are trust anchors as given: a configured intermediate or the leaf itself can be
    /// one (WebAuthn: "or is itself an acceptable certificate"). Nothing but `roots` is trusted,
    /// and validity is checked at `time`, never at the machine's clock.
    ///
    /// - Returns: ``ChainVerdict/trusted``, or ``ChainVerdict/unknownRoot`` when no chain to the
    ///   roots exists (so the statement is valid but unattested).
    /// - Throws: ``WebAuthnError/certificateChainInvalid`` when a chain to a root exists but does
    ///   not verify: a certificate expired or not yet valid at `time`, a bad signature, a broken
    ///   constraint.
    func verifyChain(intermediates: [Certificate], roots: [Certificate], at time: Date) throws -> ChainVerdict
    {
        guard !roots.isEmpty else { return .unknownRoot }
        guard let store = X509_STORE_new() else { throw chainFailure("X509_STORE_new failed") }
        defer { X509_STORE_free(store) }
        for root in roots {
            guard X509_STORE_add_cert(store, root.handle.pointer) == 1 else {
                ERR_clear_error()
                throw chainFailure("X509_STORE_add_cert failed")
            }
        }
        guard let untrusted = keybound_x509_stack_new() else { throw chainFailure("out of memory") }
        defer { keybound_x509_stack_free(untrusted) }
        for certificate in intermediates {
            guard keybound_x509_stack_push(untrusted, certificate.handle.pointer) > 0 else {
                throw chainFailure("out of memory")
            }
        }
        guard let context = X509_STORE_CTX_new() else { throw chainFailure("X509_STORE_CTX_new failed") }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, handle.pointer, untrusted) == 1 else {
            ERR_clear_error()
            throw chainFailure("X509_STORE_CTX_init failed")
        }
        X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        X509_STORE_CTX_set_time(context, 0, time_t(time.timeIntervalSince1970.rounded(.down)))
        let verified = withExtendedLifetime((roots, intermediates)) { X509_verify_cert(context) }
        if verified == 1 { return .trusted }
        let error = X509_STORE_CTX_get_error(context)
        ERR_clear_error()
        switch error {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            return .unknownRoot
        default:
            let reason =
                X509_verify_cert_error_string(Int(error)).map { String(cString: $0) } ?? "error \(error)"
            throw chainFailure(reason)
        }
    }

    private func chainFailure(_ detail: String) -> WebAuthnError {
        WebAuthnError.certificateChainInvalid.with(detail)
    }

    /// The extension `oid`: its value (the DER inside `extnValue`) and whether it is marked
    /// critical; `nil` when absent.
    ///
    /// - Throws: ``WebAuthnError/malformedCertificate`` when the extension appears twice.
    func certificateExtension(oid: String) throws -> (value: Data, isCritical: Bool)? {
        try handle.certificateExtension(oid: oid)
    }

    /// The subject attributes WebAuthn's certificate requirements name.
    enum SubjectAttribute {
        case country, organization, organizationalUnit, commonName

        var nid: Int32 {
            switch self {
            case .country: NID_countryName
            case .organization: NID_organizationName
            case .organizationalUnit: NID_organizationalUnitName
            case .commonName: NID_commonName
            }
        }
    }

    /// The text values of the subject's `attribute`, in order.
    func subjectValues(_ attribute: SubjectAttribute) -> [String] {
        handle.subjectValues(nid: attribute.nid)
    }

    /// Whether this is an X.509 version 3 certificate.
    var isVersion3: Bool { X509_get_version(handle.pointer) == 2 }

    /// Whether this certificate may act as a CA (basic constraints `cA` true, or the like).
    var isCA: Bool { X509_check_ca(handle.pointer) != 0 }
}

/// Owns one OpenSSL `X509`.
final class X509Handle: @unchecked Sendable {
    // Safe to share: the certificate is never modified after parsing. OpenSSL 3 fills its
    // extension cache under the certificate's own lock, and a store or stack holding it only
    // takes a reference (atomic), so concurrent verifications are fine.
    let pointer: OpaquePointer

    init(der: Data) throws {
        guard let pointer = decodeWholeDER(der, decode: { d2i_X509(nil, $0, $1) }, free: { X509_free($0) })
        else {
            ERR_clear_error()
            throw WebAuthnError.malformedCertificate.with("not one DER X.509 certificate")
        }
        self.pointer = pointer
    }

    deinit { X509_free(pointer) }

    func subjectPublicKeyInfo() throws -> Data {
        guard let key = X509_get0_pubkey(pointer) else {
            ERR_clear_error()
            throw WebAuthnError.malformedCertificate.with("the public key cannot be read")
        }
        let count = i2d_PUBKEY(key, nil)
        guard count > 0 else {
            ERR_clear_error()
            throw WebAuthnError.malformedCertificate.with("the public key cannot be encoded")
        }
        var der = Data(count: Int(count))
        let written = der.withUnsafeMutableBytes { buffer -> Int32 in
            var cursor = buffer.bindMemory(to: UInt8.self).baseAddress
            return i2d_PUBKEY(key, &cursor)
        }
        guard written == count else { throw WebAuthnError.malformedCertificate.with("i2d_PUBKEY failed") }
        return der
    }

    func certificateExtension(oid: String) throws -> (value: Data, isCritical: Bool)? {
        guard let object = OBJ_txt2obj(oid, 1) else {
            ERR_clear_error()
            return nil
        }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(pointer, object, -1)
        guard index >= 0 else { return nil }
        guard X509_get_ext_by_OBJ(pointer, object, index) < 0 else {
            throw WebAuthnError.malformedCertificate.with("extension \(oid) appears twice")
        }
        guard let found = X509_get_ext(pointer, index), let value = X509_EXTENSION_get_data(found) else {
            return nil
        }
        return (Self.bytes(of: value), X509_EXTENSION_get_critical(found) == 1)
    }

    func subjectValues(nid: Int32) -> [String] {
        guard let name = X509_get_subject_name(pointer) else { return [] }
        var values: [String] = []
        var index = X509_NAME_get_index_by_NID(name, nid, -1)
        while index >= 0 {
            if let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) {
                var utf8: UnsafeMutablePointer<UInt8>?
                let count = ASN1_STRING_to_UTF8(&utf8, data)
                if count >= 0, let utf8 {
                    values.append(
                        String(decoding: UnsafeBufferPointer(start: utf8, count: Int(count)), as: UTF8.self))
                    keybound_openssl_free(utf8)
                } else {
                    ERR_clear_error()
                }
            }
            index = X509_NAME_get_index_by_NID(name, nid, index)
        }
        return values
    }

    private static func bytes(of string: UnsafePointer<ASN1_STRING>) -> Data {
        let count = Int(ASN1_STRING_length(string))
        guard count > 0, let bytes = ASN1_STRING_get0_data(string) else { return Data() }
        return Data(bytes: bytes, count: count)
    }
}
