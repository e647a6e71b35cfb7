import Foundation
import Keybound
import KeyboundCrypto
import KeyboundWebAuthn

/// The emulator's stand-in for Apple's App Attestation CA: a test root and an intermediate
/// that issue the leaf certificate of every emulated App Attest attestation.
///
/// Made once per test (or demo) and shared by every ``EmulatedAppAttestService`` in it, as
/// Apple's one CA serves every device and app: a server configured with ``rootCertificate`` as
/// its App Attest root then refuses an attestation for the reasons a real one would (another app
/// id, another environment), never merely because it came from another test CA.
///
/// The certificates are written here in DER and signed with KeyboundCrypto's P-256 keys, so
/// nothing is shipped and no private key of a CA exists outside the process. The root and the
/// intermediate are valid from a day before they were made for ten years; leaves, like
/// Apple's, for three days.
///
/// ```swift
/// let authority = try EmulatedAppAttestAuthority()
/// let appAttest = try EmulatedAppAttestService(device: phone, appID: "TEAMID1234.com.acme.bank",
///                                              authority: authority)
/// configuration.appAttestRoots = [authority.rootCertificate]   // the server under test
/// ```
public final class EmulatedAppAttestAuthority: Sendable {
    /// The root certificate: the App Attest trust anchor of a server under test.
    public let rootCertificate: Certificate
    /// The intermediate's certificate (DER), sent in every attestation after the leaf.
    package let intermediateCertificate: Data
    /// The intermediate's signing key. A software key: it stands for Apple's CA, not the device.
    private let intermediateKey: P256SigningKey
    private let clock: Clock
    private let random: RandomSource

    private static let intermediateName = "Keybound Emulated App Attestation CA 1"
    /// Apple's leaves live three days.
    static let leafLifetime: TimeInterval = 3 * 24 * 3600
    private static let caLifetime: TimeInterval = 10 * 365 * 24 * 3600

    /// Makes a new root and intermediate.
    ///
    /// - Parameters:
    ///   - clock: the time certificates are issued at (a test's manual clock keeps them valid at
    ///     the server's time).
    ///   - random: serial numbers.
    /// - Throws: ``KeyboundError/unexpected`` when the crypto library fails.
    public init(clock: Clock = .system, random: RandomSource = .system) throws {
        self.clock = clock
        self.random = random
        do {
            let rootKey = try P256SigningKey()
            let rootName = X509.name(commonName: "Keybound Emulated App Attestation Root CA")
            let intermediateName = X509.name(commonName: Self.intermediateName)
            let now = clock.now()
            let validity = (now.addingTimeInterval(-24 * 3600), now.addingTimeInterval(Self.caLifetime))
            rootCertificate = try Certificate(
                derRepresentation: try X509.certificate(
                    serial: random.bytes(16), issuer: rootName, subject: rootName, validity: validity,
                    publicKey: rootKey.publicKey, extensions: X509.caExtensions, signer: rootKey))
            intermediateKey = try P256SigningKey()
            intermediateCertificate = try X509.certificate(
                serial: random.bytes(16), issuer: rootName, subject: intermediateName, validity: validity,
                publicKey: intermediateKey.publicKey, extensions: X509.caExtensions, signer: rootKey)
        } catch {
            throw KeyboundError(.unexpected, message: "cannot make the emulated App Attest CA: \(error)")
        }
    }

    /// The root certificate in PEM, for a server's configuration file.
    public var rootCertificatePEM: String {
        let base64 = rootCertificate.derRepresentation.base64EncodedString(options: [.lineLength64Characters])
        return "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
    }

    /// The leaf certificate of one attestation, issued now for Apple's three days.
    func leaf(for publicKey: P256PublicKey, nonce: Data) throws -> Data {
        let now = clock.now()
        return try leaf(for: publicKey, nonce: nonce, notBefore: now - 60, notAfter: now + Self.leafLifetime)
    }

    /// The leaf certificate of one attestation: `publicKey` certified, `nonce` in Apple's
    /// extension 1.2.840.113635.100.8.2, the key id (SHA-256 of the point, hex) as its common name,
    /// as Apple's. Server tests choose the validity to prove expiry.
    package func leaf(for publicKey: P256PublicKey, nonce: Data, notBefore: Date, notAfter: Date) throws
        -> Data
    {
        // The nonce extension's value: SEQUENCE { [1] EXPLICIT OCTET STRING nonce }.
        let nonceValue = DER.sequence([DER.tagged(1, DER.octetString(nonce))])
        return try X509.certificate(
            serial: random.bytes(16), issuer: X509.name(commonName: Self.intermediateName),
            subject: X509.name(commonName: Hex.encode(Digest.sha256(publicKey.x963Representation))),
            validity: (notBefore, notAfter), publicKey: publicKey,
            extensions: [
                X509.extensionEntry(X509.keyUsageOID, critical: true, DER.bitString([0x80], unusedBits: 7)),
                X509.extensionEntry(X509.appleNonceOID, critical: false, nonceValue),
            ],
            signer: intermediateKey)
    }
}

