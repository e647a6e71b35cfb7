import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire

/// An OAuth client an operator registered (`keybound client add`; table `oauth_clients`).
/// Confidential clients authenticate at the token endpoint with their secret (stored as its
/// SHA-256: it is 256 random bits) or, with a registered JWK Set, with `private_key_jwt`; public
/// clients (native and browser apps) send only their id, and PKCE protects their codes.
struct OAuthClient: Sendable {
    let id: String
    let name: String
    /// SHA-256 hex of the secret, for `client_secret_basic` and `client_secret_post`.
    let secretHash: String?
    /// The keys of `private_key_jwt` (RFC 7523).
    let keys: JWKSet?
    /// The redirect URIs, each matched exactly (RFC 9700 §4.1.3), but for loopback ones.
    let redirectURIs: [String]
    /// Scopes it may ask for besides `openid`, `profile` and `offline_access`.
    let extraScopes: [String]
    /// Whether its tokens must be DPoP-bound.
    let dpopRequired: Bool
    let createdAt: Date
    /// How it learns a CIBA request's outcome, when it may make them (`--ciba`).
    let ciba: CIBAMode?
    /// Where a ping-mode client is told a request was decided (CIBA Core §10.2).
    let notificationEndpoint: String?

    /// Whether it authenticates (a secret or keys), as opposed to a public client.
    var isConfidential: Bool { secretHash != nil || keys != nil }

    /// The scopes every client may ask for.
    static let standardScopes = ["openid", "profile", "offline_access"]

    /// Whether `uri` is one of the client's redirect URIs: the same string, except that a
    /// registered `http://127.0.0.1/…` or `http://[::1]/…` matches any port (RFC 8252 §7.3: a
    /// native app listens on an ephemeral loopback port).
    func allowsRedirect(to uri: String) -> Bool {
        redirectURIs.contains { registered in
            registered == uri || Self.loopbackForm(registered).map { $0 == Self.loopbackForm(uri) } == true
        }
    }

    /// A loopback redirect URI without its port, or nil for any other URI.
    private static func loopbackForm(_ uri: String) -> String? {
        guard var parts = URLComponents(string: uri), parts.scheme == "http",
            parts.host == "127.0.0.1" || parts.host == "[::1]" || parts.host == "::1"
        else { return nil }
        parts.port = nil
        return parts.string
    }
}

extension OAuthClient: SQLRecord {
    static let columns = """
        id, name, secret_hash, jwks, redirect_uris, scopes, dpop_required, created_at, ciba_mode,
            notification_endpoint
        """

    init(row: inout SQLRowReader) throws {
        let (id, name, secretHash, jwks) = (
            try row.text(), try row.text(), try row.optionalText(), try row.optionalText()
        )
        guard case .array(let uris) = try JSON.parse(Data(try row.text().utf8)) else {
            throw DatabaseError.unexpectedType(column: 4)
        }
        self.init(
            id: id, name: name, secretHash: secretHash,
            keys: try jwks.map { try JWKSet(json: JSON.parse(Data($0.utf8))) },
            redirectURIs: uris.compactMap(\.stringValue),
            extraScopes: try row.text().split(separator: " ").map(String.init),
            dpopRequired: try row.bool(), createdAt: try row.date(),
            ciba: try row.optionalText().flatMap(CIBAMode.init(rawValue:)),
            notificationEndpoint: try row.optionalText())
    }
}

/// How a CIBA client learns that its request was decided (OpenID CIBA Core 1.0 §5).
public enum CIBAMode: String, Sendable, CaseIterable {
    /// It polls the token endpoint.
    case poll
    /// It is sent a ping at its notification endpoint, then fetches the tokens.
    case ping
}

/// What `keybound client add` registers.
public struct OAuthClientRegistration: Sendable {
    /// A name for people (`keybound client list`).
    public var name: String
    /// The redirect URIs (at least one): `https://…`, `http://127.0.0.1/…` or `http://[::1]/…`
    /// (any port), `http://localhost…` for development, or a private-use scheme
    /// (`com.example.app:/callback`).
    public var redirectURIs: [String]
    /// A confidential client: it gets a secret.
    public var confidential = false
    /// A JWK Set (JSON) of the client's own keys, for `private_key_jwt`: makes it confidential.
    public var jwks: Data?
    /// Scopes it may ask for besides `openid`, `profile` and `offline_access`.
    public var scopes: [String] = []
    /// Its tokens must be DPoP-bound (RFC 9449).
    public var dpopRequired = false
    /// It may ask for approvals through CIBA (`POST /oauth/bc-authorize`); it must be
    /// confidential. It needs no redirect URI.
    public var ciba = false
    /// With ``ciba``: where it is pinged when a request is decided (ping mode; poll mode
    /// without). https, or http on loopback for development.
    public var backchannelNotificationEndpoint: String?

