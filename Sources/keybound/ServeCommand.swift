import Dispatch
import Foundation
import KeyboundServer
import KeyboundWebAuthn

/// `keybound serve`: runs the HTTP API server until SIGTERM or SIGINT.
enum ServeCommand {
    /// The options, in the groups `--help` shows: the one table that parsing and help both use.
    static let sections: [(title: String, options: [Option])] = [
        (
            "options",
            [
                .value(
                    "listen", "HOST:PORT", "numeric address and port", variable: "KEYBOUND_LISTEN",
                    default: "127.0.0.1:8420"),
                .value(
                    "db", "URL", "sqlite:PATH or postgres://USER@HOST:PORT/DB",
                    variable: "KEYBOUND_DB", default: "sqlite:keybound.sqlite"),
                .value(
                    "sqlite-synchronous", "MODE", "full (survives power loss) or normal (kill -9, faster)",
                    variable: "KEYBOUND_SQLITE_SYNCHRONOUS", default: "full"),
                .value(
                    "server-id", "ID", "id written into signing payloads", variable: "KEYBOUND_SERVER_ID",
                    default: "keybound"),
                .value(
                    "tls-cert", "FILE", "PEM certificate (with --tls-key: HTTPS)",
                    variable: "KEYBOUND_TLS_CERT"),
                .value("tls-key", "FILE", "PEM private key", variable: "KEYBOUND_TLS_KEY"),
                .value(
                    "workers", "N", "HTTP worker threads", variable: "KEYBOUND_WORKERS",
                    default: "core count, min 2"),
                .value(
                    "handler-threads", "N", "request handler threads", variable: "KEYBOUND_HANDLER_THREADS",
                    default: "64"),
                .value(
                    "argon2-memory", "KIB", "Argon2id memory, >= 19456", variable: "KEYBOUND_ARGON2_MEMORY",
                    default: "19456"),
                .value(
                    "argon2-iterations", "N", "Argon2id passes, >= 2", variable: "KEYBOUND_ARGON2_ITERATIONS",
                    default: "2"),
            ]
        ),
        (
            "sessions and devices",
            [
                .flag(
                    "single-session", "any login ends the user's other sessions (variable: 1)",
                    variable: "KEYBOUND_SINGLE_SESSION"),
                .value(
                    "access-token-ttl", "SEC", "access token lifetime", variable: "KEYBOUND_ACCESS_TOKEN_TTL",
                    default: "900"),
                .value(
                    "refresh-token-ttl", "SEC", "refresh token lifetime",
                    variable: "KEYBOUND_REFRESH_TOKEN_TTL",
                    default: "2592000"),
                .value(
                    "session-max-age", "SEC", "session lifetime from its login",
                    variable: "KEYBOUND_SESSION_MAX_AGE", default: "2592000"),
                .value(
                    "retention", "SEC", "keep ended sessions and expired approvals this long",
                    variable: "KEYBOUND_RETENTION", default: "2592000"),
                .value(
                    "max-devices", "N", "active devices per user", variable: "KEYBOUND_MAX_DEVICES",
                    default: "10"),
            ]
        ),
        (
            "connections (docs/server.md, \"Connections and limits\")",
            [
                .value(
                    "body-limit", "BYTES", "largest request body", variable: "KEYBOUND_BODY_LIMIT",
                    default: "65536"),
                .value(
                    "connection-timeout", "SEC", "idle connection timeout",
                    variable: "KEYBOUND_CONNECTION_TIMEOUT", default: "30"),
                .value(
                    "request-timeout", "SEC", "a request must arrive whole in this time",
                    variable: "KEYBOUND_REQUEST_TIMEOUT", default: "30"),
                .value(
                    "connection-limit", "N", "simultaneous connections",
                    variable: "KEYBOUND_CONNECTION_LIMIT",
                    default: "1024"),
                .value(
                    "per-ip-connection-limit", "N", "per IPv4 address or IPv6 /64, 0: no limit",
                    variable: "KEYBOUND_PER_IP_CONNECTION_LIMIT", default: "64"),
                .value(
                    "per-ipv6-56-connection-limit", "N", "per IPv6 /56, 0: no limit",
                    variable: "KEYBOUND_PER_IPV6_56_CONNECTION_LIMIT", default: "2 x per-ip"),
                .value(
                    "per-ipv6-48-connection-limit", "N", "per IPv6 /48, 0: no limit",
                    variable: "KEYBOUND_PER_IPV6_48_CONNECTION_LIMIT", default: "4 x per-ip"),
                .value(
                    "metrics-listen", "HOST:PORT", "serve GET /metrics there, not on the API port",
                    variable: "KEYBOUND_METRICS_LISTEN", default: "off"),
            ]
        ),
        (
            "passkeys and App Attest (docs/server.md, \"Passkeys and App Attest\")",
            [
                .value(
                    "rp-id", "ID", "the WebAuthn RP ID: the origins' domain", variable: "KEYBOUND_RP_ID",
                    default: "the first --origin's host, else localhost"),
                .value(
                    "origin", "URL", "an origin passkeys run on, e.g. https://example.org; repeatable",
                    variable: "KEYBOUND_ORIGIN", default: "http://localhost:PORT; variable: comma-separated"),
                .value(
                    "passkey-user-verification", "MODE", "required (biometrics or PIN) or preferred",
                    variable: "KEYBOUND_PASSKEY_USER_VERIFICATION", default: "required"),
                .value(
                    "max-passkeys", "N", "passkeys per user", variable: "KEYBOUND_MAX_PASSKEYS", default: "10"
                ),
                .value(
                    "app-id", "TEAMID.BUNDLE", "an app whose App Attest attestations count; repeatable",
                    variable: "KEYBOUND_APP_ID", default: "none; variable: comma-separated"),
                .value(
                    "app-attest-environment", "ENV", "development or production",
                    variable: "KEYBOUND_APP_ATTEST_ENVIRONMENT", default: "production"),
                .flag(
                    "require-app-attest", "bind only devices App Attest vouches for (variable: 1)",
                    variable: "KEYBOUND_REQUIRE_APP_ATTEST"),
            ]
        ),
        (
            "throttling and sign-up (docs/server.md, \"Throttling\")",
            [
                .value(
                    "registration", "MODE", "open, or closed (403; keybound user add)",
                    variable: "KEYBOUND_REGISTRATION", default: "open"),
                .value(
                    "signup-limit", "N", "sign-ups per client address per hour, 0: off",
                    variable: "KEYBOUND_SIGNUP_LIMIT", default: "10"),
                .value(
                    "address-failure-limit", "N", "failed logins per client address (15 min), 0: off",
                    variable: "KEYBOUND_ADDRESS_FAILURE_LIMIT", default: "20"),
                .value(
                    "trusted-proxy", "CIDR", "a proxy whose X-Forwarded-For counts; repeatable",
                    variable: "KEYBOUND_TRUSTED_PROXY", default: "none; variable: comma-separated"),
                .value(
                    "forwarded-header", "NAME", "the one header they write: x-forwarded-for or forwarded",
                    variable: "KEYBOUND_FORWARDED_HEADER", default: "x-forwarded-for"),
                .help,
            ]
        ),
    ]

