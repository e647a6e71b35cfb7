import Foundation

/// A `postgres://user@host:port/database?sslmode=…` URL (also `postgresql://`), checked once.
///
/// The password never comes from the URL: a command line and an environment variable naming the
/// URL are shown to other users of the machine (`ps`, `/proc`), and the server prints its URL.
/// It comes from `KEYBOUND_DB_PASSWORD` or `PGPASSWORD` (``Configuration/databasePassword``), and
/// a URL that holds one is refused.
struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    /// The role to connect as (nil: libpq's default, the operating-system user).
    var user: String?
    /// A host name, a numeric address, or a Unix-socket directory (starting with `/`; in a URL
    /// percent-encoded, `%2Fvar%2Frun%2Fpostgresql`). nil: libpq's default socket.
    var host: String?
    /// The port (nil: 5432).
    var port: UInt16?
    /// The database (nil: named like the user).
    var database: String?
    /// Further libpq connection parameters from the query string (only those in ``allowedOptions``).
    var options: [Option] = []

    /// One libpq connection parameter.
    struct Option: Sendable, Equatable {
        let key: String
        let value: String
    }

    /// The query parameters a URL may carry: TLS and the name shown in `pg_stat_activity`.
    /// Timeouts and keepalives are the server's own (see ``PostgresDatabase``).
    static let allowedOptions: Set<String> = [
        "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "application_name",
    ]

    /// Whether `text` names PostgreSQL (`postgres://` or `postgresql://`) at all.
    static func names(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses a URL.
    /// - Throws: ``DatabaseError/unsupportedURL(_:)`` with what is wrong (never echoing a password).
    init(_ text: String) throws {
        func refuse(_ reason: String) -> DatabaseError { .unsupportedURL(reason) }
        guard let schemeEnd = text.range(of: "://"), Self.names(text) else {
            throw refuse("a PostgreSQL URL starts with postgres:// or postgresql://")
        }
        var rest = Substring(text[schemeEnd.upperBound...])
        if let question = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: question)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, let key = parts[0].removingPercentEncoding,
                    let value = parts[1].removingPercentEncoding
                else { throw refuse("bad query parameter in the PostgreSQL URL") }
                guard key != "password" else {
                    throw refuse(Self.passwordAdvice)
                }
                guard Self.allowedOptions.contains(key) else {
                    throw refuse(
                        "unknown PostgreSQL URL parameter '\(key)' (allowed: "
                            + Self.allowedOptions.sorted().joined(separator: ", ") + ")")
                }
                options.append(Option(key: key, value: value))
            }
            rest = rest[..<question]
        }
        var authority = rest
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            let name = rest[rest.index(after: slash)...]
            guard let decoded = name.removingPercentEncoding, !decoded.contains("/") else {
                throw refuse("bad database name in the PostgreSQL URL")
            }
            database = decoded.isEmpty ? nil : decoded
        }
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            guard !userInfo.contains(":") else { throw refuse(Self.passwordAdvice) }
            guard let decoded = userInfo.removingPercentEncoding, !decoded.isEmpty else {
                throw refuse("bad user name in the PostgreSQL URL")
            }
            user = decoded
            authority = authority[authority.index(after: at)...]
        }
        var hostPart = authority
        if authority.hasPrefix("[") {
            // [IPv6]:port
            guard let close = authority.firstIndex(of: "]") else {
                throw refuse("unclosed [ in the PostgreSQL URL's host")
            }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            hostPart = authority[authority.index(after: close)...]
            if !hostPart.isEmpty {
                guard hostPart.hasPrefix(":") else { throw refuse("bad host in the PostgreSQL URL") }
                try parsePort(hostPart.dropFirst())
            }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                try parsePort(authority[authority.index(after: colon)...])
                hostPart = authority[..<colon]
            }
            guard let decoded = hostPart.removingPercentEncoding else {
                throw refuse("bad host in the PostgreSQL URL")
            }
            host = decoded.isEmpty ? nil : decoded
        }
        if let host, host.contains(where: { $0 == "," || $0.isWhitespace }) {
            throw refuse("one host per PostgreSQL URL")
        }

        func parsePort(_ text: Substring) throws {
            guard let number = UInt16(text), number > 0 else {
                throw refuse("the PostgreSQL URL's port must be a number from 1 to 65535")
            }
            port = number
        }
    }

    /// Why the connection to this URL's server could be read or taken over on the network, or
    /// nil when it cannot. libpq's default, `sslmode=prefer`, and every mode short of
    /// `verify-ca`/`verify-full` check no certificate (and `prefer` and `allow` fall back to plain
    /// text), so anyone on the path can pose as the server and read the traffic. That matters only
    /// for a host that is not this machine: a Unix socket, `localhost` and loopback addresses
    /// never leave it.
    /// - Parameter environment: where libpq takes `PGHOST` and `PGSSLMODE` from when the URL has
    ///   no host or no `sslmode`.
    func unverifiedTransport(environment: [String: String]) -> (host: String, sslmode: String)? {
        // libpq reads an empty variable as unset.
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let sslmode = options.last { $0.key == "sslmode" }?.value ?? variable("PGSSLMODE") ?? "prefer"
        guard let host = host ?? variable("PGHOST"), !["verify-full", "verify-ca"].contains(sslmode) else {
            return nil
        }
        // PGHOST may list several hosts; any of them that is remote is reached the same way.
        let remote = host.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.first {
            !Self.staysOnThisMachine($0)
        }
        return remote.map { ($0, sslmode) }
    }

    /// A Unix-socket directory (`/…`, or `@…` for an abstract socket), `localhost`, or a loopback
    /// address (127.0.0.0/8, ::1).
    private static func staysOnThisMachine(_ host: String) -> Bool {
        if host.isEmpty || host.hasPrefix("/") || host.hasPrefix("@") || host.lowercased() == "localhost" {
            return true
        }
        guard let address = IPAddress(host) else { return false }
        return address.isIPv6 ? address == IPAddress("::1") : address.bytes[0] == 127
    }

    private static let passwordAdvice =
        "a PostgreSQL URL must not hold a password (command lines are visible to other users): "
        + "set KEYBOUND_DB_PASSWORD or PGPASSWORD"

    /// The URL again, for logs and messages (it holds no secret).
    var description: String {
        // RFC 3986's unreserved characters stay; everything else is percent-encoded.
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        func encode(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
        }
        var text = "postgres://"
        if let user { text += encode(user) + "@" }
        if let host { text += host.contains(":") ? "[\(host)]" : encode(host) }
        if let port { text += ":\(port)" }
        if let database { text += "/" + encode(database) }
        let query = options.map { encode($0.key) + "=" + encode($0.value) }
        return query.isEmpty ? text : text + "?" + query.joined(separator: "&")
    }
}
