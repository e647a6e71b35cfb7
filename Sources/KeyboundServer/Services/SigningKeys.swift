import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire

/// A stored signing key of the issuer (table `signing_keys`): ES256, its `kid` the RFC 7638
/// thumbprint of its public key. Every instance on the database signs with the same key and
/// publishes the same set.
///
/// A key signs from `signsFrom` until a newer key's `signsFrom`; it is published from its
/// creation (so clients that cache the JWK Set learn it before they meet a token it signed) until
/// every token it signed has expired. `keybound keys rotate` adds a key that signs after
/// ``Configuration/keyPublishDelay``.
struct SigningKeyRecord {
    let kid: String
    let publicJWK: ECPublicJWK
    /// The private scalar, base64url, or `aesgcm:` and the AES-256-GCM sealed scalar
    /// (``Configuration/keyEncryptionKey``, the kid authenticated with it).
    let storedPrivateKey: String
    let createdAt: Date
    let signsFrom: Date
}

extension SigningKeyRecord: SQLRecord {
    static let columns = "kid, public_jwk, private_key, created_at, signs_from"

    init(row: inout SQLRowReader) throws {
        let kid = try row.text()
        guard let jwk = try? ECPublicJWK(json: JSON.parse(Data(try row.text().utf8))) else {
            throw DatabaseError.unexpectedType(column: 1)
        }
        self.init(
            kid: kid, publicJWK: jwk, storedPrivateKey: try row.text(), createdAt: try row.date(),
            signsFrom: try row.date())
    }
}

/// What `keybound keys list` shows of a key.
public struct SigningKeyInfo: Sendable, Hashable {
    /// The key id (its RFC 7638 thumbprint).
    public let kid: String
    /// When it was made.
    public let createdAt: Date
    /// When it starts (started) signing.
    public let signsFrom: Date
    /// When a newer key took over signing, if one has.
    public let supersededAt: Date?
    /// Whether the JWK Set publishes it now.
    public let published: Bool
    /// Whether it signs now.
    public let signing: Bool
    /// Whether its private key is sealed at rest.
    public let sealed: Bool
}

extension Application {
    private static let sealedPrefix = "aesgcm:"

    /// How long after a key stopped signing it stays published: the longest a token it signed
    /// lives, and a minute for clocks.
    var retiredKeyGrace: Int { configuration.accessTokenLifetime + 60 }

    /// Makes the first signing key when the database has none, under the migration lock so that
    /// N instances starting together make one. Checks that every stored key can be opened with
    /// the configured ``Configuration/keyEncryptionKey``, and seals, with it, the keys stored
    /// before it was set.
    /// - Throws: ``SigningKeyError`` when a sealed key cannot be opened.
    func prepareSigningKeys() throws {
        try database.migrate { connection in
            let keys = try loadSigningKeys(connection)
            guard !keys.isEmpty else {
                let now = clock.nowToTheMillisecond
                try insertSigningKey(connection, now: now, signsFrom: now)
                return
            }
            guard configuration.keyEncryptionKey != nil else { return }
            for key in keys where !key.storedPrivateKey.hasPrefix(Self.sealedPrefix) {
                try connection.execute(
                    "UPDATE signing_keys SET private_key = ? WHERE kid = ?",
                    [.text(try storedForm(try privateKey(of: key), kid: key.kid)), .text(key.kid)])
            }
        }
        for key in try database.read({ try loadSigningKeys($0) }) { _ = try privateKey(of: key) }
    }

    /// How a private key is stored: sealed under ``Configuration/keyEncryptionKey`` (the kid
    /// authenticated with it) when that is set, else as it is.
    private func storedForm(_ key: P256SigningKey, kid: String) throws -> String {
        guard let sealing = configuration.keyEncryptionKey else {
            return Base64URL.encode(key.rawRepresentation)
        }
        return Self.sealedPrefix
            + Base64URL.encode(
                try AES256GCM.seal(key.rawRepresentation, key: sealing, authenticating: Data(kid.utf8)))
    }

    /// Adds a key that signs from ``Configuration/keyPublishDelay`` on (`keybound keys rotate`).
    /// - Returns: its id.
    func rotateSigningKey() throws -> String {
        let now = clock.nowToTheMillisecond
        return try database.write { connection in
            try insertSigningKey(
                connection, now: now, signsFrom: now.adding(seconds: configuration.keyPublishDelay))
        }
    }

    @discardableResult
    private func insertSigningKey(_ connection: any SQLConnection, now: Date, signsFrom: Date) throws
        -> String
    {
        let key = try P256SigningKey()
        var jwk = try ECPublicJWK(x963: key.publicKey.x963Representation, alg: ES256.name, use: "sig")
        let kid = jwk.thumbprint
        jwk.kid = kid
        let stored = try storedForm(key, kid: kid)
        try connection.execute(
            "INSERT INTO signing_keys (kid, public_jwk, private_key, created_at, signs_from) VALUES (?, ?, ?, ?, ?)",
            [
                .text(kid), .text(String(decoding: JSON.serialize(jwk.json), as: UTF8.self)), .text(stored),
                .date(now), .date(signsFrom),
            ])
        return kid
    }

