import Foundation
import KeyboundCrypto
import KeyboundWire

/// The attestation statement formats Keybound verifies (WebAuthn §8, IANA registry names).
public enum AttestationFormat: String, Sendable, Hashable, CaseIterable {
    /// No attestation (§8.7).
    case none
    /// Packed, with a certificate chain or self-attested (§8.2).
    case packed
    /// FIDO U2F (§8.6).
    case fidoU2F = "fido-u2f"
    /// Apple anonymous attestation (§8.8), chained to the Apple WebAuthn Root CA.
    case apple
}

/// What an attestation statement proves (WebAuthn §6.5.4).
public enum AttestationType: String, Sendable, Hashable {
    /// No attestation statement.
    case none
    /// Signed by the credential's own key: proves possession, says nothing of the model.
    case selfAttestation = "self"
    /// Signed by an attestation key with a certificate chain: Basic or AttCA, which only
    /// metadata about the chain tells apart.
    case basic
    /// Apple's anonymization CA, which certifies the credential key itself.
    case anonymizationCA
}

/// The attestation roots a relying party trusts, per format (WebAuthn §7.1 step 23).
///
/// Trust is policy: a statement that verifies but does not chain to these roots is reported as
/// not trusted (``VerifiedAttestation/isTrusted``), not refused.
public struct AttestationTrustAnchors: Sendable {
    /// The roots for each format; formats without an entry trust nothing.
    public var roots: [AttestationFormat: [Certificate]]

    /// - Parameter roots: The roots per format; by default Apple's WebAuthn root for `apple`.
    public init(_ roots: [AttestationFormat: [Certificate]] = [.apple: [.appleWebAuthnRootCA]]) {
        self.roots = roots
    }
}

/// The outcome of a verified attestation statement.
public struct VerifiedAttestation: Sendable, Hashable {
    /// The statement's format.
    public let format: AttestationFormat
    /// What kind of attestation it is.
    public let type: AttestationType
    /// The statement's certificates, leaf first; empty for `none` and self attestation.
    public let trustPath: [Certificate]
    /// Whether the trust path verified up to one of the configured roots at the given time.
    /// `false` for `none`, self attestation, and chains to roots nobody configured: the
    /// credential is then as good as one registered without attestation.
    public let isTrusted: Bool
}

/// An attestation object (WebAuthn §6.5.4): `{"fmt", "attStmt", "authData"}` in CBOR.
public struct AttestationObject: Sendable, Hashable {
    /// The format identifier as sent (`fmt`), known or not.
    public let format: String
    /// The attestation statement (`attStmt`).
    public let statement: CBORMap
    /// The parsed authenticator data (`authData`).
    public let authenticatorData: AuthenticatorData

    /// The most certificates a statement may carry: real chains have 1 to 5.
    static let maximumCertificates = 8

    /// Decodes an attestation object.
    ///
    /// - Parameters:
    ///   - data: The CBOR bytes.
    ///   - allowingUnflaggedExtensions: For App Attest; see
    ///     ``AuthenticatorData/init(_:allowingUnflaggedExtensions:)``.
    /// - Throws: ``WebAuthnError/malformedCBOR`` when the bytes are not CBOR as
    ///   ``CBOR/init(decoding:)`` accepts it, or not a map of exactly text `fmt`, map `attStmt` and bytes `authData`; the errors of
    ///   ``AuthenticatorData`` for its contents.
    public init(_ data: Data, allowingUnflaggedExtensions: Bool = false) throws {
        guard let map = try CBOR(decoding: data).mapValue, map.count == 3,
            let format = map[text: "fmt"]?.textValue, let statement = map[text: "attStmt"]?.mapValue,
            let authData = map[text: "authData"]?.bytesValue
        else { throw WebAuthnError.malformedCBOR.with("an attestation object is {fmt, attStmt, authData}") }
        self.format = format
        self.statement = statement
        self.authenticatorData = try AuthenticatorData(
            authData, allowingUnflaggedExtensions: allowingUnflaggedExtensions)
    }

    /// An attestation object from its parts (for emulators); ``encoded()`` gives its bytes.
    public init(format: String, statement: CBORMap, authenticatorData: AuthenticatorData) {
        self.format = format
        self.statement = statement
        self.authenticatorData = authenticatorData
    }

    /// The CTAP2 canonical CBOR encoding.
    public func encoded() -> Data {
        CBOR.map([
            (.text("fmt"), .text(format)),
            (.text("attStmt"), .map(statement)),
            (.text("authData"), .bytes(authenticatorData.rawValue)),
        ]).encoded()
    }

