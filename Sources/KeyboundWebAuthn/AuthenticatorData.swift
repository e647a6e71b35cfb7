import Foundation

/// Authenticator data (WebAuthn §6.1): what the authenticator signs about itself.
///
/// `rpIdHash` (32 bytes), `flags` (1), `signCount` (4, big-endian), then attested credential data
/// when AT is set (AAGUID, a 2-byte length, the credential id, the COSE_Key) and an extensions map
/// when ED is set. Parsing is strict: nothing may follow what the flags announce — except in
/// App Attest, see ``init(_:allowingUnflaggedExtensions:)``.
public struct AuthenticatorData: Sendable, Hashable {
    /// The flags byte (WebAuthn §6.1).
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The flags byte.
        public let rawValue: UInt8
        /// Creates flags from the byte.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// UP: the user was present.
        public static let userPresent = Flags(rawValue: 0x01)
        /// UV: the user was verified (biometrics, PIN).
        public static let userVerified = Flags(rawValue: 0x04)
        /// BE: the credential may be backed up (a synced passkey).
        public static let backupEligible = Flags(rawValue: 0x08)
        /// BS: the credential is backed up now.
        public static let backedUp = Flags(rawValue: 0x10)
        /// AT: attested credential data follows.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// ED: an extensions map follows.
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// The attested credential data (WebAuthn §6.5.2), present at registration.
    public struct AttestedCredentialData: Sendable, Hashable {
        /// The authenticator model's AAGUID, 16 bytes.
        public let aaguid: Data
        /// The credential id, as long as the authenticator made it (WebAuthn caps it at 1023).
        public let credentialId: Data
        /// The credential public key.
        public let publicKey: CredentialPublicKey
    }

    /// The exact bytes parsed: what signatures cover.
    public let rawValue: Data
    /// SHA-256 of the RP ID (for App Attest, of the App ID).
    public let rpIdHash: Data
    /// The flags.
    public let flags: Flags
    /// The signature counter; 0 for authenticators that do not keep one.
    public let signCount: UInt32
    /// Present when ``Flags/attestedCredentialData`` is set.
    public let attestedCredentialData: AttestedCredentialData?
    /// The authenticator extension outputs, when present.
    public let extensions: CBORMap?

    /// The longest credential id WebAuthn allows (§6.5.2 and §7.1).
    public static let maximumCredentialIdLength = 1023

    /// Parses authenticator data.
    ///
    /// - Parameters:
    ///   - data: The bytes as the authenticator produced them.
    ///   - allowingUnflaggedExtensions: App Attest only. Apple's own 2026 sample carries a CBOR
    ///     map after the credential key without setting ED; with this set, such a map is read as
    ///     the extensions. WebAuthn callers leave it `false`, so trailing bytes are refused.
    /// - Throws: ``WebAuthnError/malformedAuthenticatorData`` when the structure is broken,
    ///   ``WebAuthnError/malformedCBOR`` or the COSE key's errors from
    ///   ``CredentialPublicKey/init(coseKey:)`` when an embedded item is.
    public init(_ data: Data, allowingUnflaggedExtensions: Bool = false) throws {
        let bytes = [UInt8](data)
        guard bytes.count >= 37 else {
            throw WebAuthnError.malformedAuthenticatorData.with("\(bytes.count) bytes, at least 37 needed")
        }
        rawValue = Data(bytes)
        rpIdHash = Data(bytes[0..<32])
        flags = Flags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        var offset = 37
        if flags.contains(.attestedCredentialData) {
            guard bytes.count - offset >= 18 else {
                throw WebAuthnError.malformedAuthenticatorData.with("attested credential data truncated")
            }
            let aaguid = Data(bytes[offset..<offset + 16])
            let length = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
            offset += 18
            guard bytes.count - offset >= length else {
                throw WebAuthnError.malformedAuthenticatorData.with("credential id truncated")
            }
            let credentialId = Data(bytes[offset..<offset + length])
            offset += length
            var reader = CBORReader(bytes: bytes, offset: offset)
            let key = try CredentialPublicKey(cose: reader.readItem())
            offset = reader.offset
            attestedCredentialData = AttestedCredentialData(
                aaguid: aaguid, credentialId: credentialId, publicKey: key)
        } else {
            attestedCredentialData = nil
        }
        if flags.contains(.extensionData) || (allowingUnflaggedExtensions && offset < bytes.count) {
            var reader = CBORReader(bytes: bytes, offset: offset)
            guard let map = try reader.readItem().mapValue else {
                throw WebAuthnError.malformedAuthenticatorData.with("extensions are not a map")
            }
            offset = reader.offset
            extensions = map
        } else {
            extensions = nil
        }
        guard offset == bytes.count else {
            throw WebAuthnError.malformedAuthenticatorData.with("\(bytes.count - offset) bytes left over")
        }
    }

    /// Authenticator data from its parts, as an authenticator produces it (for emulators).
    ///
    /// - Parameters:
    ///   - rpIdHash: SHA-256 of the RP ID, 32 bytes.
    ///   - flags: The flags; AT and ED are set from the other arguments.
    ///   - signCount: The signature counter.
    ///   - attestedCredential: AAGUID (16 bytes), credential id and key, for registrations.
    ///   - extensions: Authenticator extension outputs, if any.
    /// - Throws: ``WebAuthnError/malformedAuthenticatorData`` for a wrong hash or AAGUID size or a
    ///   credential id over 65535 bytes.
    public init(
        rpIdHash: Data, flags: Flags, signCount: UInt32,
        attestedCredential: (aaguid: Data, credentialId: Data, publicKey: CredentialPublicKey)? = nil,
        extensions: CBORMap? = nil
    ) throws {
        guard rpIdHash.count == 32 else {
            throw WebAuthnError.malformedAuthenticatorData.with("rpIdHash is 32 bytes")
        }
        var flags = flags.subtracting([.attestedCredentialData, .extensionData])
        var bytes = [UInt8](rpIdHash)
        var tail: [UInt8] = []
        if let credential = attestedCredential {
            guard credential.aaguid.count == 16, credential.credentialId.count <= 0xFFFF else {
                throw WebAuthnError.malformedAuthenticatorData.with(
                    "AAGUID is 16 bytes, a credential id at most 65535")
            }
            flags.insert(.attestedCredentialData)
            let length = credential.credentialId.count
            tail += credential.aaguid + [UInt8(length >> 8), UInt8(length & 0xFF)] + credential.credentialId
            tail += credential.publicKey.coseKey
        }
        if let extensions {
            flags.insert(.extensionData)
            tail += CBOR.map(extensions).encoded()
        }
        bytes.append(flags.rawValue)
        bytes += (0..<4).reversed().map { UInt8(truncatingIfNeeded: signCount >> (8 * UInt32($0))) }
        try self.init(Data(bytes + tail))
    }
}
