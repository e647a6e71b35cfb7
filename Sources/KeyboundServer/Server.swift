import Foundation

/// A failure to start the server or to administer its database, typed so that an operator (or
/// the supervisor that restarts the process) can tell which one it is: ``kind`` says what to
/// fix, ``description`` says it in words.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    /// Which failure it is. New kinds may be added: compare with the static values.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The kind's name, as ``ServerError/description`` starts with it.
        public let description: String

        /// Another process listens on the address (EADDRINUSE): stop it or pick another port.
        public static let addressInUse = Kind(description: "addressInUse")
        /// The listen address cannot be used (not a numeric address, not on this host).
        public static let cannotListen = Kind(description: "cannotListen")
        /// The TLS certificate or key is missing, unreadable or unusable.
        public static let tls = Kind(description: "tls")
        /// The database cannot be opened or reached (path, permissions, server down).
        public static let databaseUnreachable = Kind(description: "databaseUnreachable")
        /// The database was migrated by a newer Keybound: run that version, or restore a backup.
        public static let schemaTooNew = Kind(description: "schemaTooNew")
        /// The configuration cannot work (an unsupported database URL, impossible parameters).
        public static let invalidConfiguration = Kind(description: "invalidConfiguration")
        /// ``Server/start()`` on a server that is already running.
        public static let alreadyRunning = Kind(description: "alreadyRunning")
        /// An account an operator tried to create breaks the rules or its username is taken.
        public static let accountRefused = Kind(description: "accountRefused")
        /// An operator named a user that does not exist.
        public static let userNotFound = Kind(description: "userNotFound")
        /// An OAuth client an operator tried to register breaks the rules.
        public static let clientRefused = Kind(description: "clientRefused")
        /// An operator named an OAuth client that does not exist.
        public static let clientNotFound = Kind(description: "clientNotFound")
        /// A webhook endpoint an operator tried to register was refused (its URL, its events).
        public static let webhookRefused = Kind(description: "webhookRefused")
        /// An operator named a webhook endpoint or delivery that does not exist.
        public static let webhookNotFound = Kind(description: "webhookNotFound")
    }

    /// Which failure it is.
    public let kind: Kind
    /// What went wrong, for the operator.
    public let description: String

    init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        description = detail
    }

    /// The failure of opening the database and building the application, by its cause.
    static func opening(_ error: any Error) -> ServerError {
        switch error {
        case let error as ServerError: error
        case DatabaseError.schemaTooNew(let version):
            ServerError(
                .schemaTooNew,
                "the database schema is version \(version), newer than this server knows "
                    + "(\(Migrations.newest)): run the Keybound that migrated it")
        case let error as SigningKeyError:
            ServerError(.invalidConfiguration, error.description)
        case DatabaseError.unsupportedURL:
            ServerError(.invalidConfiguration, "\(error)")
        case let error as DatabaseError:
            ServerError(.databaseUnreachable, "cannot open the database: \(error)")
        default:
            ServerError(.invalidConfiguration, "cannot start: \(error)")
        }
    }
}

/// The Keybound API server.
///
/// ```swift
/// let configuration = Configuration.testing(databasePath: "/tmp/keybound.sqlite")  // port 0
/// let server = try Server(configuration: configuration)
/// try server.start()
/// guard let baseURL = server.baseURL else { … }  // http://127.0.0.1:<port>
/// …
/// server.stop()
/// ```
///
/// ``handle(_:)`` drives the same router without sockets (no ``start()`` needed).
public final class Server: Sendable {
    /// The configuration the server was created with.
    public let configuration: Configuration
    private let application: Application
    /// The API listener and, when configured, the metrics and console listeners, while running.
    private let listeners = Locked<(api: HTTPDaemon, metrics: HTTPDaemon?, admin: HTTPDaemon?)?>(nil)
    /// Housekeeping's timer and the traffic counters' flush timer, while running.
    private let housekeeping = Locked<[any DispatchSourceTimer]>([])
    /// Sends webhook deliveries while running.
    private let deliverer = Locked<WebhookDeliverer?>(nil)

    /// Opens the database and applies migrations. Does not listen yet.
    /// - Throws: ``ServerError`` when the database cannot be opened or migrated.
    public convenience init(configuration: Configuration) throws {
        try self.init(configuration: configuration, database: nil)
    }

