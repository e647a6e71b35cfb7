import Foundation
import KeyboundCrypto

/// Verifies App Attest (`DCAppAttestService`) attestations and assertions, as Apple's
/// "Validating apps that connect to your server" specifies.
///
/// An attestation proves that a P-256 key was made by a genuine instance of the app on a genuine
/// Apple device; each assertion then proves a request came from that key. Three traps of real
/// App Attest data are handled: its flags are `0x40` (UP and UV clear, so WebAuthn's presence
/// rule must not apply); Apple's own samples use the raw challenge as `clientDataHash` (so the
/// hash is taken as given bytes); and Apple's 2026 sample carries a CBOR map after the credential
/// key without the ED flag.
///
/// ```swift
/// let appAttest = AppAttest(appIds: ["TEAMID1234.com.example.app"], environment: .production)
/// let key = try appAttest.verifyAttestation(object, keyId: keyId, clientDataHash: hash, at: .now)
/// // Later, for each request:
/// let counter = try appAttest.verifyAssertion(assertion, clientData: body, publicKey: key.publicKey,
///                                             appId: key.appId, previousCounter: stored)
/// ```
public struct AppAttest: Sendable {
    /// Where the app runs: the AAGUID tells development and production keys apart.
    public enum Environment: String, Sendable, Hashable {
        /// Debug builds: AAGUID `appattestdevelop`.
        case development
        /// App Store, TestFlight and enterprise builds: AAGUID `appattest` and seven zero bytes.
        case production

        /// The AAGUID Apple puts in attestations made in this environment.
        package var aaguid: Data {
            switch self {
            case .development: Data("appattestdevelop".utf8)
            case .production: Data("appattest".utf8) + Data(count: 7)
            }
        }
    }

    /// A key that passed attestation: what the server stores for later assertions.
    public struct AttestedKey: Sendable, Hashable {
        /// The attested P-256 public key.
        public let publicKey: P256PublicKey
        /// The key id: SHA-256 of the key's uncompressed point.
        public let keyId: Data
        /// The App ID (`TEAMID.bundle.id`) the attestation is for.
        public let appId: String
        /// The fraud-metric receipt Apple attached (BER PKCS #7), unverified.
        public let receipt: Data
    }

    /// The App IDs (`TEAMID.bundle.id`) accepted.
    public let appIds: [String]
    /// The environment attestations must come from.
    public let environment: Environment
    /// The roots attestation chains must reach: by default Apple's App Attestation Root CA.
    public let roots: [Certificate]

    /// - Parameters:
    ///   - appIds: The App IDs accepted, `TEAMID.bundle.id`.
    ///   - environment: The environment attestations must come from.
    ///   - roots: The roots attestation chains must reach; tests pass their own test CA.
    public init(
        appIds: [String], environment: Environment, roots: [Certificate] = [.appleAppAttestationRootCA]
    ) {
        self.appIds = appIds
        self.environment = environment
        self.roots = roots
    }

    /// Verifies an attestation object, following Apple's nine steps in order.
    ///
    /// - Parameters:
    ///   - attestationObject: The bytes `attestKey(_:clientDataHash:)` returned.
    ///   - keyId: The key id `generateKey()` returned (32 bytes, base64-decoded).
    ///   - clientDataHash: The exact bytes the app passed to `attestKey`: normally SHA-256 of the
    ///     server's challenge data, but taken as given.
    ///   - time: The time the certificates must be valid at (leaves live three days).
    /// - Returns: The attested key.
    /// - Throws: ``WebAuthnError/certificateChainInvalid`` (chain not to the roots, or invalid at
    ///   `time`), ``WebAuthnError/nonceMismatch``, ``WebAuthnError/keyIdMismatch``,
    ///   ``WebAuthnError/rpIdMismatch`` (another app), ``WebAuthnError/environmentMismatch``,
    ///   ``WebAuthnError/invalidAttestation`` (format, counter, malformed statement), and the
    ///   decoding errors of ``AttestationObject``.
    public func verifyAttestation(
        _ attestationObject: Data, keyId: Data, clientDataHash: Data, at time: Date
    ) throws -> AttestedKey {
        let object = try AttestationObject(attestationObject, allowingUnflaggedExtensions: true)
        guard object.format == "apple-appattest" else {
            throw WebAuthnError.invalidAttestation.with("fmt \"\(object.format)\" is not apple-appattest")
        }
        guard object.statement.count == 2, let x5c = object.statement[text: "x5c"]?.arrayValue,
            (2...AttestationObject.maximumCertificates).contains(x5c.count),
            let receipt = object.statement[text: "receipt"]?.bytesValue
        else {
            throw WebAuthnError.invalidAttestation.with("attStmt is {x5c: [leaf, intermediates…], receipt}")
        }
        let certificates = try x5c.map { item in
            guard let der = item.bytesValue else {
                throw WebAuthnError.invalidAttestation.with("x5c holds bytes")
            }
            return try Certificate(derRepresentation: der)
        }
        let authenticatorData = object.authenticatorData
        guard let credential = authenticatorData.attestedCredentialData else {
            throw WebAuthnError.invalidAttestation.with("no attested credential data")
        }
        let credCert = certificates[0]
        // Step 1. Verify the certificates: credCert first, chained to the App Attest root at `time`.
        let verdict = try credCert.verifyChain(
            intermediates: Array(certificates.dropFirst()), roots: roots, at: time)
        guard verdict == .trusted else {
            throw WebAuthnError.certificateChainInvalid.with("not issued under the App Attestation root")
        }
        // Step 2. Append clientDataHash to the authenticator data.
        let composite = authenticatorData.rawValue + clientDataHash
        // Step 3. nonce = SHA-256 of the composite.
        let nonce = Digest.sha256(composite)
        // Step 4. The credCert extension 1.2.840.113635.100.8.2 must hold exactly that nonce.
        try AppleNonce.verify(in: credCert, nonce: nonce)
        // Step 5. The key id is SHA-256 of credCert's public key (its uncompressed point).
        guard let publicKey = try? P256PublicKey(spkiDER: credCert.subjectPublicKeyInfo) else {
            throw WebAuthnError.invalidAttestation.with("credCert's key is not P-256")
        }
        guard Digest.sha256(publicKey.x963Representation) == keyId else {
            throw WebAuthnError.keyIdMismatch.with("the key id is not SHA-256 of the attested key")
        }
        // Step 6. The RP ID hash is SHA-256 of the App ID.
        guard let appId = appIds.first(where: { Digest.sha256(Data($0.utf8)) == authenticatorData.rpIdHash })
        else {
            throw WebAuthnError.rpIdMismatch.with("the attestation is for another App ID")
        }
        // Step 7. The counter is 0.
        guard authenticatorData.signCount == 0 else {
            throw WebAuthnError.invalidAttestation.with("counter \(authenticatorData.signCount), not 0")
        }
        // Step 8. The AAGUID names the environment.
        guard credential.aaguid == environment.aaguid else {
            let other: Environment = environment == .production ? .development : .production
            guard credential.aaguid == other.aaguid else {
                throw WebAuthnError.invalidAttestation.with("the AAGUID is not App Attest's")
            }
            throw WebAuthnError.environmentMismatch.with(
                "an attestation from \(other.rawValue), not \(environment.rawValue)")
        }
        // Step 9. The credential id is the key id.
        guard credential.credentialId == keyId else {
            throw WebAuthnError.keyIdMismatch.with("the credential id is not the key id")
        }
        // Not one of Apple's steps, but the key the authenticator data carries must be the one
        // certified: a server reading either must get the same key.
        guard case .es256(let embedded) = credential.publicKey.verifier, embedded == publicKey else {
            throw WebAuthnError.invalidAttestation.with("the authenticator data's key is not credCert's")
        }
        return AttestedKey(publicKey: publicKey, keyId: keyId, appId: appId, receipt: receipt)
    }

