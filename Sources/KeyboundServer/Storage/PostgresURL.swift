import Foundation

/// A `postgres://user@host:port/database?sslmode=…` URL (also `postgresql://`), checked once.
/// It may name several hosts, as libpq's multi-host URLs do
/// (`postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`): libpq tries them in
/// order and keeps the first that takes writes, so after a failover every new connection finds
/// the new primary (docs/server.md, "High availability").
///
/// The password never comes from the URL: a command line and an environment variable naming the
/// URL are shown to other users of the machine (`ps`, `/proc`), and the server prints its URL.
/// It comes from `KEYBOUND_DB_PASSWORD` or `PGPASSWORD` (``Configuration/databasePassword``), and
/// a URL that holds one is refused.
struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    /// The role to connect as (nil: libpq's default, the operating-system user).
    var user: String?
    /// The servers, in the order they are tried: one with no host and no port for libpq's
    /// defaults.
    var endpoints: [Endpoint] = [Endpoint()]
    /// The database (nil: named like the user).
    var database: String?
    /// Further libpq connection parameters from the query string (only those in ``allowedOptions``).
    var options: [Option] = []

    /// One server of the URL.
    struct Endpoint: Sendable, Equatable {
        /// A host name, a numeric address, or a Unix-socket directory (starting with `/`; in a
        /// URL percent-encoded, `%2Fvar%2Frun%2Fpostgresql`). nil: libpq's default socket.
        var host: String?
        /// The port (nil: 5432).
        var port: UInt16?
    }

    /// One libpq connection parameter.
    struct Option: Sendable, Equatable {
        let key: String
        let value: String
    }

    /// The query parameters a URL may carry: TLS, the name shown in `pg_stat_activity`, and which
    /// server of several to keep (``sessionAttributes``). Timeouts and keepalives are the
    /// server's own (see ``PostgresDatabase``).
    static let allowedOptions: Set<String> = [
        "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "application_name", "target_session_attrs",
    ]

    /// The values of `target_session_attrs` a server that writes can use: `read-write` (the
    /// default: a standby is passed over) and `primary`; `any` for a single host behind a pooler
    /// that answers for the primary.
    static let sessionAttributes: Set<String> = ["read-write", "primary", "any"]

    /// libpq's `target_session_attrs`: the URL's, or `read-write`.
    var targetSessionAttributes: String {
        options.last { $0.key == "target_session_attrs" }?.value ?? "read-write"
    }

    /// The first host, for messages and the one-host case.
    var host: String? { endpoints.first?.host }

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
                guard key != "target_session_attrs" || Self.sessionAttributes.contains(value) else {
                    throw refuse(
                        "target_session_attrs must be one of "
                            + Self.sessionAttributes.sorted().joined(separator: ", ")
                            + ": the server writes")
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
        let parts = authority.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= 16 else { throw refuse("at most 16 hosts in a PostgreSQL URL") }
        endpoints = try parts.map { try Self.endpoint($0, alone: parts.count == 1) }
    }

    /// One `host[:port]` (or `[v6]:port`) of the authority; empty only when it is the only one.
    private static func endpoint(_ text: Substring, alone: Bool) throws -> Endpoint {
        func refuse(_ reason: String) -> DatabaseError { .unsupportedURL(reason) }
        var endpoint = Endpoint()
        var hostPart = text
        if text.hasPrefix("[") {
            // [IPv6]:port
            guard let close = text.firstIndex(of: "]") else {
                throw refuse("unclosed [ in the PostgreSQL URL's host")
            }
            endpoint.host = String(text[text.index(after: text.startIndex)..<close])
            hostPart = text[text.index(after: close)...]
            if !hostPart.isEmpty {
                guard hostPart.hasPrefix(":") else { throw refuse("bad host in the PostgreSQL URL") }
                endpoint.port = try port(hostPart.dropFirst())
            }
        } else {
            if let colon = text.lastIndex(of: ":") {
                endpoint.port = try port(text[text.index(after: colon)...])
                hostPart = text[..<colon]
            }
            guard let decoded = hostPart.removingPercentEncoding else {
                throw refuse("bad host in the PostgreSQL URL")
            }
            endpoint.host = decoded.isEmpty ? nil : decoded
        }
        if let host = endpoint.host, host.contains(where: { $0 == "," || $0.isWhitespace }) {
            throw refuse("bad host in the PostgreSQL URL")
        }
        guard alone || endpoint.host != nil else {
            throw refuse("every host of a multi-host PostgreSQL URL needs a name")
        }
        return endpoint
    }

    private static func port(_ text: Substring) throws -> UInt16 {
        guard let number = UInt16(text), number > 0 else {
            throw DatabaseError.unsupportedURL("the PostgreSQL URL's port must be a number from 1 to 65535")
        }
        return number
    }

    /// libpq's `host` and `port` parameters: the endpoints' hosts and ports, comma-separated
    /// (a missing port of one of several is 5432), or nil for libpq's default.
    var hostParameter: String? {
        let hosts = endpoints.compactMap(\.host)
        return hosts.isEmpty ? nil : hosts.joined(separator: ",")
    }

    var portParameter: String? {
        guard endpoints.contains(where: { $0.port != nil }) else { return nil }
        return endpoints.map { String($0.port ?? 5432) }.joined(separator: ",")
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
        guard let host = hostParameter ?? variable("PGHOST"), !["verify-full", "verify-ca"].contains(sslmode)
        else {
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
        text += endpoints.map { endpoint in
            var text = endpoint.host.map { $0.contains(":") ? "[\($0)]" : encode($0) } ?? ""
            if let port = endpoint.port { text += ":\(port)" }
            return text
        }.joined(separator: ",")
        if let database { text += "/" + encode(database) }
        let query = options.map { encode($0.key) + "=" + encode($0.value) }
        return query.isEmpty ? text : text + "?" + query.joined(separator: "&")
    }
}