    /// - Parameter database: storage to use instead of opening ``Configuration/databaseURL``
    ///   (tests wrap the real one to act inside a request).
    init(configuration: Configuration, database: (any Database)?) throws {
        // A write to a closed pipe or socket (a log line to a closed standard error) must fail
        // with EPIPE, not end the process.
        signal(SIGPIPE, SIG_IGN)
        self.configuration = configuration
        do {
            application = try Application(configuration: configuration, database: database)
        } catch {
            throw ServerError.opening(error)
        }
        if !configuration.argon2.meetsOWASPMinimum {
            application.logger.log(.warning, "argon2id parameters are below the OWASP minimum (testing only)")
        }
        if PostgresURL.names(configuration.databaseURL),
            let url = try? PostgresURL(configuration.databaseURL),
            let unverified = url.unverifiedTransport(environment: ProcessInfo.processInfo.environment)
        {
            // Anyone on the network path can pose as the database and read what it is sent.
            application.logger.log(
                .warning, "postgresql server not verified",
                [
                    ("host", unverified.host), ("sslmode", unverified.sslmode),
                    ("fix", "add sslmode=verify-full and sslrootcert=FILE to the database URL"),
                ])
        }
    }

    /// Starts listening on ``Configuration/host``:``Configuration/port`` with a pool of worker
    /// threads, and on ``Configuration/metricsListen`` and ``Configuration/adminListen`` when set.
    /// - Throws: ``ServerError`` when the address is taken or the TLS files are unreadable.
    public func start() throws {
        var tlsKey: String?
        var tlsCertificate: String?
        switch (configuration.tlsKeyPath, configuration.tlsCertificatePath) {
        case (nil, nil): break
        case (let keyPath?, let certificatePath?):
            guard let key = try? String(contentsOfFile: keyPath, encoding: .utf8),
                let certificate = try? String(contentsOfFile: certificatePath, encoding: .utf8)
            else { throw ServerError(.tls, "cannot read the TLS key or certificate file") }
            tlsKey = key
            tlsCertificate = certificate
        default:
            throw ServerError(.tls, "TLS needs both a certificate and a key")
        }
        let options = HTTPDaemonOptions(
            host: configuration.host, port: configuration.port, threads: configuration.workerThreads,
            handlerThreads: configuration.handlerThreads,
            connectionTimeoutSeconds: configuration.connectionTimeout,
            requestTimeoutSeconds: configuration.requestTimeout,
            connectionLimit: configuration.connectionLimit,
            perClientConnectionLimit: configuration.perIPConnectionLimit,
            perSlash56ConnectionLimit: configuration.slash56ConnectionLimit,
            perSlash48ConnectionLimit: configuration.slash48ConnectionLimit,
            bodyLimit: configuration.bodyLimit, tlsKeyPEM: tlsKey, tlsCertificatePEM: tlsCertificate)
        try listeners.withLock { current in
            guard current == nil else { throw ServerError(.alreadyRunning, "the server is already running") }
            do {
                let api = try HTTPDaemon(
                    options: options, answersAtOnce: { [application] in application.answersAtOnce($0) }
                ) { [application] request in
                    application.handle(request)
                }
                var metrics: HTTPDaemon?
                if let address = configuration.metricsListen {
                    // Scrapers need a few plain-HTTP connections and send no bodies.
                    let metricsOptions = HTTPDaemonOptions(
                        host: address.host, port: address.port, threads: 1, handlerThreads: 1,
                        connectionTimeoutSeconds: configuration.connectionTimeout,
                        requestTimeoutSeconds: configuration.requestTimeout, connectionLimit: 16,
                        perClientConnectionLimit: 4, bodyLimit: 1024, tlsKeyPEM: nil, tlsCertificatePEM: nil)
                    metrics = try HTTPDaemon(options: metricsOptions) { [application] request in
                        application.handle(request, on: .metrics)
                    }
                }
                var admin: HTTPDaemon?
                if let address = configuration.adminListen {
                    // A few operators' browsers: few threads and connections; bodies as on the API.
                    var adminOptions = options
                    (adminOptions.host, adminOptions.port) = (address.host, address.port)
                    (adminOptions.threads, adminOptions.handlerThreads) = (1, 4)
                    (adminOptions.connectionLimit, adminOptions.perClientConnectionLimit) = (64, 16)
                    admin = try HTTPDaemon(options: adminOptions) { [application] request in
                        application.handle(request, on: .admin)
                    }
                }
                current = (api, metrics, admin)
                application.listeningPort.withLock { $0 = api.port }
                application.adminPort.withLock { $0 = admin?.port }
            } catch let error as HTTPDaemonError {
                throw ServerError(error.kind, error.description)
            }
        }
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        timer.schedule(deadline: .now(), repeating: .seconds(600))
        timer.setEventHandler { [application] in application.purgeExpired() }
        let counting = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        counting.schedule(
            deadline: .now() + configuration.trafficFlushInterval,
            repeating: configuration.trafficFlushInterval)
        counting.setEventHandler { [application] in application.flushTraffic() }
        counting.resume()
        timer.resume()
        housekeeping.withLock { $0 = [timer, counting] }
        let webhooks = WebhookDeliverer(application: application)
        webhooks.start()
        deliverer.withLock { $0 = webhooks }
        application.logger.log(
            .info, "listening",
            [
                ("address", configuration.host), ("port", Int(port ?? 0)),
                ("tls", tlsKey != nil ? "on" : "off"),
                ("server_id", configuration.serverID),
            ])
        application.logger.log(
            .info, "passkeys",
            [
                ("rp_id", application.relyingPartyID),
                ("origins", application.passkeyOrigins.joined(separator: " ")),
            ])
        if let metricsPort, let address = configuration.metricsListen {
            application.logger.log(
                .info, "metrics listening", [("address", address.host), ("port", Int(metricsPort))])
        }
        if let adminPort, let address = configuration.adminListen {
            application.logger.log(
                .info, "console listening",
                [("address", address.host), ("port", Int(adminPort)), ("origin", application.adminOrigin)])
        }
    }

