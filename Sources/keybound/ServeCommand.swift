import Dispatch
import Foundation
import KeyboundServer

/// `keybound serve`: runs the HTTP API server until SIGTERM or SIGINT.
enum ServeCommand {
    static let usage = """
        keybound serve — run the Keybound HTTP API server

        usage: keybound serve [options]

        Every option can also be set by an environment variable; the flag wins.

        options:
          --listen HOST:PORT        numeric address and port       KEYBOUND_LISTEN      (127.0.0.1:8420)
          --db URL                  sqlite:PATH, or postgres://USER@HOST:PORT/DB for several servers
                                    on one database (password: KEYBOUND_DB_PASSWORD or PGPASSWORD)
                                                                   KEYBOUND_DB          (sqlite:keybound.sqlite)
          --server-id ID            id written into signing payloads KEYBOUND_SERVER_ID (keybound)
          --tls-cert FILE           PEM certificate (with --tls-key: HTTPS) KEYBOUND_TLS_CERT
          --tls-key FILE            PEM private key                KEYBOUND_TLS_KEY
          --single-session          any login ends the user's other sessions KEYBOUND_SINGLE_SESSION (=1)
          --access-token-ttl SEC    access token lifetime          KEYBOUND_ACCESS_TOKEN_TTL  (900)
          --refresh-token-ttl SEC   refresh token lifetime         KEYBOUND_REFRESH_TOKEN_TTL (2592000)
          --session-max-age SEC     session lifetime from its login KEYBOUND_SESSION_MAX_AGE (2592000)
          --retention SEC           keep ended sessions, expired approvals this long
                                                                   KEYBOUND_RETENTION   (2592000)
          --max-devices N           active devices per user        KEYBOUND_MAX_DEVICES (10)
          --sqlite-synchronous M    full (survives power loss) or normal (survives kill -9, faster)
                                                                   KEYBOUND_SQLITE_SYNCHRONOUS (full)
          --workers N               HTTP worker threads            KEYBOUND_WORKERS     (core count, min 2)
          --body-limit BYTES        largest request body           KEYBOUND_BODY_LIMIT  (65536)
          --connection-timeout SEC  idle connection timeout        KEYBOUND_CONNECTION_TIMEOUT (30)
          --request-timeout SEC     a request must arrive whole in this time, however it trickles
                                                                   KEYBOUND_REQUEST_TIMEOUT (30)
          --connection-limit N      simultaneous connections       KEYBOUND_CONNECTION_LIMIT (1024)
          --per-ip-connection-limit N  connections per client IPv4 address or IPv6 /64, 0: no limit
                                                                   KEYBOUND_PER_IP_CONNECTION_LIMIT (64)
          --metrics-listen HOST:PORT  serve GET /metrics there (plain HTTP), not on the API port
                                                                   KEYBOUND_METRICS_LISTEN (off)
          --argon2-memory KIB       Argon2id memory, >= 19456      KEYBOUND_ARGON2_MEMORY (19456)
          --argon2-iterations N     Argon2id passes, >= 2          KEYBOUND_ARGON2_ITERATIONS (2)

        throttling and sign-up (see docs/server.md, "Throttling"):
          --registration M          open (anyone signs up) or closed (403; operators run
                                    keybound user add)             KEYBOUND_REGISTRATION (open)
          --signup-limit N          sign-ups per client address per hour, 0 = off
                                                                   KEYBOUND_SIGNUP_LIMIT (10)
          --address-failure-limit N failed logins of any kind per client address (15 min) before
                                    it is blocked, 0 = off         KEYBOUND_ADDRESS_FAILURE_LIMIT (20)
          --trusted-proxy CIDR      a reverse proxy whose X-Forwarded-For/Forwarded names the
                                    client; repeatable             KEYBOUND_TRUSTED_PROXY (comma-separated)
          --help                    print this help

        Logs are JSON lines on standard error. SIGTERM or SIGINT stops the server gracefully.
        """

