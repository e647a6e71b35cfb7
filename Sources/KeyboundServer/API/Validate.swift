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
}
