import Foundation
import KeyboundCrypto

@testable import KeyboundWebAuthn

extension Harness {
    /// Strict CBOR: shortest forms and definite lengths only, so what decodes encodes back to as
    /// many bytes (map keys may come in any order, as some authenticators send them, and
    /// ``CBOR/encoded()`` sorts them the CTAP2 way); the canonical encoding decodes to itself.
    static let cbor = Harness(
        name: "cbor", covers: "KeyboundWebAuthn CBOR(decoding:) (shortest forms only) and encoded()"
    ) { data in
        guard let item = try? CBOR(decoding: data) else { return }
        let canonical = item.encoded()
        expect(canonical.count == data.count, "CBOR decoded from a longer-than-shortest encoding")
        expect(
            (try? CBOR(decoding: canonical))?.encoded() == canonical,
            "canonical CBOR does not decode to itself")
    }

    /// Credential public keys as stored and as authenticators send them; each key that parses is
    /// used to verify.
    static let coseKey = Harness(
        name: "cose-key",
        covers: "KeyboundWebAuthn CredentialPublicKey(coseKey:): ES256, EdDSA, RS256 keys, then verification"
    ) { data in
        guard let key = try? CredentialPublicKey(coseKey: data) else { return }
        expect(key.coseKey == data, "a COSE key parsed from bytes that are not its encoding")
        for signature in WebAuthnFixture.signatures {
            _ = key.isValidSignature(signature, for: Data("fuzz".utf8))
        }
    }

    /// Authenticator data. Input: one byte (bit 0: App Attest's unflagged extensions allowed),
    /// then the bytes. Strict data that parses is rebuilt from its parts to as many bytes, and the
    /// rebuilt data parses to the same parts: not byte for byte, because the extensions' map keys
    /// may come in any order and are written back the CTAP2 way (as in ``cbor``).
    static let authenticatorData = Harness(
        name: "authenticator-data",
        covers: "KeyboundWebAuthn AuthenticatorData: flags, attested credential, COSE key, extensions"
    ) { data in
        var input = FuzzInput(data)
        let appAttest = input.byte() & 1 == 1
        let bytes = input.rest()
        guard let parsed = try? AuthenticatorData(bytes, allowingUnflaggedExtensions: appAttest) else {
            return
        }
        expect(parsed.rawValue == bytes, "authenticator data keeps other bytes than it parsed")
        guard !appAttest else { return }
        let credential = parsed.attestedCredentialData
        let rebuilt = try? AuthenticatorData(
            rpIdHash: parsed.rpIdHash, flags: parsed.flags, signCount: parsed.signCount,
            attestedCredential: credential.map { ($0.aaguid, $0.credentialId, $0.publicKey) },
            extensions: parsed.extensions)
        expect(rebuilt?.rawValue.count == bytes.count, "authenticator data does not rebuild from its parts")
        let reparsed = rebuilt.flatMap {
            try? AuthenticatorData($0.rawValue, allowingUnflaggedExtensions: false)
        }
        expect(
            reparsed?.rpIdHash == parsed.rpIdHash && reparsed?.flags == parsed.flags
                && reparsed?.signCount == parsed.signCount
                && reparsed?.extensions.map({ CBOR.map($0).encoded() })
                    == parsed.extensions.map({ CBOR.map($0).encoded() })
                && reparsed?.attestedCredentialData == parsed.attestedCredentialData,
            "rebuilt authenticator data parses to other parts")
    }

    /// `clientDataJSON` as browsers send it.
    static let clientData = Harness(
        name: "client-data", covers: "KeyboundWebAuthn CollectedClientData(json:)"
    ) { data in
        _ = (try? CollectedClientData(json: data))?.challengeBytes
    }

    /// Attestation objects and their statements (none, packed, fido-u2f, apple), verified with the
    /// vectors' roots. Input: clientDataHash (32 bytes), the time (8 bytes, seconds since 1970),
    /// the attestation object.
    static let attestationObject = Harness(
        name: "attestation-object",
        covers:
            "KeyboundWebAuthn AttestationObject: decoding, every statement format's verification, x5c chains"
    ) { data in
        var input = FuzzInput(data)
        let clientDataHash = input.take(32)
        let time = fuzzDate(&input)
        let bytes = input.rest()
        guard let object = try? AttestationObject(bytes) else { return }
        // Its map keys may come in any order; anything else longer than the shortest form is refused.
        expect(object.encoded().count == bytes.count, "an attestation object decoded from a longer encoding")
        _ = try? object.verify(
            clientDataHash: clientDataHash, trustAnchors: WebAuthnFixture.trustAnchors, at: time)
    }

