import Foundation
import KeyboundCrypto
import KeyboundWire

/// The challenge of a passkey ceremony, which the server issues without storing it, like a
/// device-login challenge (``LoginChallenge``): issuing options writes nothing, so nobody can grow
/// the database by asking for them.
///
/// The challenge bytes carry the ceremony itself — its purpose, expiry, the account and session
/// it is for, the client its session will belong to — with an HMAC-SHA-256 tag over them and the
/// server id, under the server's challenge key (``ServerSecrets``, shared by every instance on the
/// database; a label of its own keeps a passkey tag from meaning a login-challenge one). The
/// authenticator signs them inside `clientDataJSON`, which is how the verify request names its
/// ceremony. Bytes whose tag does not verify were not issued here; a valid challenge is used once:
/// using it inserts ``usedID`` into `used_challenges` (unique key), in the transaction that
/// creates what the ceremony creates, or, after a refused attempt, in one of its own.
///
/// Layout: version (1 byte, 1) ‖ purpose (1: 1 register, 2 login) ‖ expiry (8 bytes, seconds since
/// 1970, big-endian) ‖ nonce (16) ‖ user id, username, session id, client id (each one length byte,
/// 0 for none, else 1 + the UTF-8 length, then the bytes) ‖ tag (32).
///
/// Nothing in it is secret: it names only what the caller sent or is (the username asked for,
/// the signed-in session), and a sign-up's new account id. A login challenge never says whether
/// the username it expects exists.
struct PasskeyChallenge: Equatable {
    enum Purpose: UInt8 {
        case register = 1
        case login = 2
    }

    let purpose: Purpose
    /// When the ceremony stops being accepted, in whole seconds since 1970.
    let expiresSeconds: Int64
    /// Registration: the account the passkey is for (new, for a sign-up). Login: nil.
    let userID: String?
    /// Registration: the account's username. Login: the username the caller named, if any: then
    /// only that user's passkey may answer.
    let username: String?
    /// Adding a passkey to an account: the session that asked for it.
    let sessionID: String?
    /// The client the session the ceremony opens belongs to.
    let clientID: String
    /// The bytes the authenticator signs (in `clientDataJSON.challenge`).
    let bytes: Data

    private static let version: UInt8 = 1
    private static let nonceLength = 16
    /// Past this many bytes, no challenge of ours: four fields of at most 128 bytes and the rest.
    private static let maximumLength = 1 + 1 + 8 + nonceLength + 4 * (1 + 128) + HMACSHA256.byteCount

    /// When the ceremony stops being accepted.
    var expiresAt: Date { Date(milliseconds: expiresSeconds * 1000) }

    /// The key that marks this challenge used in `used_challenges`, beside the device-login ids
    /// (`chl_…`): its tag, which no two challenges share.
    var usedID: String { "pkc_" + Base64URL.encode(bytes.suffix(HMACSHA256.byteCount)) }

    /// Issues a new challenge that expires at `expires` (its fraction of a second dropped).
    /// - Precondition: each field is at most 128 bytes of UTF-8 (identifiers, usernames and client
    ///   ids are, by their grammars).
    /// - Throws: ``CryptoError`` when HMAC fails.
    init(
        purpose: Purpose, expires: Date, userID: String?, username: String?, sessionID: String?,
        clientID: String, server: String, key: Data
    ) throws {
        self.purpose = purpose
        expiresSeconds = expires.milliseconds / 1000
        self.userID = userID
        self.username = username
        self.sessionID = sessionID
        self.clientID = clientID
        var body = Data([Self.version, purpose.rawValue])
        body.append(contentsOf: expiresSeconds.bigEndianBytes)
        body.append(SecureRandom.bytes(Self.nonceLength))
        for field in [userID, username, sessionID, clientID] {
            guard let field else {
                body.append(0)
                continue
            }
            precondition(field.utf8.count <= 128, "a passkey challenge field is at most 128 bytes")
            body.append(UInt8(field.utf8.count + 1))
            body.append(contentsOf: field.utf8)
        }
        body.append(
            try HMACSHA256.authenticationCode(for: Self.authenticated(body, server: server), key: key))
        bytes = body
    }

    /// Reads challenge bytes (from a response's client data) and checks their tag.
    /// - Returns: nil when they are malformed or their tag does not verify under `key` for
    ///   `server`: this server never issued them.
    init?(bytes: Data, server: String, key: Data) {
        let raw = [UInt8](bytes)
        let fixed = 1 + 1 + 8 + Self.nonceLength
        guard raw.count <= Self.maximumLength, raw.count > fixed + HMACSHA256.byteCount,
            raw[0] == Self.version, let purpose = Purpose(rawValue: raw[1])
        else { return nil }
        let tagStart = raw.count - HMACSHA256.byteCount
        var fields: [String?] = []
        var index = fixed
        while fields.count < 4 {
            guard index < tagStart else { return nil }
            let length = Int(raw[index])
            index += 1
            guard length > 0 else {
                fields.append(nil)
                continue
            }
            guard index + length - 1 <= tagStart else { return nil }
            fields.append(String(decoding: raw[index..<(index + length - 1)], as: UTF8.self))
            index += length - 1
        }
        guard index == tagStart, let clientID = fields[3],
            let valid = try? HMACSHA256.isValid(
                Data(raw[tagStart...]), for: Self.authenticated(Data(raw[..<tagStart]), server: server),
                key: key),
            valid
        else { return nil }
        self.purpose = purpose
        expiresSeconds = raw[2..<10].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        userID = fields[0]
        username = fields[1]
        sessionID = fields[2]
        self.clientID = clientID
        self.bytes = bytes
    }

    /// What the tag covers: a label that keeps it from meaning anything else, the server id
    /// (length first, so no two inputs run together), and every byte before the tag.
    private static func authenticated(_ body: Data, server: String) -> Data {
        var message = Data("keybound passkey challenge".utf8)
        message.append(contentsOf: Int64(server.utf8.count).bigEndianBytes)
        message.append(contentsOf: server.utf8)
        message.append(body)
        return message
    }
}
