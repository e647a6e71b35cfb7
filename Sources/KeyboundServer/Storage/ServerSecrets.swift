import Foundation
import KeyboundCrypto
import KeyboundWire

/// Secrets the server keeps in its database (`server_secrets`), so that every instance on the
/// same database shares them. Each is created once, by the migration that introduced it.
enum ServerSecrets {
    /// The HMAC-SHA-256 key that authenticates login challenges (``LoginChallenge``).
    static let loginChallengeKey = "login_challenge_hmac"

    /// Creates every secret with 256 random bits (migration 4).
    static func create(in connection: any SQLConnection) throws {
        try connection.execute(
            "INSERT INTO server_secrets (name, value) VALUES (?, ?)",
            [.text(loginChallengeKey), .text(Base64URL.encode(SecureRandom.bytes(32)))])
    }

    /// Reads a secret.
    /// - Throws: ``DatabaseError/engine(code:message:)`` when it is missing or malformed (a
    ///   database that was not migrated by this server).
    static func read(_ name: String, from database: any Database) throws -> Data {
        let text = try database.read { connection in
            try connection.queryOne("SELECT value FROM server_secrets WHERE name = ?", [.text(name)])?.text(0)
        }
        guard let text, let value = Base64URL.decode(text), value.count == 32 else {
            throw DatabaseError.engine(code: 0, message: "the server secret \(name) is missing or malformed")
        }
        return value
    }
}
