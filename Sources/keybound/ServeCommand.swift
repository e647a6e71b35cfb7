import Dispatch
import Foundation
import KeyboundServer
import KeyboundWebAuthn
import KeyboundWire

/// `keybound serve`: runs the HTTP API server until SIGTERM or SIGINT.
enum ServeCommand {
    /// The options, in the groups `--help` shows: the one table that parsing, checking and help
    /// all use. Each option's default is its setting's value in `Configuration()`.
    static let sections: [(title: String, options: [ServeOption])] = [
        (
            "options",
            [
                .value("listen", "HOST:PORT", "numeric address and port", \.listen, .address),
                database,
                .value(
                    "db-timeout", "SEC", "the longest wait for one PostgreSQL call (then 503)",
                    \.databaseTimeout, .integer(1...60)),
                .value(
                    "sqlite-synchronous", "MODE", "full survives power loss, normal kill -9 (faster)",
                    \.sqliteSynchronous, .choice(SQLiteSynchronous.allCases)),
                .value("server-id", "ID", "id written into signing payloads", \.serverID, .text),
                .value(
                    "tls-cert", "FILE", "PEM certificate (with --tls-key: HTTPS)",
                    \.tlsCertificatePath, .text, unset: "off"),
                .value("tls-key", "FILE", "PEM private key", \.tlsKeyPath, .text, unset: "off"),
                .value(
                    "workers", "N", "HTTP worker threads", \.workerThreads, .integer(1...256),
                    note: "core count (min 2)"),
                .value(
                    "handler-threads", "N", "request handler threads", \.handlerThreads, .integer(1...4096)),
                // Production never goes below OWASP's Argon2id minimum.
                .value(
                    "argon2-memory", "KIB", "Argon2id memory", \.argon2.memoryKiB,
                    .integer(19_456...4_194_304)),
                .value("argon2-iterations", "N", "Argon2id passes", \.argon2.iterations, .integer(2...64)),
            ]
        ),
        (
            "sessions and devices",
            [
                .flag("single-session", "any login ends the user's other sessions", \.singleSession),
                accessTokenTTL,
                .value(
                    "refresh-token-ttl", "SEC", "refresh token lifetime", \.refreshTokenLifetime,
                    .integer(300...31_536_000)),
                .value(
                    "session-max-age", "SEC", "session lifetime from its login", \.sessionMaxAge,
                    .integer(300...31_536_000)),
                .value(
                    "retention", "SEC", "keep ended sessions and expired approvals this long", \.retention,
                    .integer(0...315_360_000)),
                .value(
                    "max-devices", "N", "active devices per user", \.maxDevicesPerUser, .integer(1...1000)),
                .value(
                    "dpop-nonce-lifetime", "SEC", "period of the DPoP server nonces, 0: no nonces",
                    \.dpopNonceLifetime, .integer(0...86_400)),
            ]
        ),
        (
            "connections (docs/server.md, \"Connections and limits\")",
            [
                .value(
                    "body-limit", "BYTES", "largest request body", \.bodyLimit, .integer(1024...16_777_216)),
                .value(
                    "connection-timeout", "SEC", "idle connection timeout", \.connectionTimeout,
                    .integer(1...3600)),
                .value(
                    "request-timeout", "SEC", "a request must arrive whole in this time", \.requestTimeout,
                    .integer(1...3600)),
                .value(
                    "connection-limit", "N", "simultaneous connections", \.connectionLimit,
                    .integer(1...1_000_000)),
                .value(
                    "per-ip-connection-limit", "N", "per IPv4 address or IPv6 /64, 0: no limit",
                    \.perIPConnectionLimit, .integer(0...1_000_000)),
                .value(
                    "per-ipv6-56-connection-limit", "N", "per IPv6 /56, 0: no limit",
                    \.perIPv6Slash56ConnectionLimit, .integer(0...1_000_000),
                    unset: "twice --per-ip-connection-limit"),
                .value(
                    "per-ipv6-48-connection-limit", "N", "per IPv6 /48, 0: no limit",
                    \.perIPv6Slash48ConnectionLimit, .integer(0...1_000_000),
                    unset: "four times --per-ip-connection-limit"),
                .value(
                    "metrics-listen", "HOST:PORT", "serve GET /metrics there, not on the API port",
                    \.metricsListen, .address, unset: "off"),
                .value(
                    "admin-listen", "HOST:PORT", "serve the operator console there (docs/console.md)",
                    \.adminListen, .address, unset: "off"),
                .value(
                    "admin-origin", "URL", "the console's origin in the browser, for passkeys",
                    \.adminOrigin, .text, unset: "http://localhost:PORT of --admin-listen"),
            ]
        ),
        (
            "passkeys and App Attest (docs/server.md, \"Passkeys and App Attest\")",
            [
                .value(
                    "rp-id", "ID", "the WebAuthn RP ID: the origins' domain", \.relyingPartyID, .text,
                    unset: "the first --origin's host, else localhost"),
                .list(
                    "origin", "URL", "an origin passkeys run on, e.g. https://example.org", \.origins, .text,
                    unset: "http://localhost:PORT of --listen (https with TLS)"),
                .value(
                    "passkey-user-verification", "MODE", "required: biometrics or the device PIN",
                    \.passkeyUserVerification, .choice(named: [("required", true), ("preferred", false)])),
                .value("max-passkeys", "N", "passkeys per user", \.maxPasskeysPerUser, .integer(1...1000)),
                .list(
                    "app-id", "TEAMID.BUNDLE", "an app whose App Attest attestations count", \.appIDs, .appID,
                    unset: "none"),
                .value(
                    "app-attest-environment", "ENV",
                    "where attestations come from (debug builds: development)",
                    \.appAttestEnvironment, .choice([AppAttest.Environment.development, .production])),
                .flag(
                    "require-app-attest", "bind only devices App Attest vouches for", \.requireAppAttest),
            ]
        ),
        (
            "OAuth 2.0 and OpenID Connect (docs/oauth.md)",
            [
                .value(
                    "issuer", "URL", "this server's public URL: turns the provider on", \.issuer, .text,
                    unset: "off"),
                keyPublishDelay,
                .value(
                    "ciba-interval", "SEC", "how often CIBA clients may poll for an outcome", \.cibaInterval,
                    .integer(1...60)),
                .list(
                    "android-app", "PACKAGE:SHA256", "an Android app that shares the passkeys", \.androidApps,
                    .text, unset: "none"),
            ]
        ),
        (
            "throttling and sign-up (docs/server.md, \"Throttling\")",
            [
                .value(
                    "registration", "MODE", "closed: sign-up answers 403 (keybound user add)", \.registration,
                    .choice(Registration.allCases)),
                .value(
                    "signup-limit", "N", "sign-ups per client address per hour, 0: off", \.signupLimit,
                    .integer(0...1_000_000)),
                .value(
                    "address-failure-limit", "N", "failed logins per client address (15 min), 0: off",
                    \.addressFailureLimit, .integer(0...1_000_000)),
                .list(
                    "trusted-proxy", "CIDR", "a proxy whose --forwarded-header counts", \.trustedProxies,
                    .cidr, unset: "none", blankIsNone: true),
                .value(
                    "forwarded-header", "NAME", "the one header the trusted proxies write", \.forwardedHeader,
                    .choice(
                        ForwardedHeader.allCases, hint: " (the one your proxies write)", ignoringCase: true)),
            ]
        ),
        ("events (docs/webhooks.md)", [allowPrivateWebhooks]),
    ]

