import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire

/// A certificate authority for App Attest tests, shaped like Apple's: a self-signed root, an
/// intermediate, and per attestation a leaf that certifies the App Attest key and carries the
/// nonce in extension 1.2.840.113635.100.8.2. Tests configure ``root`` where a server would trust
/// Apple's App Attestation Root CA. The certificates are DER built here and signed with ECDSA
/// P-256 SHA-256, so nothing but KeyboundCrypto is needed.
package struct TestAppAttestCA: Sendable {
    private let rootKey: P256SigningKey
    private let intermediateKey: P256SigningKey
    /// The root, to configure as the trusted App Attest root.
    package let root: Certificate
    /// The intermediate, the second certificate of every `x5c`.
    package let intermediate: Data

    /// A new CA whose certificates are valid from a day before `now` for ten years.
    package init(now: Date) throws {
        rootKey = try P256SigningKey()
        intermediateKey = try P256SigningKey()
        let rootDER = try DER.certificate(
            serial: 1, issuer: "Keybound Test App Attestation Root CA",
            subject: "Keybound Test App Attestation Root CA",
            publicKey: rootKey.publicKey, notBefore: now - 86_400, notAfter: now + 10 * 365 * 86_400,
            extensions: DER.caExtensions, signer: rootKey)
        root = try Certificate(derRepresentation: rootDER)
        intermediate = try DER.certificate(
            serial: 2, issuer: "Keybound Test App Attestation Root CA",
            subject: "Keybound Test App Attestation CA 1",
            publicKey: intermediateKey.publicKey, notBefore: now - 86_400, notAfter: now + 10 * 365 * 86_400,
            extensions: DER.caExtensions, signer: rootKey)
    }

    /// A leaf certifying `key` with `nonce` in Apple's nonce extension, valid from `notBefore`
    /// to `notAfter` (Apple's leaves live three days).
    package func leaf(for key: P256PublicKey, nonce: Data, notBefore: Date, notAfter: Date) throws -> Data {
        // SEQUENCE { [1] EXPLICIT OCTET STRING nonce }, as Apple writes it.
        let nonceValue = DER.sequence([DER.tagged(0xA1, DER.octetString(nonce))])
        return try DER.certificate(
            serial: Int64.random(in: 3...Int64.max), issuer: "Keybound Test App Attestation CA 1",
            subject: Hex.encode(Digest.sha256(key.x963Representation)), publicKey: key, notBefore: notBefore,
            notAfter: notAfter,
            extensions: [
                DER.extension(
                    oid: "2.5.29.15", critical: true, value: DER.bitString(Data([0x80]), unusedBits: 7)),
                DER.extension(oid: "1.2.840.113635.100.8.2", critical: false, value: nonceValue),
            ], signer: intermediateKey)
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

    /// The AAGUID App Attest writes for an environment.
    package static func aaguid(_ environment: AppAttest.Environment) -> Data {
        environment == .development ? Data("appattestdevelop".utf8) : Data("appattest".utf8) + Data(count: 7)
    }

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
                Self.aaguid(environment), keyID ?? self.keyID, CredentialPublicKey(key.publicKey)
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

/// Just enough DER to write X.509 v3 certificates with P-256 keys.
private enum DER {
    static func item(_ tag: UInt8, _ content: Data) -> Data {
        var out = Data([tag])
        let count = content.count
        if count < 0x80 {
            out.append(UInt8(count))
        } else {
            let bytes = withUnsafeBytes(of: UInt32(count).bigEndian) { Data($0) }.drop { $0 == 0 }
            out.append(0x80 | UInt8(bytes.count))
            out.append(contentsOf: bytes)
        }
        return out + content
    }

    static func sequence(_ items: [Data]) -> Data { item(0x30, items.reduce(Data(), +)) }
    static func set(_ items: [Data]) -> Data { item(0x31, items.reduce(Data(), +)) }
    static func tagged(_ tag: UInt8, _ content: Data) -> Data { item(tag, content) }
    static func octetString(_ bytes: Data) -> Data { item(0x04, bytes) }
    static func bitString(_ bytes: Data, unusedBits: UInt8 = 0) -> Data {
        item(0x03, Data([unusedBits]) + bytes)
    }
    static func boolean(_ value: Bool) -> Data { item(0x01, Data([value ? 0xFF : 0x00])) }

    static func integer(_ value: Int64) -> Data {
        var bytes = withUnsafeBytes(of: value.bigEndian) { Data($0) }
        while bytes.count > 1, bytes[bytes.startIndex] == 0, bytes[bytes.startIndex + 1] < 0x80 {
            bytes = bytes.dropFirst()
        }
        return item(0x02, Data(bytes))
    }

    static func oid(_ dotted: String) -> Data {
        let parts = dotted.split(separator: ".").compactMap { UInt64($0) }
        var out = Data([UInt8(parts[0] * 40 + parts[1])])
        for part in parts.dropFirst(2) {
            var chunk = [UInt8(part & 0x7F)]
            var rest = part >> 7
            while rest > 0 {
                chunk.insert(UInt8(rest & 0x7F) | 0x80, at: 0)
                rest >>= 7
            }
            out.append(contentsOf: chunk)
        }
        return item(0x06, out)
    }

    static func time(_ date: Date) -> Data {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyMMddHHmmss'Z'"
        return item(0x17, Data(formatter.string(from: date).utf8))
    }

    static func name(_ commonName: String) -> Data {
        sequence([set([sequence([oid("2.5.4.3"), item(0x0C, Data(commonName.utf8))])])])
    }

    static func `extension`(oid id: String, critical: Bool, value: Data) -> Data {
        sequence([oid(id)] + (critical ? [boolean(true)] : []) + [octetString(value)])
    }

    /// basicConstraints cA and keyUsage keyCertSign + cRLSign, both critical.
    static let caExtensions = [
        `extension`(oid: "2.5.29.19", critical: true, value: sequence([boolean(true)])),
        `extension`(oid: "2.5.29.15", critical: true, value: bitString(Data([0x06]), unusedBits: 1)),
    ]

    static func certificate(
        serial: Int64, issuer: String, subject: String, publicKey: P256PublicKey, notBefore: Date,
        notAfter: Date,
        extensions: [Data], signer: P256SigningKey
    ) throws -> Data {
        let ecdsaWithSHA256 = sequence([oid("1.2.840.10045.4.3.2")])
        let tbs = sequence([
            tagged(0xA0, integer(2)), integer(serial), ecdsaWithSHA256, name(issuer),
            sequence([time(notBefore), time(notAfter)]), name(subject), publicKey.spkiDER,
            tagged(0xA3, sequence(extensions)),
        ])
        let signature = try signer.signature(for: tbs).derRepresentation
        return sequence([tbs, ecdsaWithSHA256, bitString(signature)])
    }
}