    /// Every option of `keybound serve`.
    static var options: [Option] { sections.flatMap(\.options) }

    static var usage: String {
        """
        keybound serve — run the Keybound HTTP API server

        usage: keybound serve [options]

        Every option can also be set by the environment variable shown beside it; the flag wins.
        The PostgreSQL password comes from KEYBOUND_DB_PASSWORD or PGPASSWORD, never from a flag.

        \(sectionedHelp)

        Logs are JSON lines on standard error. SIGTERM or SIGINT stops the server gracefully.
        """
    }

    /// The help lines of every option, aligned across all sections, under the sections' titles.
    private static var sectionedHelp: String {
        var lines = Option.help(options).split(separator: "\n", omittingEmptySubsequences: false)[...]
        return sections.map { section in
            defer { lines = lines.dropFirst(section.options.count) }
            return ([section.title + ":"] + lines.prefix(section.options.count)).joined(separator: "\n")
        }.joined(separator: "\n\n")
    }

    static func run(_ arguments: [String]) async -> Int32 {
        let configuration: Configuration
        do {
            let parsed = try Arguments(arguments, options: options, command: "keybound serve")
            if parsed.isSet("help") {
                print(usage)
                return 0
            }
            guard parsed.positionals.isEmpty else {
                throw UsageError("unexpected argument '\(parsed.positionals[0])' (see keybound serve --help)")
            }
            configuration = try makeConfiguration(parsed, environment: ProcessInfo.processInfo.environment)
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
    static func makeConfiguration(_ arguments: Arguments, environment: [String: String]) throws
        -> Configuration
    {
        var configuration = Configuration()
        /// The flag's value, else its variable's (an empty variable counts as unset).
        func value(_ name: String) -> String? {
            let variable = options.first { $0.name == name }?.variable
            return arguments.value(name)
                ?? variable.flatMap { environment[$0] }.flatMap { $0.isEmpty ? nil : $0 }
        }
        func integer(_ name: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = value(name) else { return nil }
            guard let number = Int(text), range.contains(number) else {
                throw UsageError(
                    "--\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        if let listen = value("listen") {
            let address = try listenAddress(listen, flag: "listen")
            configuration.host = address.host
            configuration.port = address.port
        }
        if let url = value("db") {
            if let problem = Configuration.databaseURLProblem(url) {
                throw UsageError(
                    "--db: \(problem) (e.g. sqlite:/var/lib/keybound/keybound.sqlite or "
                        + "postgres://keybound@db.internal:5432/keybound)")
            }
            configuration.databaseURL = url
        }
        configuration.databasePassword = databasePassword(environment)
        if let mode = value("sqlite-synchronous") {
            guard let synchronous = SQLiteSynchronous(rawValue: mode) else {
                throw UsageError("--sqlite-synchronous must be full or normal")
            }
            configuration.sqliteSynchronous = synchronous
        }
        if let serverID = value("server-id") { configuration.serverID = serverID }
        configuration.tlsCertificatePath = value("tls-cert")
        configuration.tlsKeyPath = value("tls-key")
        guard (configuration.tlsCertificatePath == nil) == (configuration.tlsKeyPath == nil) else {
            throw UsageError("--tls-cert and --tls-key go together")
        }
        configuration.singleSession =
            arguments.isSet("single-session")
            || ["1", "true", "yes"].contains(environment["KEYBOUND_SINGLE_SESSION"]?.lowercased() ?? "")
        if let ttl = try integer("access-token-ttl", 60...86_400) { configuration.accessTokenLifetime = ttl }
        if let ttl = try integer("refresh-token-ttl", 300...31_536_000) {
            configuration.refreshTokenLifetime = ttl
        }
        if let age = try integer("session-max-age", 300...31_536_000) { configuration.sessionMaxAge = age }
        if let retention = try integer("retention", 0...315_360_000) { configuration.retention = retention }
        if let devices = try integer("max-devices", 1...1000) { configuration.maxDevicesPerUser = devices }
        if let workers = try integer("workers", 1...256) { configuration.workerThreads = workers }
        if let handlers = try integer("handler-threads", 1...4096) { configuration.handlerThreads = handlers }
        if let limit = try integer("body-limit", 1024...16_777_216) { configuration.bodyLimit = limit }
        if let timeout = try integer("connection-timeout", 1...3600) {
            configuration.connectionTimeout = timeout
        }
        if let timeout = try integer("request-timeout", 1...3600) { configuration.requestTimeout = timeout }
        if let limit = try integer("connection-limit", 1...1_000_000) {
            configuration.connectionLimit = limit
        }
        if let limit = try integer("per-ip-connection-limit", 0...1_000_000) {
            configuration.perIPConnectionLimit = limit
        }
        if let limit = try integer("per-ipv6-56-connection-limit", 0...1_000_000) {
            configuration.perIPv6Slash56ConnectionLimit = limit
        }
        if let limit = try integer("per-ipv6-48-connection-limit", 0...1_000_000) {
            configuration.perIPv6Slash48ConnectionLimit = limit
        }
        if let listen = value("metrics-listen") {
            configuration.metricsListen = try listenAddress(listen, flag: "metrics-listen")
        }
        if let mode = value("registration") {
            guard let registration = Registration(rawValue: mode) else {
                throw UsageError("--registration must be open or closed")
            }
            configuration.registration = registration
        }
        if let limit = try integer("signup-limit", 0...1_000_000) { configuration.signupLimit = limit }
        if let limit = try integer("address-failure-limit", 0...1_000_000) {
            configuration.addressFailureLimit = limit
        }
        var proxies = arguments.values("trusted-proxy")
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
        if let name = value("forwarded-header") {
            guard let header = ForwardedHeader(rawValue: name.lowercased()) else {
                throw UsageError(
                    "--forwarded-header must be x-forwarded-for or forwarded (the one your proxies write)")
            }
            configuration.forwardedHeader = header
        }
        try passkeySettings(&configuration, arguments, environment: environment, value: value)
        if let passkeys = try integer("max-passkeys", 1...1000) {
            configuration.maxPasskeysPerUser = passkeys
        }
        // Production never goes below OWASP's Argon2id minimum.
        if let memory = try integer("argon2-memory", 19_456...4_194_304) {
            configuration.argon2.memoryKiB = memory
        }
        if let iterations = try integer("argon2-iterations", 2...64) {
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

    /// The passkey and App Attest options. The repeatable ones also come from comma-separated
    /// variables.
    private static func passkeySettings(
        _ configuration: inout Configuration, _ arguments: Arguments, environment: [String: String],
        value: (String) -> String?
    ) throws {
        func list(_ name: String, _ variable: String) -> [String] {
            let given = arguments.values(name)
            guard given.isEmpty else { return given }
            return (environment[variable] ?? "").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty }
        }
        configuration.relyingPartyID = value("rp-id")
        configuration.origins = list("origin", "KEYBOUND_ORIGIN")
        if let mode = value("passkey-user-verification") {
            guard ["required", "preferred"].contains(mode) else {
                throw UsageError("--passkey-user-verification must be required or preferred")
            }
            configuration.passkeyUserVerification = mode == "required"
        }
        configuration.appIDs = try list("app-id", "KEYBOUND_APP_ID").map { appID in
            // TEAMID.bundle.id: a ten-character team id, then the bundle id.
            let parts = appID.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 10,
                parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }), !parts[1].isEmpty
            else {
                throw UsageError(
                    "--app-id must be TEAMID.bundle.id, e.g. ABCDE12345.com.example.app, not '\(appID)'")
            }
            return appID
        }
        if let mode = value("app-attest-environment") {
            guard let environment = AppAttest.Environment(rawValue: mode) else {
                throw UsageError("--app-attest-environment must be development or production")
            }
            configuration.appAttestEnvironment = environment
        }
        configuration.requireAppAttest =
            arguments.isSet("require-app-attest")
            || ["1", "true", "yes"].contains(environment["KEYBOUND_REQUIRE_APP_ATTEST"]?.lowercased() ?? "")
        if configuration.requireAppAttest, configuration.appIDs.isEmpty {
            throw UsageError("--require-app-attest needs --app-id: which app's attestations count?")
        }
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