    /// `--allow-private-webhooks`, which `keybound webhook add` takes too: the same SSRF guard
    /// refuses a private target when it is added and when it is delivered to.
    static let allowPrivateWebhooks = ServeOption.flag(
        "allow-private-webhooks", "webhooks may go to loopback and private addresses (SSRF guard off)",
        \.allowPrivateWebhooks)

    /// `--db`, which the operator commands (`keybound user`, `client`, `keys`) take too.
    static let database = ServeOption.value(
        "db", "URL", "sqlite:PATH or postgres://USER@HOST:PORT[,HOST:PORT…]/DB", \.databaseURL,
        .databaseURL)

    /// `--access-token-ttl`, which `keybound keys list` takes too: a retired key stays published
    /// as long as the tokens it signed live.
    static let accessTokenTTL = ServeOption.value(
        "access-token-ttl", "SEC", "access token lifetime", \.accessTokenLifetime, .integer(60...86_400))

    /// `--key-publish-delay`, which `keybound keys rotate` takes too.
    static let keyPublishDelay = ServeOption.value(
        "key-publish-delay", "SEC", "a rotated key is published this long before it signs", \.keyPublishDelay,
        .integer(0...604_800))

    /// Every option of `keybound serve` as parsing and help take them, `--help` last.
    static var options: [Option] {
        let defaults = Configuration()
        return sections.flatMap(\.options).map { $0.option(defaults: defaults) } + [.help]
    }

