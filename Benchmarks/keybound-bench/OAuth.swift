import Foundation
import KeyboundCrypto
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

/// The provider as the bench runs it (issue 23): the issuer every request's `Host: 127.0.0.1`
/// names, and the one public client the bench registers before the server starts.
enum BenchProvider {
    static let issuer = "http://127.0.0.1"
    static let redirectURI = "http://127.0.0.1/callback"
    /// What the code flow asks for, as a native app signing in with AppAuth does: an ID token
    /// and a refresh token.
    static let scope = "openid offline_access"

    /// Registers the bench's public client on `configuration`'s database (migrated first, if
    /// new), through the operators' API; `configuration` must name the issuer.
    /// - Returns: its `client_id`.
    static func registerClient(_ configuration: Configuration) throws -> String {
        try ProviderAdministration(configuration: configuration).addClient(
            OAuthClientRegistration(name: "keybound-bench", redirectURIs: [redirectURI])
        ).clientID
    }

    /// `application/x-www-form-urlencoded` (RFC 6749 Appendix B) of `pairs`.
    static func form(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    private static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    /// The header fields of a form POST to the token endpoint.
    static let formHeaders = [
        "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded",
    ]

    /// `POST /oauth/token` with `body`; the new refresh token of a 200 answer, nil otherwise.
    static func token(_ connection: HTTPConnection, _ body: String) throws -> String? {
        let reply = try connection.send(
            "POST", OAuthPaths.token, exactHeaders: formHeaders, body: Data(body.utf8))
        guard reply.status == 200 else { return nil }
        return try JSON.parse(reply.body)[member: "refresh_token"]?.stringValue
    }
}

/// OAuth code exchanges of a public client with PKCE (RFC 6749 §4.1, RFC 7636), as a native app
/// holding a Keybound session completes them: `POST /v1/oauth/authorize` with the session's
/// bearer token and a fresh S256 challenge, the code taken out of the answer's `redirect_to`,
/// then `POST /oauth/token` (form-encoded, `grant_type=authorization_code`, the verifier). Per
/// step the server writes twice (the code, then its use with a new session and its tokens) and
/// signs two ES256 JWTs (the access token and the ID token); the client makes a verifier and its
/// SHA-256 and parses two small JSON bodies.
final class CodeExchangeWorker: LoadWorker, @unchecked Sendable {
    let connection: HTTPConnection
    private let session: String
    private let clientID: String
    /// The form of the exchange up to the code, the same for every step.
    private let exchangePrefix: String
    /// The refresh token of the latest exchange.
    private(set) var refreshToken = ""

    /// Creates the account and signs in with the password (`POST /v1/oauth/authorize` wants a
    /// sign-in of the last 5 minutes), then exchanges one code.
    init(port: UInt16, username: String, clientID: String) throws {
        connection = try HTTPConnection(port: port)
        self.clientID = clientID
        session = try signUpAndLogIn(connection, username: username, clientID: "bench-web").accessToken
        exchangePrefix =
            BenchProvider.form([
                ("grant_type", "authorization_code"), ("redirect_uri", BenchProvider.redirectURI),
                ("client_id", clientID),
            ]) + "&code="
        guard try step() else { throw HTTPClientError(description: "the first code exchange failed") }
    }

    func step() throws -> Bool {
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let authorize = try connection.send(
            API.oauthAuthorize,
            OAuthAuthorizeRequest(
                clientID: clientID, redirectURI: BenchProvider.redirectURI, responseType: "code",
                scope: BenchProvider.scope, state: nil, nonce: nil,
                codeChallenge: Base64URL.encode(Digest.sha256(Data(verifier.utf8))),
                codeChallengeMethod: "S256"),
            bearer: session)
        guard authorize.status == 200,
            let code = Self.code(in: try OAuthAuthorizeResponse(jsonData: authorize.body).redirectTo),
            let refresh = try BenchProvider.token(
                connection, exchangePrefix + code + "&code_verifier=" + verifier)
        else { return false }
        refreshToken = refresh
        return true
    }

    /// The `code` parameter of a redirect URI's query (codes are base64url: nothing to decode).
    private static func code(in location: String) -> String? {
        guard let query = location.split(separator: "?", maxSplits: 1).last else { return nil }
        for pair in query.split(separator: "&") where pair.hasPrefix("code=") {
            return String(pair.dropFirst("code=".count))
        }
        return nil
    }
}

/// Refresh-token rotations on the token endpoint: `POST /oauth/token` form-encoded with
/// `grant_type=refresh_token`, the latest refresh token, which the answer replaces (rotation, as
/// /v1 does). Per step the server writes once (the old token used, new tokens) and signs two
/// ES256 JWTs (access token and ID token: the session has `openid`).
final class TokenRefreshWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let clientID: String
    private var refreshToken: String

    init(connection: HTTPConnection, clientID: String, refreshToken: String) {
        self.connection = connection
        self.clientID = clientID
        self.refreshToken = refreshToken
    }

    func step() throws -> Bool {
        let body = BenchProvider.form([
            ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", clientID),
        ])
        guard let refresh = try BenchProvider.token(connection, body) else { return false }
        refreshToken = refresh
        return true
    }
}

