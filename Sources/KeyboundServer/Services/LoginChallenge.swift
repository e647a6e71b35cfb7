import Foundation
import KeyboundCrypto
import KeyboundWire

/// A device-login challenge that the server issues without storing it (docs/design.md, "One
/// write per login").
///
/// Its id carries the challenge itself — device, expiry, 16 random bytes — with an HMAC-SHA-256
/// tag over them and the server id, under the server's challenge key (``ServerSecrets``: created
/// with the schema and shared by every instance on the database). The tag is also the signing
/// payload's 32-byte `challenge`, so the bytes a device signs belong to exactly one id. An id
/// whose tag does not verify was not made here and is unknown; a valid one is used once: using
/// it inserts the id into `used_challenges` (unique key) in the transaction that opens the
/// session.
///
/// The id is `chl_` and the base64url of: version (1 byte, 1) ‖ expiry (8 bytes, seconds since
/// 1970, big-endian) ‖ nonce (16) ‖ tag (32) ‖ device id (UTF-8, the rest).
struct LoginChallenge {
    /// The device that is asked to sign.
    let deviceID: String
    /// When the payload stops being accepted, in whole seconds since 1970.
    let expiresSeconds: Int64
    private let nonce: Data
    private let tag: Data

    private static let prefix = "chl_"
    private static let version: UInt8 = 1
    private static let nonceLength = 16
    private static let fixedLength = 1 + 8 + nonceLength + HMACSHA256.byteCount
    /// Device ids are at most 64 bytes (`Grammar.isIdentifier`): no real id is longer.
    static let maximumIDLength = prefix.utf8.count + ((fixedLength + 64) * 4 + 2) / 3

    /// When the payload stops being accepted.
    var expiresAt: Date { Date(milliseconds: expiresSeconds * 1000) }

    /// Issues a new challenge for `deviceID` that expires at `expires` (its fraction of a second
    /// dropped).
    /// - Throws: ``CryptoError`` when HMAC fails.
    init(deviceID: String, expires: Date, server: String, key: Data) throws {
        self.deviceID = deviceID
        expiresSeconds = expires.milliseconds / 1000
        nonce = SecureRandom.bytes(Self.nonceLength)
        tag = try HMACSHA256.authenticationCode(
            for: Self.authenticated(
                server: server, expires: expiresSeconds, nonce: nonce, deviceID: deviceID),
            key: key)
    }

    /// Reads a challenge id and checks its tag.
    /// - Returns: nil when the id is malformed or its tag does not verify under `key` for
    ///   `server`: this server never issued it.
    init?(id: String, server: String, key: Data) {
        guard id.utf8.count <= Self.maximumIDLength, id.hasPrefix(Self.prefix),
            let blob = Base64URL.decode(String(id.dropFirst(Self.prefix.count))),
            blob.count > Self.fixedLength, blob[blob.startIndex] == Self.version
        else { return nil }
        let bytes = [UInt8](blob)
        var expires: Int64 = 0
        for byte in bytes[1..<9] { expires = expires << 8 | Int64(byte) }
        let nonce = Data(bytes[9..<(9 + Self.nonceLength)])
        let tag = Data(bytes[(9 + Self.nonceLength)..<Self.fixedLength])
        let deviceID = String(decoding: bytes[Self.fixedLength...], as: UTF8.self)
        guard Grammar.isIdentifier(deviceID),
            let valid = try? HMACSHA256.isValid(
                tag,
                for: Self.authenticated(server: server, expires: expires, nonce: nonce, deviceID: deviceID),
                key: key),
            valid
        else { return nil }
        self.deviceID = deviceID
        expiresSeconds = expires
        self.nonce = nonce
        self.tag = tag
    }

    /// The id, as the client sends it back.
    var id: String {
        var blob = Data([Self.version])
        blob.append(contentsOf: expiresSeconds.bigEndianBytes)
        blob.append(nonce)
        blob.append(tag)
        blob.append(contentsOf: deviceID.utf8)
        return Self.prefix + Base64URL.encode(blob)
    }

    /// The exact bytes the device signs: a login payload whose challenge is the tag.
    func payload(server: String) throws -> SigningPayload {
        try SigningPayload(
            purpose: .login, server: server, device: deviceID, challenge: tag,
            expires: expiresAt, action: nil)
    }

    /// What the tag covers: a label that keeps it from meaning anything else, the server id
    /// (length first, so no two inputs run together), and every field of the id but the tag.
    private static func authenticated(server: String, expires: Int64, nonce: Data, deviceID: String) -> Data {
        var message = Data("keybound login challenge".utf8)
        message.append(contentsOf: Int64(server.utf8.count).bigEndianBytes)
        message.append(contentsOf: server.utf8)
        message.append(version)
        message.append(contentsOf: expires.bigEndianBytes)
        message.append(nonce)
        message.append(contentsOf: deviceID.utf8)
        return message
    }
}