    static var usage: String {
        """
        keybound serve — run the Keybound HTTP API server

        usage: keybound serve [options]

        Every option can also be set by the environment variable shown beside it; the flag wins.
        A flag's variable turns it on with 1, true or yes; a repeatable option's variable takes a
        comma-separated list. Under each option: the values it takes and its default.
        The PostgreSQL password comes from KEYBOUND_DB_PASSWORD or PGPASSWORD, never from a flag;
        the key that seals the OAuth signing keys from KEYBOUND_KEY_ENCRYPTION_KEY (32 bytes, base64).

        \(sectionedHelp)

        Logs are JSON lines on standard error. SIGTERM or SIGINT stops the server gracefully.
        """
    }

    /// The help of every option, aligned across all sections, under the sections' titles;
    /// `--help` ends the last.
    private static var sectionedHelp: String {
        let defaults = Configuration()
        var help = sections.map { section in
            (title: section.title, options: section.options.map { $0.option(defaults: defaults) })
        }
        help[help.count - 1].options.append(.help)
        return Option.help(sections: help)
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

    /// Builds the configuration from flags, then `KEYBOUND_*` variables, then defaults, and
    /// checks the rules between options. The database password and the key-encryption key come
    /// from the environment only.
    /// - Parameter options: the options to read (default: all of `serve`'s; an operator command
    ///   reads the few it takes, and the rest keep their defaults).
    static func makeConfiguration(
        _ arguments: Arguments, environment: [String: String],
        options: [ServeOption] = sections.flatMap(\.options)
    ) throws -> Configuration {
        var configuration = Configuration()
        let input = OptionInput(arguments: arguments, environment: environment)
        for option in options { try option.read(input, &configuration) }
        configuration.databasePassword = databasePassword(environment)
        configuration.keyEncryptionKey = try keyEncryptionKey(environment)
        try validate(configuration)
        return configuration
    }

    /// The rules between options (each option's own values are checked as it is read). Those on
    /// passkey origins and the RP ID are the server's: it refuses them when it starts.
    static func validate(_ configuration: Configuration) throws {
        guard (configuration.tlsCertificatePath == nil) == (configuration.tlsKeyPath == nil) else {
            throw UsageError("--tls-cert and --tls-key go together")
        }
        if configuration.requireAppAttest, configuration.appIDs.isEmpty {
            throw UsageError("--require-app-attest needs --app-id: which app's attestations count?")
        }
    }

    /// The PostgreSQL password: `KEYBOUND_DB_PASSWORD`, else `PGPASSWORD` (never a flag: a
    /// command line is visible to every user of the machine).
    static func databasePassword(_ environment: [String: String]) -> String? {
        [environment["KEYBOUND_DB_PASSWORD"], environment["PGPASSWORD"]].lazy.compactMap { $0 }
            .first { !$0.isEmpty }
    }

    /// The key that seals the issuer's private signing keys at rest: `KEYBOUND_KEY_ENCRYPTION_KEY`,
    /// 32 bytes in base64url or base64 (`openssl rand -base64 32`); never a flag, like the
    /// database password.
    static func keyEncryptionKey(_ environment: [String: String]) throws -> Data? {
        guard let text = environment["KEYBOUND_KEY_ENCRYPTION_KEY"], !text.isEmpty else { return nil }
        guard let key = Base64URL.decode(text) ?? Data(base64Encoded: text), key.count == 32 else {
            throw UsageError(
                "KEYBOUND_KEY_ENCRYPTION_KEY must be 32 bytes in base64 (openssl rand -base64 32)")
        }
        return key
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

extension Configuration {
    /// ``host`` and ``port`` together, as `--listen` sets them.
    fileprivate var listen: ListenAddress {
        get { ListenAddress(host: host, port: port) }
        set {
            host = newValue.host
            port = newValue.port
        }
    }
}
