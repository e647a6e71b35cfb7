import Foundation
import KeyboundWire

/// The OAuth 2.0 / OpenID Connect provider's administration on the server's database, for
/// operators (`keybound client`, `keybound keys`; docs/oauth.md): registered clients and the
/// issuer's signing keys. The server may be running meanwhile: it reads both from the database.
public struct ProviderAdministration: Sendable {
    private let application: Application

    /// Opens (and if needed migrates) the database of `configuration`; its
    /// ``Configuration/keyEncryptionKey`` and ``Configuration/keyPublishDelay`` apply to the
    /// keys made here.
    /// - Throws: ``ServerError`` when the database cannot be opened or a stored key cannot be
    ///   opened with the configured encryption key.
    public init(configuration: Configuration) throws {
        application = try Application.forOperator(configuration)
    }

    /// Registers a client. A confidential client without keys gets a secret, returned here
    /// once (``OAuthClientInfo/secret``) and stored only as its hash.
    /// - Throws: ``ServerError`` `clientRefused` for a registration that breaks a rule,
    ///   `databaseUnreachable` when the database fails.
    public func addClient(_ registration: OAuthClientRegistration) throws -> OAuthClientInfo {
        do {
            return try application.addClient(registration)
        } catch let error as OAuthError {
            throw ServerError(.clientRefused, error.description)
        } catch {
            throw ServerError(.databaseUnreachable, "cannot register the client: \(error)")
        }
    }

    /// The registered clients, oldest first.
    /// - Throws: ``ServerError`` `databaseUnreachable`.
    public func clients() throws -> [OAuthClientInfo] {
        do { return try application.clientInfos() } catch {
            throw ServerError(.databaseUnreachable, "cannot list the clients: \(error)")
        }
    }

    /// Removes a client and ends its sessions: its refresh tokens stop working at once, its
    /// access tokens are refused by introspection and userinfo at once.
    /// - Throws: ``ServerError`` `clientNotFound` for an unknown id, `databaseUnreachable`.
    public func removeClient(id: String) throws {
        let removed: Bool
        do { removed = try application.removeClient(id: id) } catch {
            throw ServerError(.databaseUnreachable, "cannot remove the client: \(error)")
        }
        guard removed else { throw ServerError(.clientNotFound, "no client has the id '\(id)'") }
    }

    /// Adds a signing key: published at once, it signs once ``Configuration/keyPublishDelay``
    /// has passed; the key it replaces stays published until every token it signed has expired.
    /// - Returns: the new key's id.
    /// - Throws: ``ServerError`` `databaseUnreachable`.
    public func rotateKey() throws -> SigningKeyInfo {
        do {
            let kid = try application.rotateSigningKey()
            guard let info = try application.signingKeyInfos().first(where: { $0.kid == kid }) else {
                throw DatabaseError.engine(code: 0, message: "the new key is gone")
            }
            return info
        } catch {
            throw ServerError(.databaseUnreachable, "cannot rotate the signing key: \(error)")
        }
    }

    /// Every stored signing key, newest first.
    /// - Throws: ``ServerError`` `databaseUnreachable`.
    public func keys() throws -> [SigningKeyInfo] {
        do { return try application.signingKeyInfos() } catch {
            throw ServerError(.databaseUnreachable, "cannot list the signing keys: \(error)")
        }
    }
}