/// The provider's figures (issue 23, item 8): code exchanges, and token-endpoint refreshes beside
/// /v1 refreshes in alternating rounds, each with the raw verifies measured around it.
struct OAuthNumbers {
    let exchanges: LoadResult
    let exchangeVerifies: VerifiesAround
    let tokenRefreshes: LoadResult
    /// `POST /v1/sessions/refresh` rotations in the rounds between the token endpoint's.
    let apiRefreshes: LoadResult
    let refreshVerifies: VerifiesAround
    let clients: Int
}

extension Benchmark {
    /// Code exchanges, then token-endpoint refresh rotations alternating with /v1 ones, on the
    /// device logins' server (started with the provider on, `clientID` registered).
    /// - Parameter apiRefreshes: the /v1 refresh workers of the same server, one per client.
    func measureOAuth(port: UInt16, clientID: String, apiRefreshes: [RefreshWorker]) throws {
        let exchangers = try parallelMap(options.concurrency, threads: options.concurrency) { index in
            try CodeExchangeWorker(port: port, username: "bench-oauth-\(index)", clientID: clientID)
        }
        progress(
            "OAuth code exchanges (POST /v1/oauth/authorize + POST /oauth/token), \(exchangers.count) clients, \(durations.exchanges) s"
        )
        let before = try measureVerify("just before the code exchanges")
        let exchanges = runLoad(exchangers, warmup: durations.warmup, duration: durations.exchanges)
        let between = try measureVerify("between the code exchanges and the refreshes")
        progress(
            "refresh rotations on /oauth/token and /v1/sessions/refresh alternating, \(exchangers.count) clients, "
                + "\(durations.refresh) s each")
        let (token, api) = alternate(
            exchangers.map {
                TokenRefreshWorker(
                    connection: $0.connection, clientID: clientID, refreshToken: $0.refreshToken)
            },
            apiRefreshes, rounds: 2, roundSeconds: durations.refresh / 2, warmup: 0.1)
        let after = try measureVerify("just after the refreshes")
        report.oauth = OAuthNumbers(
            exchanges: exchanges, exchangeVerifies: VerifiesAround(before, between), tokenRefreshes: token,
            apiRefreshes: api,
            refreshVerifies: VerifiesAround(between, after), clients: exchangers.count)
    }
}

extension Report {
    /// Issue 23's figures without a target: code exchanges and token-endpoint refreshes.
    var oauthInformation: [(title: String, line: String, numbers: [String: Any])] {
        guard let oauth else { return [] }
        let exchangeVerifies = oauth.exchangeVerifies.perSecond
        let exchangeRatio = oauth.exchangeVerifies.ratio(of: oauth.exchanges.perSecond)
        let refreshVerifies = oauth.refreshVerifies.perSecond
        let refreshRatio = oauth.refreshVerifies.ratio(of: oauth.tokenRefreshes.perSecond)
        let apiRatio = oauth.refreshVerifies.ratio(of: oauth.apiRefreshes.perSecond)
        let versusAPI =
            oauth.apiRefreshes.perSecond > 0
            ? oauth.tokenRefreshes.perSecond / oauth.apiRefreshes.perSecond : 0
        func numbers(_ result: LoadResult, _ verifies: Double, _ ratio: Double) -> [String: Any] {
            [
                "per_second": result.perSecond, "ratio_to_verifies": ratio, "verifies_per_second": verifies,
                "p50_ms": result.percentile(0.5), "p99_ms": result.percentile(0.99),
                "cpu_us_each": result.cpuPerOperation, "failed": result.failed, "seconds": result.window,
                "clients": oauth.clients,
            ]
        }
        var refreshNumbers = numbers(oauth.tokenRefreshes, refreshVerifies, refreshRatio)
        refreshNumbers["v1"] = numbers(oauth.apiRefreshes, refreshVerifies, apiRatio)
        refreshNumbers["ratio_to_v1"] = versusAPI
        return [
            (
                "OAuth code exchanges/s / raw P-256 verifies/s (1 core)",
                "\(f(oauth.exchanges.perSecond, 0)) exchanges/s = \(f(exchangeRatio, 3)) x \(f(exchangeVerifies, 0)) "
                    + "verifies/s; one = POST /v1/oauth/authorize (bearer session, PKCE S256: the code written) + "
                    + "POST /oauth/token authorization_code (the code used, a session with tokens written, access "
                    + "and ID token signed: 2 ES256 signs); \(latency(oauth.exchanges)), \(failures(oauth.exchanges)), "
                    + "\(oauth.clients) clients",
                numbers(oauth.exchanges, exchangeVerifies, exchangeRatio)
            ),
            (
                "refresh rotations on the token endpoint/s / raw P-256 verifies/s (1 core)",
                "\(f(oauth.tokenRefreshes.perSecond, 0)) rotations/s = \(f(refreshRatio, 3)) x \(f(refreshVerifies, 0)) "
                    + "verifies/s (POST /oauth/token grant_type=refresh_token, form-encoded; new access and ID token "
                    + "signed: 2 ES256 signs); \(latency(oauth.tokenRefreshes)), \(failures(oauth.tokenRefreshes)); "
                    + "in alternating rounds with POST /v1/sessions/refresh (opaque tokens, no signature): "
                    + "\(f(oauth.apiRefreshes.perSecond, 0))/s = \(f(apiRatio, 3)) x verifies, "
                    + "\(latency(oauth.apiRefreshes)), \(failures(oauth.apiRefreshes)); token endpoint / v1 = "
                    + "\(f(versusAPI, 2))",
                refreshNumbers
            ),
        ]
    }
}
