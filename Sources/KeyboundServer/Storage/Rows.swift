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
/// keys, SHA-256 hex token hashes, milliseconds since 1970). The services write their rows
/// through these, and so does the bench's seeder, so a seeded row is exactly a served one.
package enum Rows {
    /// Inserts a user.
    package static func insertUser(
        _ connection: any SQLConnection, id: String, username: String, passwordHash: String, createdAt: Int64
    ) throws {
        try connection.execute(
            "INSERT INTO users (id, username, password_hash, created_at) VALUES (?, ?, ?, ?)",
            [.text(id), .text(username), .text(passwordHash), .integer(createdAt)])
    }

    /// Inserts an active device with its P-256 public key (SubjectPublicKeyInfo DER).
    package static func insertDevice(
        _ connection: any SQLConnection, id: String, userID: String, clientID: String, name: String,
        keyProtection: KeyProtection, publicKey: Data, createdAt: Int64
    ) throws {
        try connection.execute(
            """
            INSERT INTO devices (id, user_id, client_id, name, key_protection, public_key, created_at,
                last_used_at, failed_signatures, suspended_at, revoked_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 0, NULL, NULL)
            """,
            [
                .text(id), .text(userID), .text(clientID), .text(name), .text(keyProtection.rawValue),
                .text(Base64URL.encode(publicKey)), .integer(createdAt),
            ])
    }

    /// Inserts a live session that was authenticated at `createdAt`.
    package static func insertSession(
        _ connection: any SQLConnection, id: String, userID: String, clientID: String, deviceID: String?,
        method: AuthMethod, createdAt: Int64
    ) throws {
        try connection.execute(
            """
            INSERT INTO sessions (id, user_id, client_id, device_id, auth_method, auth_time, created_at,
                revoked_at, revoke_reason)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)
            """,
            [
                .text(id), .text(userID), .text(clientID), deviceID.sql, .text(method.rawValue),
                .integer(createdAt), .integer(createdAt),
            ])
    }

    /// Stores a token of a session, as its hash only (``TokenHash``).
    package static func insertToken(
        _ connection: any SQLConnection, _ token: String, kind: TokenKind, sessionID: String, expiresAt: Int64
    ) throws {
        try connection.execute(
            "INSERT INTO tokens (hash, session_id, kind, expires_at, used_at) VALUES (?, ?, ?, ?, NULL)",
            [.text(TokenHash.of(token)), .text(sessionID), .text(kind.rawValue), .integer(expiresAt)])
    }
}
