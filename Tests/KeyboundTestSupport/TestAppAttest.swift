import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundWebAuthn
import KeyboundWire

/// A certificate authority for App Attest tests, shaped like Apple's: the emulator's
/// ``EmulatedAppAttestAuthority`` (a self-signed root, an intermediate, and per attestation a leaf
/// that certifies the App Attest key and carries the nonce in extension 1.2.840.113635.100.8.2),
/// with the leaf's validity in the test's hands. Tests configure ``root`` where a server would
/// trust Apple's App Attestation Root CA.
package struct TestAppAttestCA: Sendable {
    private let authority: EmulatedAppAttestAuthority
    /// The root, to configure as the trusted App Attest root.
    package var root: Certificate { authority.rootCertificate }
    /// The intermediate, the second certificate of every `x5c`.
    package var intermediate: Data { authority.intermediateCertificate }

    /// A new CA whose certificates are valid from a day before `now` for ten years.
    package init(now: Date) throws {
        authority = try EmulatedAppAttestAuthority(clock: Clock { now })
    }

    /// A leaf certifying `key` with `nonce` in Apple's nonce extension, valid from `notBefore`
    /// to `notAfter` (Apple's leaves live three days).
    package func leaf(for key: P256PublicKey, nonce: Data, notBefore: Date, notAfter: Date) throws -> Data {
        try authority.leaf(for: key, nonce: nonce, notBefore: notBefore, notAfter: notAfter)
    }
}

/// An App Attest key as `DCAppAttestService` keeps one: it attests itself under a
/// ``TestAppAttestCA`` and signs assertions with a counter.
package struct TestAppAttestKey: Sendable {
    /// The key's private part.
    package let key: P256SigningKey

    /// A new key.
    package init() throws {
        key = try P256SigningKey()
    }

    /// The key id `generateKey()` returns: SHA-256 of the uncompressed public point.
    package var keyID: Data { Digest.sha256(key.publicKey.x963Representation) }

    /// An attestation object as `attestKey(_:clientDataHash:)` returns it.
    ///
    /// - Parameters:
    ///   - keyID: the credential id written into the authenticator data (default: the key id).
    ///   - validity: the leaf's validity, by default an hour before `now` to three days after.
    package func attestation(
        ca: TestAppAttestCA, appID: String, environment: AppAttest.Environment, clientDataHash: Data,
        now: Date,
        keyID: Data? = nil, validity: (notBefore: Date, notAfter: Date)? = nil
    ) throws -> Data {
        let authenticatorData = try AuthenticatorData(
            rpIdHash: Digest.sha256(Data(appID.utf8)), flags: [], signCount: 0,
            attestedCredential: (
                environment.aaguid, keyID ?? self.keyID, CredentialPublicKey(key.publicKey)
            ))
        let nonce = Digest.sha256(authenticatorData.rawValue + clientDataHash)
        let leaf = try ca.leaf(
            for: key.publicKey, nonce: nonce, notBefore: validity?.notBefore ?? now - 3600,
            notAfter: validity?.notAfter ?? now + 3 * 86_400)
        return AttestationObject(
            format: "apple-appattest",
            statement: CBORMap([
                (.text("x5c"), .array([.bytes(leaf), .bytes(ca.intermediate)])),
                (.text("receipt"), .bytes(Data("test receipt".utf8))),
            ]),
            authenticatorData: authenticatorData
        ).encoded()
    }

    /// An assertion as `generateAssertion(_:clientDataHash:)` returns it for SHA-256 of
    /// `clientData`: CBOR `{signature, authenticatorData}`, the signature over
    /// SHA-256(authenticatorData ‖ SHA-256(clientData)).
    package func assertion(appID: String, clientData: Data, counter: UInt32) throws -> Data {
        let authenticatorData =
            Digest.sha256(Data(appID.utf8)) + Data([0x40])
            + Data((0..<4).reversed().map { UInt8(truncatingIfNeeded: counter >> (8 * UInt32($0))) })
        let nonce = Digest.sha256(authenticatorData + Digest.sha256(clientData))
        let signature = try key.signature(for: nonce).derRepresentation
        return CBOR.map([
            (.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authenticatorData)),
        ])
        .encoded()
    }
}