    /// Runs the verification procedure of the statement's format (WebAuthn §8), then assesses
    /// its trust path against `trustAnchors` (§7.1 steps 23 and 24).
    ///
    /// - Parameters:
    ///   - clientDataHash: SHA-256 of `clientDataJSON`.
    ///   - trustAnchors: The roots trusted per format.
    ///   - time: The time certificates must be valid at.
    /// - Returns: The statement's type and trust path, and whether it is trusted.
    /// - Throws: ``WebAuthnError/unsupportedAttestationFormat`` for formats other than
    ///   ``AttestationFormat``'s; ``WebAuthnError/invalidAttestation`` when the statement is
    ///   malformed or its signature does not verify; ``WebAuthnError/nonceMismatch`` for an Apple
    ///   statement over other data; ``WebAuthnError/certificateChainInvalid`` when the chain
    ///   reaches a trusted root but does not verify at `time`.
    public func verify(
        clientDataHash: Data, trustAnchors: AttestationTrustAnchors, at time: Date
    ) throws -> VerifiedAttestation {
        guard let format = AttestationFormat(rawValue: format) else {
            throw WebAuthnError.unsupportedAttestationFormat.with("fmt \"\(format)\"")
        }
        guard let credential = authenticatorData.attestedCredentialData else {
            throw WebAuthnError.malformedAuthenticatorData.with("no attested credential data")
        }
        let signedData = authenticatorData.rawValue + clientDataHash
        let type: AttestationType
        let trustPath: [Certificate]
        switch format {
        case .none:
            guard statement.count == 0 else { throw invalid("a none statement is an empty map") }
            (type, trustPath) = (.none, [])
        case .packed:
            (type, trustPath) = try verifyPacked(credential: credential, signedData: signedData)
        case .fidoU2F:
            (type, trustPath) = try verifyFIDOU2F(credential: credential, clientDataHash: clientDataHash)
        case .apple:
            (type, trustPath) = try verifyApple(credential: credential, signedData: signedData)
        }
        guard let leaf = trustPath.first else {
            return VerifiedAttestation(format: format, type: type, trustPath: [], isTrusted: false)
        }
        let verdict = try leaf.verifyChain(
            intermediates: Array(trustPath.dropFirst()), roots: trustAnchors.roots[format] ?? [], at: time)
        return VerifiedAttestation(
            format: format, type: type, trustPath: trustPath, isTrusted: verdict == .trusted)
    }

    /// Packed (§8.2): with `x5c`, signed by the attestation certificate's key, which must meet
    /// §8.2.1; without, signed by the credential key itself.
    private func verifyPacked(
        credential: AuthenticatorData.AttestedCredentialData, signedData: Data
    ) throws -> (AttestationType, [Certificate]) {
        try allowOnly(["alg", "sig", "x5c"])
        guard let alg = statement[text: "alg"]?.integerValue,
            let signature = statement[text: "sig"]?.bytesValue
        else {
            throw invalid("packed needs integer alg and bytes sig")
        }
        guard let algorithm = COSEAlgorithm(rawValue: alg) else {
            throw WebAuthnError.unsupportedAlgorithm.with("packed statement algorithm \(alg)")
        }
        guard statement[text: "x5c"] != nil else {
            guard algorithm == credential.publicKey.algorithm else {
                throw invalid("self attestation with alg \(alg) for a \(credential.publicKey.algorithm) key")
            }
            guard credential.publicKey.isValidSignature(signature, for: signedData) else {
                throw invalid("the self attestation signature does not verify")
            }
            return (.selfAttestation, [])
        }
        let certificates = try certificates()
        let leaf = certificates[0]
        let verifier = try SignatureVerifier(spkiDER: leaf.subjectPublicKeyInfo, algorithm: algorithm)
        guard verifier.isValidSignature(signature, for: signedData) else {
            throw invalid("the packed attestation signature does not verify")
        }
        // §8.2.1: version 3; subject C, O, OU "Authenticator Attestation", CN; not a CA.
        guard leaf.isVersion3, !leaf.subjectValues(.country).isEmpty,
            !leaf.subjectValues(.organization).isEmpty,
            leaf.subjectValues(.organizationalUnit) == ["Authenticator Attestation"],
            !leaf.subjectValues(.commonName).isEmpty, !leaf.isCA
        else { throw invalid("the attestation certificate does not meet WebAuthn §8.2.1") }
        // id-fido-gen-ce-aaguid: when present, not critical and the authenticator data's AAGUID.
        if let aaguidExtension = try leaf.certificateExtension(oid: "1.3.6.1.4.1.45724.1.1.4") {
            var reader = DERReader(aaguidExtension.value)
            guard !aaguidExtension.isCritical, reader.read(tag: 0x04) == credential.aaguid, reader.isAtEnd
            else {
                throw invalid("the certificate's AAGUID extension does not match the authenticator data")
            }
        }
        return (.basic, certificates)
    }

