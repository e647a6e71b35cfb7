/// A username: 1–64 of `a-z 0-9 . _ @ + -`.
///
/// Usernames compare case-insensitively, so the value is kept lowercased: `Ada` and `ada` are
/// the same user. The server and the SDK check the same grammar, here.
public struct Username: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The validated, lowercased username.
    public let rawValue: String

    /// Lowercases `text` and checks the grammar.
    /// - Throws: ``WireError`` (`invalid_request`) outside the grammar.
    public init(_ text: String) throws(WireFailure) {
        // The grammar is checked before lowercasing: Unicode lowercases some non-ASCII letters to
        // ASCII (the Kelvin sign U+212A becomes "k"), which would let them in as another name.
        guard (1...64).contains(text.utf8.count),
            text.utf8.allSatisfy({ Grammar.isAlphanumeric($0) || Array("._@+-".utf8).contains($0) })
        else { throw WireError(.invalidRequest, "username must be 1-64 of a-z 0-9 . _ @ + -") }
        rawValue = text.lowercased()
    }

    /// A literal username in code. A malformed literal is a programming error and traps.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid username literal \"\(value)\"") }
    }

    /// The username.
    public var description: String { rawValue }
}

/// Identifies an app installation to the server: 1–128 of `A-Z a-z 0-9 . _ : -`.
///
/// A new login from the same client ends its previous session, and a device bound from that
/// session belongs to it.
public struct ClientID: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The validated client id.
    public let rawValue: String

    /// - Throws: ``WireError`` (`invalid_request`) outside the grammar.
    public init(_ text: String) throws(WireFailure) {
        guard Grammar.isPlainName(text) else {
            throw WireError(.invalidRequest, "client_id must be 1-128 of A-Z a-z 0-9 . _ : -")
        }
        rawValue = text
    }

    /// A literal client id in code. A malformed literal is a programming error and traps.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid client id literal \"\(value)\"") }
    }

    /// The client id.
    public var description: String { rawValue }
}

/// The character grammars of the wire that more than one type or side checks, each in one place.
package enum Grammar {
    /// `A-Z a-z 0-9`.
    package static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    /// The server's opaque ids (`usr_…`, `dev_…`, `apr_…`): 1–64 of `A-Z a-z 0-9 _ -`. Anything
    /// else cannot exist, so the server answers 404 without a lookup and the SDK never puts it
    /// in a path.
    package static func isIdentifier(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
            }
    }

    /// Client ids and transfer recipients (addresses, account numbers, names): 1–128 of
    /// `A-Z a-z 0-9 . _ : -`.
    package static func isPlainName(_ text: String) -> Bool {
        (1...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { isAlphanumeric($0) || Array("._:-".utf8).contains($0) }
    }
}
