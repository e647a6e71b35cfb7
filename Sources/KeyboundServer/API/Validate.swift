import Foundation
import KeyboundWire

/// The input rules only the server checks, once at the edge. (The grammars the SDK checks too,
/// usernames, client ids and opaque ids, are KeyboundWire's `Username`, `ClientID` and `Grammar`.)
enum Validate {
    /// Passwords: 8–1024 characters, no composition rules. Characters are Unicode code points, as
    /// JSON Schema's `minLength`/`maxLength` count them in docs/openapi.yaml (a count of grapheme
    /// clusters would refuse a password the spec allows: eight combining marks are one cluster).
    static func newPassword(_ password: String) throws {
        guard (8...1024).contains(password.unicodeScalars.count) else {
            throw APIError.invalid("password must be 8-1024 characters")
        }
    }

    /// A password given at login: only the upper bound is checked (the hash does the rest).
    static func loginPassword(_ password: String) throws {
        guard password.unicodeScalars.count <= 1024 else {
            throw APIError.invalid("password must be at most 1024 characters")
        }
    }

    /// Device names: ``shortName(_:member:)``.
    static func deviceName(_ name: String) throws { _ = try shortName(name, member: "name") }

    /// The client the request named, or, when it named none, a new one: sessions of different
    /// ceremonies then never replace each other.
    static func optionalClientID(_ clientID: ClientID?) -> String {
        clientID?.rawValue ?? "passkey:" + SecureRandomBytes.make(12)
    }

    /// A display name shown by the authenticator: ``shortName(_:member:)``.
    static func displayName(_ name: String) throws -> String { try shortName(name, member: "displayName") }

    /// A name a person reads: 1–64 code points (as the spec counts them), no control characters.
    /// - Returns: the name.
    private static func shortName(_ name: String, member: String) throws -> String {
        guard (1...64).contains(name.unicodeScalars.count),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw APIError.invalid("\(member) must be 1-64 characters without control characters") }
        return name
    }

    // MARK: OAuth

    /// A client's name: ``shortName(_:member:)``.
    static func clientName(_ name: String) throws -> String {
        do {
            return try shortName(name, member: "name")
        } catch {
            throw OAuthError.invalidRequest("a client name is 1-64 characters without control characters")
        }
    }

    /// A redirect URI a client may register (RFC 6749 §3.1.2, RFC 8252 §7, RFC 9700 §4.1): an
    /// absolute URI without a fragment, of at most 2048 bytes, that is `https`, `http` on a
    /// loopback host or `localhost` (development and native apps), or a private-use scheme in
    /// reverse domain form (`com.example.app:/callback`).
    static func redirectURI(_ uri: String) throws {
        guard uri.utf8.count <= 2048, let parts = URLComponents(string: uri),
            let scheme = parts.scheme?.lowercased(),
            parts.fragment == nil
        else { throw OAuthError.invalidRequest("\(uri): a redirect URI is absolute, without a fragment") }
        switch scheme {
        case "https":
            guard parts.host?.isEmpty == false else {
                throw OAuthError.invalidRequest("\(uri) names no host")
            }
        case "http":
            guard ["127.0.0.1", "[::1]", "::1", "localhost"].contains(parts.host ?? "") else {
                throw OAuthError.invalidRequest("\(uri): plain http only to 127.0.0.1, [::1] or localhost")
            }
        default:
            guard scheme.contains("."), parts.host == nil || parts.host?.isEmpty == true else {
                throw OAuthError.invalidRequest(
                    "\(uri): a private-use scheme is a reverse domain name (com.example.app:/cb)")
            }
        }
    }

    /// A CIBA client's notification endpoint (CIBA Core §4: https), or http on loopback for
    /// development; no fragment, user or password.
    static func notificationEndpoint(_ url: String) throws {
        guard let parts = URLComponents(string: url), WebhookTarget.formProblem(url) == nil,
            parts.scheme?.lowercased() == "https"
                || ["127.0.0.1", "[::1]", "::1", "localhost"].contains(parts.host ?? "")
        else {
            throw OAuthError.invalidRequest(
                "--backchannel-notification-endpoint \(url): https://host/…, or http:// on 127.0.0.1, [::1] or localhost"
            )
        }
    }

    /// A scope token (RFC 6749 §3.3): printable ASCII but space, `"` and `\\`, 1-64 bytes.
    static func isScopeToken(_ scope: String) -> Bool {
        (1...64).contains(scope.utf8.count)
            && scope.utf8.allSatisfy {
                $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0)
            }
    }
}