    /// Apple anonymous (§8.8): the leaf certifies the credential key itself, and its nonce
    /// extension binds it to this authenticator data and client data.
    private func verifyApple(
        credential: AuthenticatorData.AttestedCredentialData, signedData: Data
    ) throws -> (AttestationType, [Certificate]) {
        try allowOnly(["x5c"])
        let chain = try certificates()
        // Steps 2 to 4: nonce = SHA-256(authenticatorData ‖ clientDataHash) is the leaf's nonce.
        try AppleNonce.verify(in: chain[0], nonce: Digest.sha256(signedData))
        // Step 5: the credential public key is the leaf's subject public key.
        guard case .es256(let key) = credential.publicKey.verifier,
            let certified = try? P256PublicKey(spkiDER: chain[0].subjectPublicKeyInfo), certified == key
        else { throw invalid("the credential key is not the certified key") }
        return (.anonymizationCA, chain)
    }

    /// FIDO U2F (§8.6): one P-256 certificate whose key signs `00 ‖ rpIdHash ‖ clientDataHash ‖
    /// credentialId ‖ 04 ‖ x ‖ y`.
    private func verifyFIDOU2F(
        credential: AuthenticatorData.AttestedCredentialData, clientDataHash: Data
    ) throws -> (AttestationType, [Certificate]) {
        try allowOnly(["sig", "x5c"])
        guard let signature = statement[text: "sig"]?.bytesValue else {
            throw invalid("fido-u2f needs bytes sig")
        }
        let certificates = try certificates()
        guard certificates.count == 1,
            let attestationKey = try? P256PublicKey(spkiDER: certificates[0].subjectPublicKeyInfo)
        else { throw invalid("fido-u2f needs exactly one certificate with a P-256 key") }
        guard case .es256(let credentialKey) = credential.publicKey.verifier else {
            throw invalid("a fido-u2f credential key is ES256")
        }
        let verificationData =
            Data([0x00]) + authenticatorData.rpIdHash + clientDataHash + credential.credentialId
            + credentialKey.x963Representation
        guard let parsed = try? P256Signature(derRepresentation: signature),
            attestationKey.isValidSignature(parsed, for: verificationData)
        else { throw invalid("the fido-u2f signature does not verify") }
        return (.basic, certificates)
    }

    /// The statement's `x5c`: 1 to ``maximumCertificates`` DER certificates, leaf first.
    private func certificates() throws -> [Certificate] {
        guard let items = statement[text: "x5c"]?.arrayValue,
            (1...Self.maximumCertificates).contains(items.count)
        else { throw invalid("x5c must hold 1 to \(Self.maximumCertificates) certificates") }
        return try items.map { item in
            guard let der = item.bytesValue else { throw invalid("x5c holds byte strings") }
            return try Certificate(derRepresentation: der)
        }
    }

    /// Refuses statement members the format does not define (the CDDL maps are closed).
    private func allowOnly(_ names: Set<String>) throws {
        for entry in statement.entries {
            guard let name = entry.key.textValue, names.contains(name) else {
                throw invalid("\(format) statement member \(entry.key) not allowed")
            }
        }
    }

    private func invalid(_ detail: String) -> WebAuthnError {
        WebAuthnError.invalidAttestation.with(detail)
    }
}

/// Apple's nonce extension (1.2.840.113635.100.8.2), in anonymous WebAuthn attestation and App
/// Attest alike: `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }`.
enum AppleNonce {
    static let oid = "1.2.840.113635.100.8.2"

    /// Checks that `certificate` certifies `nonce`.
    ///
    /// - Throws: ``WebAuthnError/invalidAttestation`` when the extension is absent or malformed,
    ///   ``WebAuthnError/nonceMismatch`` when it holds another nonce.
    static func verify(in certificate: Certificate, nonce: Data) throws {
        guard let found = try certificate.certificateExtension(oid: oid) else {
            throw WebAuthnError.invalidAttestation.with("the certificate has no nonce extension")
        }
        var outer = DERReader(found.value)
        guard let sequence = outer.read(tag: 0x30), outer.isAtEnd else { throw malformed }
        var fields = DERReader(sequence)
        guard let tagged = fields.read(tag: 0xA1), fields.isAtEnd else { throw malformed }
        var inner = DERReader(tagged)
        guard let certified = inner.read(tag: 0x04), inner.isAtEnd else { throw malformed }
        guard certified == nonce else {
            throw WebAuthnError.nonceMismatch.with("the certificate's nonce is for other data")
        }
    }

    private static let malformed = WebAuthnError.invalidAttestation.with("malformed nonce extension")
}