    /// - Parameters:
    ///   - name: a name for people.
    ///   - redirectURIs: where authorization answers may go.
    public init(name: String, redirectURIs: [String]) {
        self.name = name
        self.redirectURIs = redirectURIs
    }
}

/// A registered client, as `keybound client add` and `list` show it.
public struct OAuthClientInfo: Sendable, Hashable {
    /// The client id.
    public let clientID: String
    /// Its name.
    public let name: String
    /// Its redirect URIs.
    public let redirectURIs: [String]
    /// How it authenticates: `none` (public), `client_secret`, `private_key_jwt`.
    public let authentication: String
    /// Scopes it may ask for besides the standard ones.
    public let scopes: [String]
    /// Whether its tokens must be DPoP-bound.
    public let dpopRequired: Bool
    /// When it was registered.
    public let createdAt: Date
    /// Whether it may make CIBA requests, and how it learns their outcome.
    public let ciba: CIBAMode?
    /// Its CIBA notification endpoint (ping mode).
    public let notificationEndpoint: String?
    /// The secret, only in the answer of `add` (it is stored hashed, and shown once).
    public let secret: String?
}

extension Application {
    /// The client `id`, if registered.
    func loadClient(_ connection: any SQLConnection, id: String) throws -> OAuthClient? {
        guard Grammar.isPlainName(id) else { return nil }
        return try connection.queryOne(
            OAuthClient.self, "SELECT \(OAuthClient.columns) FROM oauth_clients WHERE id = ?", [.text(id)])
    }