    /// Every stored key, newest first by the time it signs from.
    func loadSigningKeys(_ connection: any SQLConnection) throws -> [SigningKeyRecord] {
        try connection.query(
            SigningKeyRecord.self,
            "SELECT \(SigningKeyRecord.columns) FROM signing_keys ORDER BY signs_from DESC, kid", [])
    }

    /// The key that signs at `now`: of those whose time has come, the newest. Read on
    /// `connection` when given (a transaction that signs what it writes), else on a reader.
    func currentSigningKey(at now: Date, on connection: (any SQLConnection)? = nil) throws
        -> (kid: String, key: P256SigningKey)
    {
        let keys = try connection.map { try loadSigningKeys($0) } ?? database.read { try loadSigningKeys($0) }
        guard let current = keys.first(where: { $0.signsFrom <= now }) ?? keys.last else {
            throw DatabaseError.engine(code: 0, message: "no signing key")
        }
        return (current.kid, try privateKey(of: current))
    }

    /// The keys the JWK Set publishes at `now`: those not signing yet, the one signing, and those
    /// that stopped signing less than ``retiredKeyGrace`` ago.
    func publishedSigningKeys(at now: Date) throws -> [SigningKeyRecord] {
        let keys = try database.read { try loadSigningKeys($0) }
        return keys.enumerated().filter { index, _ in
            Self.isPublished(keys, index, now, grace: retiredKeyGrace)
        }
        .map(\.element)
    }

    /// Whether `keys[index]` (newest first) is published at `now`.
    private static func isPublished(_ keys: [SigningKeyRecord], _ index: Int, _ now: Date, grace: Int) -> Bool
    {
        // The newest older-than-it key that signs by now, if any, took over from it then.
        guard let successor = keys[..<index].last(where: { $0.signsFrom <= now }) else { return true }
        return now < successor.signsFrom.adding(seconds: grace)
    }

    /// What `keybound keys list` shows.
    func signingKeyInfos() throws -> [SigningKeyInfo] {
        let now = clock.nowToTheMillisecond
        let keys = try database.read { try loadSigningKeys($0) }
        let signing = keys.first { $0.signsFrom <= now }?.kid
        return keys.enumerated().map { index, key in
            SigningKeyInfo(
                kid: key.kid, createdAt: key.createdAt, signsFrom: key.signsFrom,
                supersededAt: keys[..<index].last(where: { $0.signsFrom <= now })?.signsFrom,
                published: Self.isPublished(keys, index, now, grace: retiredKeyGrace),
                signing: key.kid == signing,
                sealed: key.storedPrivateKey.hasPrefix(Self.sealedPrefix))
        }
    }

    /// The private key of a stored key, opened (and kept, parsed, for the next token).
    /// - Throws: ``SigningKeyError`` when it is sealed and ``Configuration/keyEncryptionKey`` is
    ///   not the key that sealed it (or is missing).
    private func privateKey(of record: SigningKeyRecord) throws -> P256SigningKey {
        if let key = signingKeyCache.withLock({ $0[record.kid] }) { return key }
        var scalar: Data?
        if record.storedPrivateKey.hasPrefix(Self.sealedPrefix) {
            guard let sealing = configuration.keyEncryptionKey else {
                throw SigningKeyError("signing key \(record.kid) is sealed: set KEYBOUND_KEY_ENCRYPTION_KEY")
            }
            do {
                scalar = try Base64URL.decode(
                    String(record.storedPrivateKey.dropFirst(Self.sealedPrefix.count))
                )
                .map { try AES256GCM.open($0, key: sealing, authenticating: Data(record.kid.utf8)) }
            } catch {
                throw SigningKeyError(
                    "signing key \(record.kid) does not open with KEYBOUND_KEY_ENCRYPTION_KEY: not the key that sealed it"
                )
            }
        } else {
            scalar = Base64URL.decode(record.storedPrivateKey)
        }
        guard let scalar else { throw DatabaseError.unexpectedType(column: 2) }
        let key = try P256SigningKey(rawRepresentation: scalar)
        signingKeyCache.withLock { $0[record.kid] = key }
        return key
    }

    /// Signs a JWT: header `alg: ES256`, `typ`, and the current key's `kid` (read on
    /// `connection` when given).
    /// - Returns: the compact JWS.
    func signJWT(type: String, claims: JSONValue, at now: Date, on connection: (any SQLConnection)? = nil)
        throws -> String
    {
        let (kid, key) = try currentSigningKey(at: now, on: connection)
        let header = JSONValue.object([
            JSONMember("alg", .string(ES256.name)), JSONMember("typ", .string(type)),
            JSONMember("kid", .string(kid)),
        ])
        return try ES256.sign(header: header, payload: JSON.serialize(claims), with: key)
    }
}

/// A stored signing key that cannot be used with this configuration.
struct SigningKeyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
