import Foundation
import KeyboundCrypto
import KeyboundWire

/// The request pipeline shared by the live server and the in-process test mode: routing,
/// problem+json errors, metrics and the access log.
final class Application: Sendable {
    let configuration: Configuration
    let database: any Database
    let hasher: PasswordHasher
    /// The HMAC key of login challenges, shared through the database (``LoginChallenge``).
    let challengeKey: Data
    /// The server's DPoP nonces, the same on every instance (``DPoPNonces``).
    let dpopNonces: DPoPNonces
    let metrics = Metrics()
    /// The issuer's private signing keys, opened, by kid (``SigningKeyRecord``).
    let signingKeyCache = Locked<[String: P256SigningKey]>([:])
    let logger: Logger
    /// The port the API listener is bound to, set when the server starts: the default passkey
    /// origin (``Configuration/origins``) names it.
    let listeningPort = Locked<UInt16?>(nil)
    /// The port the console's listener is bound to, when it runs: its default origin names it.
    let adminPort = Locked<UInt16?>(nil)
    /// What this instance counted for the console's overview and has not written yet.
    let traffic = TrafficCounters()
    /// Signalled when a write that emitted events has committed: the webhook deliverer
    /// (``WebhookDeliverer``) sends them at once instead of at its next poll.
    let webhookWakeUp = DispatchSemaphore(value: 0)
    /// The ids of the `Idempotency-Key`s whose requests run on this instance now
    /// (``IdempotentRequest``): a second one is answered 409.
    let idempotencyKeysInFlight = Locked<Set<String>>([])
    /// The listeners a request can arrive on; each has its own routes.
    enum Listener: Sendable {
        /// The API port (``Configuration/host``:``Configuration/port``).
        case api
        /// The metrics port (``Configuration/metricsListen``).
        case metrics
        /// The console's port (``Configuration/adminListen``).
        case admin

        fileprivate var router: Router {
            switch self {
            case .api: Application.apiRouter
            case .metrics: Application.metricsRouter
            case .admin: Application.adminRouter
            }
        }
    }

    private static let apiRouter = Router(Application.routes)
    private static let metricsRouter = Router(Application.metricsRoutes)
    private static let adminRouter = Router(Application.adminRoutes)
    /// The API requests (method and path) of routes that answer at once (``Route/answersAtOnce``).
    private static let answeredAtOnce = Set(
        Application.routes.filter(\.answersAtOnce).map { RequestLine(method: $0.method, path: $0.pattern) })

    private struct RequestLine: Hashable {
        let method: String
        let path: String
    }

    /// Whether an API request may be answered on the HTTP thread that read it, instead of being
    /// handed to a handler thread: its route only reads (``Route/answersAtOnce``) and reads never
    /// leave this process (SQLite). Handing such a request over costs more than answering it: two
    /// thread switches, and a wake-up of the HTTP thread to send the answer. A request that
    /// writes waits for its group commit, and one that reads from PostgreSQL waits for the
    /// network: those always go to a handler thread, so that they hold no HTTP thread. A request
    /// with a DPoP proof writes (its proof's single use), so it is handed over too.
    func answersAtOnce(_ request: HTTPRequest) -> Bool {
        database.readsInProcess && request.headers["dpop"] == nil
            && Self.answeredAtOnce.contains(RequestLine(method: request.method, path: request.path))
    }

    var clock: ServerClock { configuration.clock }

    /// - Parameter database: storage to use instead of opening ``Configuration/databaseURL``
    ///   (tests wrap the real one to act between two transactions of a request).
    init(configuration: Configuration, database: (any Database)? = nil) throws {
        self.configuration = configuration
        logger = Logger(sink: configuration.log, clock: configuration.clock)
        let storage =
            try database
            ?? openDatabase(
                url: configuration.databaseURL, connections: configuration.workerThreads + 2,
                synchronous: configuration.sqliteSynchronous, password: configuration.databasePassword,
                timeout: configuration.databaseTimeout)
        self.database = CommittedEffects(base: storage)
        try Self.checkPasskeySettings(configuration)
        try Self.checkOAuthSettings(configuration)
        try Migrations.apply(to: self.database)
        challengeKey = try ServerSecrets.read(ServerSecrets.loginChallengeKey, from: self.database)
        dpopNonces = try DPoPNonces(challengeKey: challengeKey, lifetime: configuration.dpopNonceLifetime)
        hasher = try PasswordHasher(
            parameters: configuration.argon2, concurrency: configuration.hashingConcurrency)
        try prepareSigningKeys()
    }