    /// Registers a client (`keybound client add`).
    /// - Parameter alsoWriting: writes more in the same transaction (the console's audit row).
    /// - Throws: ``OAuthError`` `invalid_request` for a registration that breaks a rule.
    func addClient(
        _ registration: OAuthClientRegistration, alsoWriting: (any SQLConnection) throws -> Void = { _ in }
    ) throws -> OAuthClientInfo {
        let name = try Validate.clientName(registration.name)
        guard !registration.redirectURIs.isEmpty || registration.ciba else {
            throw OAuthError.invalidRequest("a client needs at least one --redirect-uri (or --ciba)")
        }
        guard !registration.ciba || registration.confidential || registration.jwks != nil else {
            throw OAuthError.invalidRequest("a --ciba client authenticates: add --confidential or --jwks")
        }
        if let endpoint = registration.backchannelNotificationEndpoint {
            guard registration.ciba else {
                throw OAuthError.invalidRequest("--backchannel-notification-endpoint is for a --ciba client")
            }
            try Validate.notificationEndpoint(endpoint)
        }
        for uri in registration.redirectURIs { try Validate.redirectURI(uri) }
        for scope in registration.scopes
        where !Validate.isScopeToken(scope) || OAuthClient.standardScopes.contains(scope) {
            throw OAuthError.invalidRequest(
                "--scope \(scope): a scope is printable ASCII without spaces, not a standard one")
        }
        let keys: JWKSet? = try registration.jwks.map { data in
            guard let set = try? JWKSet(json: JSON.parse(data)), !set.keys.isEmpty else {
                throw OAuthError.invalidRequest("--jwks must be a JWK Set with at least one EC P-256 key")
            }
            return set
        }
        let secret = registration.confidential && keys == nil ? SecureRandomBytes.token() : nil
        let id = SecureRandomBytes.identifier("cli")
        let now = clock.nowToTheMillisecond
        try database.write { connection in
            try connection.execute(
                """
                INSERT INTO oauth_clients (id, name, secret_hash, jwks, redirect_uris, scopes, dpop_required, created_at,
                    ciba_mode, notification_endpoint)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id), .text(name), (secret.map(TokenHash.of)).sql,
                    (keys.map { String(decoding: JSON.serialize($0.json), as: UTF8.self) }).sql,
                    .text(
                        String(
                            decoding: JSON.serialize(.array(registration.redirectURIs.map { .string($0) })),
                            as: UTF8.self)),
                    .text(registration.scopes.joined(separator: " ")),
                    .integer(registration.dpopRequired ? 1 : 0),
                    .date(now),
                    (registration.ciba
                        ? (registration.backchannelNotificationEndpoint == nil ? CIBAMode.poll : .ping)
                            .rawValue
                        : nil).sql,
                    registration.backchannelNotificationEndpoint.sql,
                ])
            try alsoWriting(connection)
        }
        guard let info = try clientInfos(id: id).first else {
            throw DatabaseError.engine(code: 0, message: "the new client is gone")
        }
        return OAuthClientInfo(
            clientID: info.clientID, name: info.name, redirectURIs: info.redirectURIs,
            authentication: info.authentication, scopes: info.scopes, dpopRequired: info.dpopRequired,
            createdAt: info.createdAt, ciba: info.ciba, notificationEndpoint: info.notificationEndpoint,
            secret: secret)
    }

    /// The registered clients (`keybound client list`), oldest first; or the one with `id`.
    func clientInfos(id: String? = nil) throws -> [OAuthClientInfo] {
        let clients = try database.read { connection in
            try connection.query(
                OAuthClient.self,
                "SELECT \(OAuthClient.columns) FROM oauth_clients"
                    + (id == nil ? "" : " WHERE id = ?") + " ORDER BY created_at, id",
                id.map { [.text($0)] } ?? [])
        }
        return clients.map { client in
            OAuthClientInfo(
                clientID: client.id, name: client.name, redirectURIs: client.redirectURIs,
                authentication: client.keys != nil
                    ? "private_key_jwt" : client.secretHash != nil ? "client_secret" : "none",
                scopes: client.extraScopes, dpopRequired: client.dpopRequired, createdAt: client.createdAt,
                ciba: client.ciba, notificationEndpoint: client.notificationEndpoint, secret: nil)
        }
    }

    /// Removes a client (`keybound client remove`) and ends its sessions.
    /// - Returns: whether it existed.
    /// - Parameter alsoWriting: writes more in the same transaction (the console's audit row).
    func removeClient(id: String, alsoWriting: (any SQLConnection) throws -> Void = { _ in }) throws -> Bool {
        let now = clock.nowToTheMillisecond
        return try database.write { connection in
            guard try connection.execute("DELETE FROM oauth_clients WHERE id = ?", [.text(id)]) == 1 else {
                return false
            }
            try revokeSessions(
                connection, where: "scope IS NOT NULL AND client_id = ?", [.text(id)],
                reason: "client_removed",
                now: now)
            try alsoWriting(connection)
            return true
        }
    }

    /// Authenticates the client of a token, introspection or revocation request (RFC 6749 §2.3):
    /// HTTP Basic or the body's `client_secret` for a client with a secret, a `private_key_jwt`
    /// assertion (RFC 7523 §3) for a client with keys, the bare `client_id` for a public client.
    /// One method per request: two are refused (RFC 6749 §2.3).
    /// - Throws: ``OAuthError`` `invalid_client`, or `invalid_request` for a malformed request.
    func authenticateClient(_ parameters: OAuthParameters, _ context: RequestContext) throws -> OAuthClient {
        let basic = try Self.basicCredentials(context.request.headers["authorization"])
        let assertionType = parameters["client_assertion_type"]
        let methods = [basic != nil, parameters["client_secret"] != nil, assertionType != nil].filter { $0 }
            .count
        guard methods <= 1 else { throw OAuthError.invalidRequest("use one way to authenticate the client") }
        if let basic {
            guard parameters["client_id"] == nil || parameters["client_id"] == basic.id else {
                throw OAuthError.invalidRequest("client_id differs from the one of the Authorization header")
            }
            return try clientWithSecret(id: basic.id, secret: basic.secret, basic: true)
        }
        if let secret = parameters["client_secret"] {
            guard let id = parameters["client_id"] else {
                throw OAuthError.invalidRequest("client_id is missing")
            }
            return try clientWithSecret(id: id, secret: secret, basic: false)
        }
        if let assertionType {
            guard assertionType == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                let assertion = parameters["client_assertion"]
            else {
                throw OAuthError.invalidRequest(
                    "client_assertion_type is jwt-bearer, with a client_assertion")
            }
            return try clientWithAssertion(assertion, claimedID: parameters["client_id"], context)
        }
        guard let id = parameters["client_id"] else { throw OAuthError.invalidClient("no client_id") }
        guard let client = try database.read({ try loadClient($0, id: id) }), !client.isConfidential else {
            throw OAuthError.invalidClient(
                "no public client has this id (a confidential one must authenticate)")
        }
        return client
    }

    private func clientWithSecret(id: String, secret: String, basic: Bool) throws -> OAuthClient {
        guard let client = try database.read({ try loadClient($0, id: id) }), let hash = client.secretHash,
            (16...128).contains(secret.utf8.count),
            ConstantTime.equals(Data(TokenHash.of(secret).utf8), Data(hash.utf8))
        else { throw OAuthError.invalidClient("unknown client or wrong secret", basic: basic) }
        return client
    }

    /// `private_key_jwt`: a JWT signed by one of the client's keys, `iss` and `sub` its id, `aud`
    /// the issuer, the token endpoint or the endpoint it is sent to (RFC 7523 §3), unexpired and
    /// at most an hour away, its `jti` never seen before.
    private func clientWithAssertion(_ assertion: String, claimedID: String?, _ context: RequestContext)
        throws
        -> OAuthClient
    {
        guard let issuer = configuration.issuer, let jws = try? CompactJWS(assertion),
            let claims = try? jws.claims(),
            let id = claims[member: "iss"]?.stringValue, claims[member: "sub"]?.stringValue == id,
            claimedID == nil || claimedID == id,
            let client = try database.read({ try loadClient($0, id: id) }), let keys = client.keys
        else { throw OAuthError.invalidClient("the client assertion names no client with keys") }
        guard jws.algorithm == ES256.name,
            let key = jws.keyID.flatMap(keys.key(id:)) ?? (keys.keys.count == 1 ? keys.keys.first : nil),
            ES256.isValid(jws, key: key)
        else {
            throw OAuthError.invalidClient("the client assertion's signature does not verify (ES256 only)")
        }
        let audiences = JWTVerification.audiences(of: claims)
        // RFC 7523 §3: aud identifies the authorization server: its issuer, its token endpoint, or
        // the endpoint the assertion is sent to (what requests-oauth2client writes).
        let accepted = [issuer, issuer + OAuthPaths.token, issuer + context.request.path]
        guard audiences.contains(where: accepted.contains) else {
            throw OAuthError.invalidClient(
                "the client assertion's aud names neither the issuer nor this endpoint")
        }
        let now = context.now
        // An hour, and a minute for clocks: libraries' defaults (authlib's is an hour), and how long
        // its jti must be remembered.
        guard let exp = claims[member: "exp"]?.integerValue,
            Date(timeIntervalSince1970: TimeInterval(exp)) > now,
            Date(timeIntervalSince1970: TimeInterval(exp)) <= now.adding(seconds: Self.longestAssertionLife),
            let jti = claims[member: "jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256
        else {
            throw OAuthError.invalidClient(
                "the client assertion needs a jti and an exp in the future, at most an hour away")
        }
        // Single use (RFC 7523 §3): the jti, per client, in the store every instance shares.
        let usedID = "cja_" + Base64URL.encode(Digest.sha256(Data("\(id) \(jti)".utf8)))
        let fresh = try database.write { connection in
            try Rows.insertUsedChallenge(
                connection, id: usedID, expiresAt: Date(timeIntervalSince1970: TimeInterval(exp)))
        }
        guard fresh else { throw OAuthError.invalidClient("this client assertion was used before") }
        return client
    }

    /// How far in the future a client assertion's `exp` may be, in seconds.
    static let longestAssertionLife = 3660

    /// The client id and secret of `Authorization: Basic`, each form-decoded (RFC 6749 §2.3.1).
    private static func basicCredentials(_ header: String?) throws -> (id: String, secret: String)? {
        guard let header, header.lowercased().hasPrefix("basic ") else { return nil }
        guard let data = Data(base64Encoded: header.dropFirst(6).trimmingCharacters(in: .whitespaces)),
            let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":"),
            let id = String(text[..<colon]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding,
            let secret = String(text[text.index(after: colon)...]).replacingOccurrences(of: "+", with: " ")
                .removingPercentEncoding
        else { throw OAuthError.invalidClient("the Basic credentials are malformed", basic: true) }
        return (id, secret)
    }
}