/// The few X.509 v3 structures the test CA writes (RFC 5280), ECDSA with SHA-256 throughout.
private enum X509 {
    static let ecdsaWithSHA256 = "1.2.840.10045.4.3.2"
    static let commonNameOID = "2.5.4.3"
    static let basicConstraintsOID = "2.5.29.19"
    static let keyUsageOID = "2.5.29.15"
    static let appleNonceOID = "1.2.840.113635.100.8.2"

    /// basicConstraints cA, keyUsage keyCertSign and cRLSign: what a verifier asks of an issuer.
    static let caExtensions = [
        extensionEntry(basicConstraintsOID, critical: true, DER.sequence([DER.boolean(true)])),
        extensionEntry(keyUsageOID, critical: true, DER.bitString([0x06], unusedBits: 1)),
    ]

    static func name(commonName: String) -> [UInt8] {
        DER.sequence([
            DER.set([DER.sequence([DER.objectIdentifier(commonNameOID), DER.utf8String(commonName)])])
        ])
    }

    static func extensionEntry(_ oid: String, critical: Bool, _ value: [UInt8]) -> [UInt8] {
        DER.sequence(
            [DER.objectIdentifier(oid)] + (critical ? [DER.boolean(true)] : []) + [
                DER.octetString(Data(value))
            ])
    }

    static func certificate(
        serial: Data, issuer: [UInt8], subject: [UInt8], validity: (Date, Date), publicKey: P256PublicKey,
        extensions: [[UInt8]], signer: P256SigningKey
    ) throws -> Data {
        let algorithm = DER.sequence([DER.objectIdentifier(ecdsaWithSHA256)])
        let tbs = DER.sequence([
            DER.tagged(0, DER.integer([2])),  // version 3
            DER.integer([0x01] + serial),  // positive, and not zero-padded
            algorithm, issuer,
            DER.sequence([DER.time(validity.0), DER.time(validity.1)]),
            subject, [UInt8](publicKey.spkiDER),
            DER.tagged(3, DER.sequence(extensions)),
        ])
        let signature = try signer.signature(for: Data(tbs)).derRepresentation
        return Data(DER.sequence([tbs, algorithm, DER.bitString([UInt8](signature), unusedBits: 0)]))
    }
}

/// DER encoding (X.690) of the universal types a certificate needs.
private enum DER {
    static func item(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var length: [UInt8]
        if content.count < 0x80 {
            length = [UInt8(content.count)]
        } else {
            var count = content.count
            length = []
            while count > 0 {
                length.insert(UInt8(count & 0xFF), at: 0)
                count >>= 8
            }
            length.insert(0x80 | UInt8(length.count), at: 0)
        }
        return [tag] + length + content
    }

    static func sequence(_ items: [[UInt8]]) -> [UInt8] { item(0x30, items.flatMap { $0 }) }
    static func set(_ items: [[UInt8]]) -> [UInt8] { item(0x31, items.flatMap { $0 }) }
    static func boolean(_ value: Bool) -> [UInt8] { item(0x01, [value ? 0xFF : 0x00]) }
    /// A non-negative INTEGER whose first byte has its top bit clear.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] { item(0x02, magnitude) }
    static func octetString(_ bytes: Data) -> [UInt8] { item(0x04, [UInt8](bytes)) }
    static func utf8String(_ text: String) -> [UInt8] { item(0x0C, Array(text.utf8)) }
    static func bitString(_ bytes: [UInt8], unusedBits: UInt8) -> [UInt8] { item(0x03, [unusedBits] + bytes) }
    /// `[number] EXPLICIT`, constructed.
    static func tagged(_ number: UInt8, _ inner: [UInt8]) -> [UInt8] { item(0xA0 | number, inner) }

    static func objectIdentifier(_ dotted: String) -> [UInt8] {
        let arcs = dotted.split(separator: ".").compactMap { UInt64($0) }
        var content = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var base128 = [UInt8(arc & 0x7F)]
            var rest = arc >> 7
            while rest > 0 {
                base128.insert(UInt8(rest & 0x7F) | 0x80, at: 0)
                rest >>= 7
            }
            content += base128
        }
        return item(0x06, content)
    }

    /// UTCTime through 2049, GeneralizedTime after, as RFC 5280 §4.1.2.5 requires.
    static func time(_ date: Date) -> [UInt8] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let year = parts.year ?? 1970
        let rest = [parts.month, parts.day, parts.hour, parts.minute, parts.second]
            .map { String(format: "%02d", $0 ?? 0) }.joined()
        if year < 2050 {
            return item(0x17, Array((String(format: "%02d", year % 100) + rest + "Z").utf8))
        }
        return item(0x18, Array((String(format: "%04d", year) + rest + "Z").utf8))
    }
}