    /// Handles one request that arrived on `listener`. Never throws: every failure becomes a
    /// problem response.
    func handle(_ request: HTTPRequest, on listener: Listener = .api) -> HTTPResponse {
        let started = DispatchTime.now().uptimeNanoseconds
        let client = ClientAddress.resolve(
            peer: request.clientAddress, headers: request.headers,
            trustedProxies: configuration.trustedProxies, header: configuration.forwardedHeader)
        var (routeName, response) = dispatch(request, on: listener, client: client)
        // RFC 9449 §8, §9: a fresh nonce with every answer to a DPoP request, refusals included.
        if let nonce = dpopNonceHeader(for: request) { response.headers[DPoP.nonceHeader] = nonce }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        metrics.recordRequest(route: routeName, status: response.status, seconds: seconds)
        logger.log(
            .info, "request",
            [
                ("method", request.method), ("route", routeName), ("status", response.status),
                ("duration_ms", seconds * 1000), ("client", client.text),
            ])
        return response
    }

    private func dispatch(_ request: HTTPRequest, on listener: Listener, client: ClientAddress) -> (
        String, HTTPResponse
    ) {
        switch listener.router.match(method: request.method, path: request.path) {
        case .notFound:
            return ("unmatched", APIError(404, .notFound, "No such path.").response)
        case .methodNotAllowed(let pattern, let allowed):
            var error = APIError(405, .methodNotAllowed, "Use \(allowed.joined(separator: ", ")).")
            error.headers["Allow"] = allowed.joined(separator: ", ")
            return (pattern, error.response(oauth: Self.oauthPaths.contains(pattern)))
        case .found(let route, let parameters):
            if request.bodyExceededLimit {
                let detail = "The body is larger than \(configuration.bodyLimit) bytes."
                return (
                    route.pattern, APIError(413, .bodyTooLarge, detail).response(oauth: route.speaksOAuth)
                )
            }
            if !request.body.isEmpty, !route.speaksOAuth, !request.hasJSONContentType {
                let detail = "A request body must be sent as Content-Type: application/json."
                return (route.pattern, APIError(415, .unsupportedMediaType, detail).response)
            }
            let context = RequestContext(
                request: request, parameters: parameters, now: clock.nowToTheMillisecond,
                clientAddress: client, listener: listener)
            do {
                return (route.pattern, try respond(route, context))
            } catch let error as APIError {
                return (route.pattern, error.response)
            } catch {
                if let storage = error as? DatabaseError, let problem = APIError(storage: storage) {
                    switch storage {
                    case .unavailable(let reason):
                        // The database is unreachable (PostgreSQL stopped, restarting, or cut
                        // off); the storage reconnects by itself once it is back.
                        logger.log(
                            .warning, "database unavailable", [("route", route.pattern), ("error", reason)])
                    case .busy(let reason):
                        // Too slow or too contended (a commit that waits for a lost standby
                        // holds the group lock): the client was told to retry.
                        logger.log(.warning, "database busy", [("route", route.pattern), ("error", reason)])
                    default: break
                    }
                    return (route.pattern, problem.response(oauth: route.speaksOAuth))
                }
                // Internal errors carry no request data (no secrets); log the error itself.
                logger.log(
                    .error, "internal error",
                    [("route", route.pattern), ("error", String(describing: error))])
                let failure = APIError(500, .internal, "An internal error occurred.")
                return (route.pattern, failure.response(oauth: route.speaksOAuth))
            }
        }
    }

    /// The paths of the routes that speak OAuth (``Route/speaksOAuth``).
    private static let oauthPaths = Set(routes.filter(\.speaksOAuth).map(\.pattern))
}