    static func run(_ arguments: [String]) async -> Int32 {
        let configuration: Configuration
        do {
            var parsed = try Arguments(arguments, flagNames: ["help", "single-session"])
            if parsed.flag("help") {
                print(usage)
                return 0
            }
            configuration = try makeConfiguration(&parsed, environment: ProcessInfo.processInfo.environment)
            try parsed.finish()
            guard parsed.positionals.isEmpty else {
                throw UsageError("unexpected argument '\(parsed.positionals[0])' (see keybound serve --help)")
            }
        } catch {
            printError("keybound serve: \(error)")
            return 2
        }
        let server: Server
        do {
            server = try Server(configuration: configuration)
            try server.start()
        } catch {
            printError("keybound serve: \(error)")
            return 1
        }
        await waitForTermination()
        server.stop()
        return 0
    }

    /// Builds the configuration from flags, then `KEYBOUND_*` variables, then defaults.
    static func makeConfiguration(_ arguments: inout Arguments, environment: [String: String]) throws
        -> Configuration
    {
        var configuration = Configuration()
        func value(_ flag: String, _ variable: String) -> String? {
            arguments.option(flag) ?? environment[variable].flatMap { $0.isEmpty ? nil : $0 }
        }
        func integer(_ flag: String, _ variable: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = value(flag, variable) else { return nil }
            guard let number = Int(text), range.contains(number) else {
                throw UsageError(
                    "--\(flag) must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        if let listen = value("listen", "KEYBOUND_LISTEN") {
            let address = try listenAddress(listen, flag: "listen")
            configuration.host = address.host
            configuration.port = address.port
        }
        if let url = value("db", "KEYBOUND_DB") {
            if let problem = Configuration.databaseURLProblem(url) {
                throw UsageError(
                    "--db: \(problem) (e.g. sqlite:/var/lib/keybound/keybound.sqlite or "
                        + "postgres://keybound@db.internal:5432/keybound)")
            }
            configuration.databaseURL = url
        }
        configuration.databasePassword = databasePassword(environment)
        if let mode = value("sqlite-synchronous", "KEYBOUND_SQLITE_SYNCHRONOUS") {
            guard let synchronous = SQLiteSynchronous(rawValue: mode) else {
                throw UsageError("--sqlite-synchronous must be full or normal")
            }
            configuration.sqliteSynchronous = synchronous
        }
        if let serverID = value("server-id", "KEYBOUND_SERVER_ID") { configuration.serverID = serverID }
        configuration.tlsCertificatePath = value("tls-cert", "KEYBOUND_TLS_CERT")
        configuration.tlsKeyPath = value("tls-key", "KEYBOUND_TLS_KEY")
        guard (configuration.tlsCertificatePath == nil) == (configuration.tlsKeyPath == nil) else {
            throw UsageError("--tls-cert and --tls-key go together")
        }
        let singleSessionVariable = environment["KEYBOUND_SINGLE_SESSION"]?.lowercased()
        configuration.singleSession =
            arguments.flag("single-session") || ["1", "true", "yes"].contains(singleSessionVariable ?? "")
        if let ttl = try integer("access-token-ttl", "KEYBOUND_ACCESS_TOKEN_TTL", 60...86_400) {
            configuration.accessTokenLifetime = ttl
        }
        if let ttl = try integer("refresh-token-ttl", "KEYBOUND_REFRESH_TOKEN_TTL", 300...31_536_000) {
            configuration.refreshTokenLifetime = ttl
        }
        if let age = try integer("session-max-age", "KEYBOUND_SESSION_MAX_AGE", 300...31_536_000) {
            configuration.sessionMaxAge = age
        }
        if let retention = try integer("retention", "KEYBOUND_RETENTION", 0...315_360_000) {
            configuration.retention = retention
        }
        if let devices = try integer("max-devices", "KEYBOUND_MAX_DEVICES", 1...1000) {
            configuration.maxDevicesPerUser = devices
        }
        if let workers = try integer("workers", "KEYBOUND_WORKERS", 1...256) {
            configuration.workerThreads = workers
        }
        if let limit = try integer("body-limit", "KEYBOUND_BODY_LIMIT", 1024...16_777_216) {
            configuration.bodyLimit = limit
        }
        if let timeout = try integer("connection-timeout", "KEYBOUND_CONNECTION_TIMEOUT", 1...3600) {
            configuration.connectionTimeout = timeout
        }
        // Throttling, registration and client addresses.
        if let mode = value("registration", "KEYBOUND_REGISTRATION") {
            guard let registration = Registration(rawValue: mode) else {
                throw UsageError("--registration must be open or closed")
            }
            configuration.registration = registration
        }
        if let limit = try integer("signup-limit", "KEYBOUND_SIGNUP_LIMIT", 0...1_000_000) {
            configuration.signupLimit = limit
        }
        if let limit = try integer("address-failure-limit", "KEYBOUND_ADDRESS_FAILURE_LIMIT", 0...1_000_000) {
            configuration.addressFailureLimit = limit
        }
        var proxies = arguments.options("trusted-proxy")
        if proxies.isEmpty, let variable = environment["KEYBOUND_TRUSTED_PROXY"] {
            proxies = variable.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        configuration.trustedProxies = try proxies.filter { !$0.isEmpty }.map { text in
            guard let range = CIDR(text) else {
                throw UsageError(
                    "--trusted-proxy must be an address or a range like 10.0.0.0/8 or 2001:db8::/32 "
                        + "(no bits set after the prefix), not '\(text)'")
            }
            return range
        }
        if let timeout = try integer("request-timeout", "KEYBOUND_REQUEST_TIMEOUT", 1...3600) {
            configuration.requestTimeout = timeout
        }
        if let limit = try integer("connection-limit", "KEYBOUND_CONNECTION_LIMIT", 1...1_000_000) {
            configuration.connectionLimit = limit
        }
        if let limit = try integer(
            "per-ip-connection-limit", "KEYBOUND_PER_IP_CONNECTION_LIMIT", 0...1_000_000)
        {
            configuration.perIPConnectionLimit = limit
        }
        if let listen = value("metrics-listen", "KEYBOUND_METRICS_LISTEN") {
            configuration.metricsListen = try listenAddress(listen, flag: "metrics-listen")
        }
        // Production never goes below OWASP's Argon2id minimum.
        if let memory = try integer("argon2-memory", "KEYBOUND_ARGON2_MEMORY", 19_456...4_194_304) {
            configuration.argon2.memoryKiB = memory
        }
        if let iterations = try integer("argon2-iterations", "KEYBOUND_ARGON2_ITERATIONS", 2...64) {
            configuration.argon2.iterations = iterations
        }
        return configuration
    }

    /// The PostgreSQL password: `KEYBOUND_DB_PASSWORD`, else `PGPASSWORD` (never a flag: a
    /// command line is visible to every user of the machine).
    static func databasePassword(_ environment: [String: String]) -> String? {
        [environment["KEYBOUND_DB_PASSWORD"], environment["PGPASSWORD"]].lazy.compactMap { $0 }
            .first { !$0.isEmpty }
    }

    /// Parses `HOST:PORT` (`[IPv6]:PORT`; an empty host is 127.0.0.1).
    private static func listenAddress(_ text: String, flag: String) throws -> ListenAddress {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw UsageError("--\(flag) must be HOST:PORT, e.g. 127.0.0.1:8420 or [::1]:8420")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return ListenAddress(host: host.isEmpty ? "127.0.0.1" : host, port: port)
    }

    /// Suspends until SIGTERM or SIGINT arrives.
    private static func waitForTermination() async {
        let (signals, continuation) = AsyncStream<Int32>.makeStream()
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)  // delivered through the dispatch source instead
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        for await _ in signals { break }
        for source in sources { source.cancel() }
    }
}