    /// The port the server listens on (the real one when configured with 0), or nil when stopped.
    public var port: UInt16? { listeners.withLock { $0?.api.port } }

    /// The port of the metrics listener while running, or nil (stopped, or not configured).
    public var metricsPort: UInt16? { listeners.withLock { $0?.metrics?.port } }

    /// `http://host:port/metrics` of the metrics listener while running, else nil.
    public var metricsURL: URL? {
        guard let port = metricsPort, let host = configuration.metricsListen?.host else { return nil }
        return URL(string: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/metrics")
    }

    /// The port of the console's listener while running, or nil (stopped, or not configured).
    public var adminPort: UInt16? { listeners.withLock { $0?.admin?.port } }

    /// `http://host:port` (or `https://`) of the console's listener while running, else nil.
    public var adminURL: URL? {
        guard let port = adminPort, let host = configuration.adminListen?.host else { return nil }
        let scheme = configuration.tlsKeyPath == nil ? "http" : "https"
        return URL(string: "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)")
    }

    /// Writes the traffic this instance counted since its last flush into the database now (it
    /// does so every ``Configuration/trafficFlushInterval`` and when it stops).
    public func flushTrafficCounts() { application.flushTraffic() }

    /// `http://host:port` (or `https://`) while running, else nil.
    public var baseURL: URL? {
        guard let port else { return nil }
        let scheme = configuration.tlsKeyPath == nil ? "http" : "https"
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return URL(string: "\(scheme)://\(host):\(port)")
    }

    /// Stops accepting connections, lets requests in flight finish (up to `gracePeriod` seconds),
    /// then stops. Every acknowledged change is already committed. Safe to call more than once.
    public func stop(gracePeriod: TimeInterval = 5) {
        let running = listeners.withLock { current in
            defer { current = nil }
            return current
        }
        guard let running else { return }
        housekeeping.withLock { timers in
            for timer in timers { timer.cancel() }
            timers = []
        }
        running.metrics?.stop(gracePeriod: 0)
        running.admin?.stop(gracePeriod: gracePeriod)
        running.api.stop(gracePeriod: gracePeriod)
        // What this instance counted since the last flush, so that the console misses none of it.
        application.flushTraffic()
        deliverer.withLock { deliverer in
            defer { deliverer = nil }
            return deliverer
        }?.stop()
        application.logger.log(.info, "stopped")
        configuration.log.flush()
    }

    /// Handles one request in-process, through the same router, services and storage as the
    /// live server, without a socket. For tests.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        var request = request
        request.bodyExceededLimit = request.body.count > configuration.bodyLimit
        if request.bodyExceededLimit { request.body = Data() }
        let application = application
        let sendableRequest = request
        // Handlers block (Argon2id, SQLite): run them off the cooperative thread pool.
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: application.handle(sendableRequest))
            }
        }
    }

    deinit { stop(gracePeriod: 0) }
}
