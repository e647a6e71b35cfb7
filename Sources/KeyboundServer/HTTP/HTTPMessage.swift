import Foundation

/// An HTTP request as the router sees it. Used by the live server and by the in-process test
/// mode (``Server/handle(_:)``), so both go through exactly the same code.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `DELETE`, …
    public var method: String
    /// The path without the query, e.g. `/v1/me`.
    public var path: String
    /// Query parameters.
    public var query: [String: String]
    /// Header fields; names are lowercased.
    public var headers: [String: String]
    /// The body.
    public var body: Data
    /// The TCP peer's numeric address. Throttling and the audit log use the client resolved from
    /// it: the peer itself, or behind a trusted proxy the forwarded client (`ClientAddress`).
    public var clientAddress: String
    /// Set by the HTTP layer when the body exceeded the limit (its bytes were discarded).
    var bodyExceededLimit = false
    /// Names of query parameters given more than once (``query`` holds the last value):
    /// OAuth refuses those (RFC 6749 §3.1).
    var repeatedQueryNames: Set<String> = []
    /// Names of header fields given more than once (``headers`` holds the last value): DPoP
    /// refuses a second `DPoP` header (RFC 9449 §4.3).
    var repeatedHeaderNames: Set<String> = []

    /// - Parameters:
    ///   - method: the method.
    ///   - path: the request target: the path, and optionally a `?query` part that is split off
    ///     into ``query`` and percent-decoded.
    ///   - headers: header fields (names are lowercased here).
    ///   - body: the body.
    ///   - clientAddress: the peer address (default loopback).
    public init(
        method: String, path: String, headers: [String: String] = [:], body: Data = Data(),
        clientAddress: String = "127.0.0.1"
    ) {
        var query: [String: String] = [:]
        var repeated: Set<String> = []
        var decodedPath = path
        if let mark = path.firstIndex(of: "?") {
            decodedPath = String(path[..<mark])
            for pair in path[path.index(after: mark)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
                let value =
                    parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
                if query.updateValue(value, forKey: name) != nil { repeated.insert(name) }
            }
        }
        self.init(
            method: method, decodedPath: decodedPath, query: query, headers: headers, body: body,
            clientAddress: clientAddress)
        repeatedQueryNames = repeated
    }

    /// A request whose path the HTTP layer already separated from the query and percent-decoded:
    /// the path is taken as it is (a decoded `%3F` is part of it, not the start of a query).
    init(
        method: String, decodedPath: String, query: [String: String], headers: [String: String], body: Data,
        clientAddress: String
    ) {
        self.method = method
        self.path = decodedPath
        self.query = query
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
        self.body = body
        self.clientAddress = clientAddress
    }

    /// Whether the declared media type is `application/json` (parameters such as
    /// `; charset=utf-8` allowed). A web page can send another site a body without a type, or
    /// of a form or `text/plain` type, with no CORS preflight, but not `application/json`: so
    /// bodies of any other type are refused.
    var hasJSONContentType: Bool {
        guard let contentType = headers["content-type"] else { return false }
        // On the bytes: this runs for every request with a body, and Foundation's trimming
        // (through NSString) once cost more than the rest of the routing.
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let mediaType = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }.drop(while: isBlank)
        let trimmed = mediaType.reversed().drop(while: isBlank)
        // ASCII lower case: a byte outside A–Z is left as it is, so no other text can match.
        return trimmed.reversed().lazy.map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }
            .elementsEqual("application/json".utf8)
    }
}

/// An HTTP response.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields (names as sent).
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// - Parameters:
    ///   - status: the status code.
    ///   - headers: header fields.
    ///   - body: the body.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of a header, looked up case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}
