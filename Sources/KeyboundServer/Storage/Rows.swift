import Foundation
import KeyboundWire

/// What a stored token is for.
package enum TokenKind: String, Sendable {
    /// A bearer token for API calls.
    case access
    /// A token that rotates into a new pair (`POST /v1/sessions/refresh`).
    case refresh
}

/// The one INSERT of each core table, with the column formats the server reads back (base64url
/// keys, SHA-256 hex token hashes, times as milliseconds since 1970). The services write their rows
/// through these, and so does the bench's seeder, so a seeded row is exactly a served one.
package enum Rows {
    /// Inserts a user.
    package static func insertUser(
        _ connection: any SQLConnection, id: String, username: String, passwordHash: String, createdAt: Date
    ) throws {
        try connection.execute(
            "INSERT INTO users (id, username, password_hash, created_at) VALUES (?, ?, ?, ?)",
            [.text(id), .text(username), .text(passwordHash), .date(createdAt)])
    }

    /// Inserts an active device with its P-256 public key (SubjectPublicKeyInfo DER).
    package static func insertDevice(
        _ connection: any SQLConnection, id: String, userID: String, clientID: String, name: String,
        keyProtection: KeyProtection, publicKey: Data, createdAt: Date
    ) throws {
        try connection.execute(
            """
            INSERT INTO devices (id, user_id, client_id, name, key_protection, public_key, created_at,
                last_used_at, failed_signatures, suspended_at, revoked_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 0, NULL, NULL)
            """,
            [
                .text(id), .text(userID), .text(clientID), .text(name), .text(keyProtection.rawValue),
                .text(Base64URL.encode(publicKey)), .date(createdAt),
            ])
    }

    /// Inserts a live session.
    /// - Parameters:
    ///   - authTime: when the user authenticated (default `createdAt`: a login; an OAuth code
    ///     exchange opens its session with the time of the sign-in behind the code).
    ///   - scope: the scope an OAuth client was granted; nil for a /v1 session.
    ///   - dpopJKT: the thumbprint of the DPoP key the session is bound to (RFC 9449), if any.
    package static func insertSession(
        _ connection: any SQLConnection, id: String, userID: String, clientID: String, deviceID: String?,
        method: AuthMethod, createdAt: Date, authTime: Date? = nil, scope: String? = nil,
        dpopJKT: String? = nil
    ) throws {
        try connection.executeLater(
            """
            INSERT INTO sessions (id, user_id, client_id, device_id, auth_method, auth_time, created_at,
                revoked_at, revoke_reason, scope, dpop_jkt)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)
            """,
            [
                .text(id), .text(userID), .text(clientID), deviceID.sql, .text(method.rawValue),
                .date(authTime ?? createdAt), .date(createdAt), scope.sql, dpopJKT.sql,
            ])
    }

    /// Stores a token of a session, as its hash only (``TokenHash``).
    package static func insertToken(
        _ connection: any SQLConnection, _ token: String, kind: TokenKind, sessionID: String, expiresAt: Date
    ) throws {
        try connection.executeLater(
            "INSERT INTO tokens (hash, session_id, kind, expires_at, used_at) VALUES (?, ?, ?, ?, NULL)",
            [.text(TokenHash.of(token)), .text(sessionID), .text(kind.rawValue), .date(expiresAt)])
    }

    /// Records a challenge as used (a device-login challenge id, a passkey challenge's
    /// ``PasskeyChallenge/usedID``), kept until housekeeping deletes it after `expiresAt`. The
    /// unique key lets exactly one of several concurrent uses do it, on any number of instances.
    /// - Returns: false when it was used already.
    package static func insertUsedChallenge(_ connection: any SQLConnection, id: String, expiresAt: Date)
        throws
        -> Bool
    {
        try !connection.queries([usedChallengeInsert(id: id, expiresAt: expiresAt)])[0].isEmpty
    }

    /// The statement of ``insertUsedChallenge(_:id:expiresAt:)``, to go with others
    /// (``SQLConnection/queries(_:)``): it returns one row when it recorded the use, none when
    /// the challenge was used already.
    static func usedChallengeInsert(id: String, expiresAt: Date) -> SQLStatement {
        SQLStatement(
            "INSERT INTO used_challenges (id, expires_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
            [.text(id), .date(expiresAt)])
    }
}