    /// X.509 certificates and chains as statements carry them. Input: the time (8 bytes), then DER
    /// certificates one after another, leaf first. Each is read the ways attestation reads them,
    /// then the chain is verified against the vectors' roots.
    static let x509Chain = Harness(
        name: "x509-chain",
        covers:
            "KeyboundWebAuthn Certificate: DER parsing, extensions, subject, public key, chain verification"
    ) { data in
        var input = FuzzInput(data)
        let time = fuzzDate(&input)
        let certificates = derItems(input.rest()).compactMap { try? Certificate(derRepresentation: $0) }
        for certificate in certificates {
            if let spki = try? certificate.subjectPublicKeyInfo {
                _ = try? P256PublicKey(spkiDER: spki)
                _ = try? SignatureVerifier(spkiDER: spki, algorithm: .es256)
                _ = try? SignatureVerifier(spkiDER: spki, algorithm: .rs256)
            }
            _ = try? certificate.certificateExtension(oid: "1.3.6.1.4.1.45724.1.1.4")  // FIDO AAGUID.
            _ = try? AppleNonce.verify(in: certificate, nonce: Data(count: 32))
            _ = certificate.subjectValues(.commonName) + certificate.subjectValues(.organizationalUnit)
            _ = (certificate.isCA, certificate.isVersion3)
        }
        guard let leaf = certificates.first else { return }
        _ = try? leaf.verifyChain(
            intermediates: Array(certificates.dropFirst()), roots: WebAuthnFixture.roots, at: time)
    }

    /// App Attest attestations. Input: one byte (bit 0: development), the key id (32 bytes), the
    /// clientDataHash's length (1 byte) and bytes, the time (8 bytes), the attestation object.
    static let appAttestAttestation = Harness(
        name: "app-attest-attestation",
        covers:
            "KeyboundWebAuthn AppAttest.verifyAttestation: apple-appattest statements, nonce, chain, receipt"
    ) { data in
        var input = FuzzInput(data)
        let environment: AppAttest.Environment = input.byte() & 1 == 1 ? .development : .production
        let keyId = input.take(32)
        let clientDataHash = input.take(Int(input.byte()))
        let time = fuzzDate(&input)
        let appAttest = AppAttest(
            appIds: WebAuthnFixture.appIds, environment: environment, roots: [.appleAppAttestationRootCA])
        _ = try? appAttest.verifyAttestation(
            input.rest(), keyId: keyId, clientDataHash: clientDataHash, at: time)
    }

    /// App Attest assertions. Input: one byte choosing an attested key of the vectors, the
    /// previous counter (4 bytes), the client data's length (2 bytes) and bytes, the assertion.
    static let appAttestAssertion = Harness(
        name: "app-attest-assertion", covers: "KeyboundWebAuthn AppAttest.verifyAssertion"
    ) { data in
        var input = FuzzInput(data)
        let keys = WebAuthnFixture.appAttestKeys
        let key = keys[Int(input.byte()) % keys.count]
        let previous = input.take(4).reduce(0) { $0 << 8 | UInt32($1) }
        let clientData = input.take(input.take(2).reduce(0) { $0 << 8 | Int($1) })
        let appId = "6MURL8TA57.de.vincent-haupert.apple-appattest-poc"  // The keys' App ID.
        let appAttest = AppAttest(appIds: [appId], environment: .development)
        _ = try? appAttest.verifyAssertion(
            input.rest(), clientData: clientData, publicKey: key, appId: appId, previousCounter: previous)
    }
}

/// The DER items (tag, length, contents) one after another in `data`; what cannot be split is
/// returned whole as the last item.
private func derItems(_ data: Data) -> [Data] {
    let bytes = [UInt8](data)
    var items: [Data] = []
    var offset = 0
    while offset < bytes.count {
        guard bytes.count - offset >= 2 else { break }
        var length = Int(bytes[offset + 1])
        var header = 2
        if length >= 0x80 {
            let count = length & 0x7F
            guard (1...3).contains(count), bytes.count - offset >= 2 + count else { break }
            length = bytes[(offset + 2)..<(offset + 2 + count)].reduce(0) { $0 << 8 | Int($1) }
            header += count
        }
        guard bytes.count - offset - header >= length else { break }
        items.append(Data(bytes[offset..<(offset + header + length)]))
        offset += header + length
    }
    if offset < bytes.count { items.append(Data(bytes[offset...])) }
    return items
}