    /// Verifies an assertion (`generateAssertion(_:clientDataHash:)`), following Apple's steps.
    ///
    /// The caller still checks step 6, the challenge inside `clientData`, and stores the returned
    /// counter.
    ///
    /// - Parameters:
    ///   - assertion: The bytes the app sent: CBOR `{signature, authenticatorData}`.
    ///   - clientData: The request data the app hashed; its SHA-256 is the clientDataHash.
    ///   - publicKey: The key from ``verifyAttestation(_:keyId:clientDataHash:at:)``.
    ///   - appId: The App ID the key was attested for.
    ///   - previousCounter: The counter of the last accepted assertion (0 after attestation).
    /// - Returns: The assertion's counter, to store.
    /// - Throws: ``WebAuthnError/invalidSignature`` (other client data, another key),
    ///   ``WebAuthnError/rpIdMismatch``, ``WebAuthnError/replayedAssertion`` (a counter not above
    ///   `previousCounter`), ``WebAuthnError/malformedCBOR`` or
    ///   ``WebAuthnError/malformedAuthenticatorData``.
    public func verifyAssertion(
        _ assertion: Data, clientData: Data, publicKey: P256PublicKey, appId: String, previousCounter: UInt32
    ) throws -> UInt32 {
        guard let map = try CBOR(decoding: assertion).mapValue, map.count == 2,
            let signature = map[text: "signature"]?.bytesValue,
            let authenticatorData = map[text: "authenticatorData"]?.bytesValue
        else { throw WebAuthnError.malformedCBOR.with("an assertion is {signature, authenticatorData}") }
        // App Attest assertions set AT (flags 0x40) without carrying attested credential data, so
        // they are not WebAuthn authenticator data: only the RP ID hash and the counter are read.
        // Whatever follows is covered by the signature, so it cannot change without the key.
        guard authenticatorData.count >= 37 else {
            throw WebAuthnError.malformedAuthenticatorData.with("\(authenticatorData.count) bytes, 37 needed")
        }
        let bytes = [UInt8](authenticatorData)
        let rpIdHash = Data(bytes[0..<32])
        let counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        // Step 1. clientDataHash = SHA-256(clientData).
        let clientDataHash = Digest.sha256(clientData)
        // Step 2. nonce = SHA-256(authenticatorData ‖ clientDataHash).
        let nonce = Digest.sha256(authenticatorData + clientDataHash)
        // Step 3. The signature is valid for nonce: ECDSA-SHA-256 with nonce as the message.
        guard let parsed = try? P256Signature(derRepresentation: signature),
            publicKey.isValidSignature(parsed, for: nonce)
        else { throw WebAuthnError.invalidSignature.with("the assertion signature does not verify") }
        // Step 4. The RP ID hash is SHA-256 of the App ID.
        guard rpIdHash == Digest.sha256(Data(appId.utf8)) else {
            throw WebAuthnError.rpIdMismatch.with("the assertion is for another App ID")
        }
        // Step 5. The counter is above the last one.
        guard counter > previousCounter else {
            throw WebAuthnError.replayedAssertion.with("counter \(counter) after \(previousCounter)")
        }
        return counter
    }
}
