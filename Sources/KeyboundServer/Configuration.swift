import Foundation
import KeyboundWebAuthn

/// SQLite's commit durability (`PRAGMA synchronous` in WAL mode).
public enum SQLiteSynchronous: String, Sendable, CaseIterable {
    /// Every commit is synced to disk before the response: survives kill -9 and power loss.
    case full
    /// Every commit reaches the operating system before the response: survives kill -9 of the
    /// server, may lose the last commits if the machine loses power.
    case normal
}

/// Who may create accounts through `POST /v1/accounts`.
public enum Registration: String, Sendable, CaseIterable {
    /// Anyone (throttled per client address by ``Configuration/signupLimit``).
    case open
    /// Nobody: the API answers 403 `registration_closed`; operators run `keybound user add`.
    case closed
}

/// Everything that configures a ``Server``. Every property has a safe default.
public struct Configuration: Sendable {
    /// The numeric address to listen on (default loopback `127.0.0.1`; `::1` for IPv6).
    public var host: String = "127.0.0.1"
    /// The port (default 8420; 0 picks a free port, read it from ``Server/port``).
    public var port: UInt16 = 8420
    /// The database: `sqlite:PATH`, or `postgres://user@host:port/database` (also
    /// `postgresql://`; no password in it) for several servers on one PostgreSQL.
    public var databaseURL: String = "sqlite:keybound.sqlite"
    /// The PostgreSQL password (`keybound serve` takes it from `KEYBOUND_DB_PASSWORD` or
    /// `PGPASSWORD`). Never logged. nil leaves it to libpq (`PGPASSWORD`, `~/.pgpass`).
    public var databasePassword: String?
    /// The longest wait for any one PostgreSQL call, in seconds (default 5): past it the request
    /// is a 503 with Retry-After. A COMMIT that timed out (a primary whose synchronous standby is
    /// gone) has an unknown outcome: the client retries with the same `Idempotency-Key`.
    /// Migrations are not bounded by it.
    public var databaseTimeout: Int = 5
    /// How SQLite commits: `.full` (default) survives a power loss, `.normal` survives a crash
    /// of the process (kill -9) but may lose the last commits on a power loss, and is faster.
    public var sqliteSynchronous: SQLiteSynchronous = .full
    /// This server's id, written into every signing payload (`"server"`); devices check it.
    public var serverID: String = "keybound"
    /// Access token lifetime in seconds (default 15 minutes).
    public var accessTokenLifetime: Int = 15 * 60
    /// Refresh token lifetime in seconds (default 30 days).
    public var refreshTokenLifetime: Int = 30 * 24 * 3600
    /// When true, any login ends all of the user's other sessions.
    public var singleSession: Bool = false
    /// Argon2id cost of new password hashes (default OWASP minimum: m=19 MiB, t=2, p=1).
    public var argon2: Argon2Parameters = .owaspMinimum
    /// How many Argon2id hashes may run at once (default: the core count).
    public var hashingConcurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    /// The largest accepted request body in bytes (default 64 KiB; larger gives 413).
    public var bodyLimit: Int = 64 * 1024
    /// libmicrohttpd's threads, which read requests and send responses (default: the core count,
    /// at least 2); the number of SQLite reader connections is this plus 2.
    public var workerThreads: Int = max(2, ProcessInfo.processInfo.activeProcessorCount)
    /// Threads that run request handlers, at most (default 64); they start as requests need them
    /// and then stay. A request waiting for its group commit holds one of these, never one of the
    /// ``workerThreads``, so this many requests can wait for one commit together; more queue for
    /// a free thread.
    public var handlerThreads: Int = 64
    /// Idle connections are closed after this many seconds without a byte.
    public var connectionTimeout: Int = 30
    /// At most this many simultaneous connections (default 1024). When they are all open, a new
    /// one is still admitted: it displaces a connection that waits on its client, of the network
    /// holding the most (docs/server.md, "Connections and limits").
    public var connectionLimit: Int = 1024
    /// At most this many simultaneous connections from one client network: an IPv4 address or
    /// an IPv6 /64 (default 64; 0 for no limit, e.g. behind a reverse proxy, whose connections
    /// all come from one address).
    public var perIPConnectionLimit: Int = 64
    /// At most this many simultaneous connections from one IPv6 /56, a home's usual share; nil
    /// (the default) for twice ``perIPConnectionLimit``; 0 for no limit.
    public var perIPv6Slash56ConnectionLimit: Int?
    /// At most this many simultaneous connections from one IPv6 /48, a site's usual share; nil
    /// (the default) for four times ``perIPConnectionLimit``; 0 for no limit.
    public var perIPv6Slash48ConnectionLimit: Int?
    /// A request must arrive whole within this many seconds, counted from the connection's
    /// opening (or, kept alive, the end of the previous response), however steadily its bytes
    /// trickle in, and a response must be sent within this many seconds of being ready, however
    /// slowly the client reads; otherwise the connection is closed (default 30).
    public var requestTimeout: Int = 30
    /// Where `GET /metrics` is served, on a listener of its own (plain HTTP); nil (the default)
    /// serves it nowhere. Port 0 picks a free port (read it from ``Server/metricsURL``).
    public var metricsListen: ListenAddress?
    /// Where the operator console and its API (`/admin/v1/…`) are served, on a listener of its own
    /// (docs/console.md); nil (the default) serves them nowhere. A private address: the console
    /// is never on the API port. HTTPS when ``tlsKeyPath`` is set. Port 0 picks a free port
    /// (read it from ``Server/adminURL``).
    public var adminListen: ListenAddress?
    /// The origin the console runs on in the browser, for its passkey sign-in; nil: the
    /// `http://localhost:PORT` of ``adminListen`` (`https` with TLS).
    public var adminOrigin: String?
    /// How often each instance writes the traffic it counted into the database, for the console's
    /// overview (seconds, 5): the overview lags by up to this much, and an instance killed without
    /// stopping loses at most this much of its counts.
    public var trafficFlushInterval: Double = 5
    /// PEM file of the TLS certificate (chain); with ``tlsKeyPath`` it turns on HTTPS.
    public var tlsCertificatePath: String?
    /// PEM file of the TLS private key.
    public var tlsKeyPath: String?
    /// Challenge lifetime in seconds (60).
    public var challengeLifetime: Int = 60
    /// Approval lifetime in seconds (5 minutes).
    public var approvalLifetime: Int = 5 * 60
    /// The `interval` CIBA clients are told to poll at, in seconds (5, CIBA Core §7.3's default);
    /// a client polling sooner is answered `slow_down` and its interval grows by 5 s.
    public var cibaInterval: Int = 5
    /// Binding a device needs a password login at most this many seconds ago (5 minutes).
    public var stepUpWindow: Int = 5 * 60

    // MARK: Throttling, registration and client addresses (docs/server.md, "Throttling")

    /// Consecutive failed password logins on one account from one client address before that
    /// pair (account, address) is blocked (5). Other addresses can still log in to the account.
    public var accountFailureLimit: Int = 5
    /// Consecutive failed password logins on one account, from all addresses together, from
    /// which on every address that has itself failed on the account waits too, with a delay that
    /// grows with every further failure (100). Addresses that have not failed on it log in as
    /// usual: someone else's wrong passwords never lock the owner out. So this is not NIST SP
    /// 800-63B §5.2.2's limit of 100 consecutive failures per account: past it, each address that
    /// has not failed on the account still gets a guess, and what bounds an attacker with many
    /// addresses is how many they have (docs/server.md, "Throttling").
    public var accountFailureCeiling: Int = 100
    /// Failed logins of any kind (passwords, device signatures) from one client address within
    /// 15 minutes before that address is blocked (20; 0 turns it off).
    public var addressFailureLimit: Int = 20
    /// First block in seconds; it doubles with every further failure (60 s).
    public var lockoutBaseDelay: Int = 60
    /// The longest block in seconds (1 hour).
    public var lockoutMaximumDelay: Int = 3600
    /// Consecutive bad signatures for one device before further bad ones get 429 (5). A valid
    /// signature is never refused for them, and a device is never suspended.
    public var deviceFailureLimit: Int = 5
    /// A session's absolute lifetime in seconds, counted from its login (default 30 days). After
    /// it a refresh is refused and the session ends, however recently it was refreshed: the user
    /// logs in again.
    public var sessionMaxAge: Int = 30 * 24 * 3600
    /// Ended sessions (with their tokens) and expired approvals are deleted this many seconds after
    /// they ended or expired (default 30 days). Audit events are kept.
    public var retention: Int = 30 * 24 * 3600
    /// At most this many active (not revoked) devices per user (default 10); binding one more is
    /// refused with 409 `device_limit_reached`. Replacing the device of the same client is allowed.
    public var maxDevicesPerUser: Int = 10
    /// Sign-up attempts (created or taken) per client address per hour (10; 0 turns it off).
    public var signupLimit: Int = 10
    /// Whether anyone may sign up through the API (default), or only operators create accounts
    /// (`keybound user add`).
    public var registration: Registration = .open
    /// Peers whose ``forwardedHeader`` names the client (none: the client is always the TCP
    /// peer). Set it to your reverse proxies when the server runs behind them.
    public var trustedProxies: [CIDR] = []
    /// The header that names the client behind ``trustedProxies``: the one they write
    /// (default `X-Forwarded-For`). The other header is never read.
    public var forwardedHeader: ForwardedHeader = .xForwardedFor

    // MARK: Passkeys and App Attest (docs/server.md, "Passkeys and App Attest")

    /// The WebAuthn RP ID passkeys are bound to: the origins' host or a registrable parent of it
    /// (`example.org` serves `https://login.example.org`). nil (the default): the host of the
    /// first of ``origins``, or `localhost`.
    public var relyingPartyID: String?
    /// The origins passkey ceremonies may run on, exactly as browsers write them
    /// (`https://example.org`, `http://localhost:8420`). Empty (the default): the server's own
    /// `http://localhost:PORT` (`https` with TLS) on the port it listens on. Browsers run passkeys
    /// on `https` origins and on `http://localhost`, never on `http://127.0.0.1`.
    public var origins: [String] = []
    /// Whether passkey ceremonies must have verified the user (biometrics or the device PIN), not
    /// only tested presence (default true).
    public var passkeyUserVerification: Bool = true
    /// How long a passkey ceremony or an App Attest challenge may take, in seconds (5 minutes,
    /// WebAuthn's recommendation when user verification is required).
    public var ceremonyLifetime: Int = 300
    /// At most this many passkeys per user (default 10); one more is refused with 409
    /// `passkey_limit_reached`.
    public var maxPasskeysPerUser: Int = 10
    /// The App IDs (`TEAMID.bundle.id`) whose App Attest attestations are accepted. Empty (the
    /// default): every attestation is refused.
    public var appIDs: [String] = []
    /// Which App Attest environment attestations must come from (default production).
    public var appAttestEnvironment: AppAttest.Environment = .production
    /// Whether binding a device requires an App Attest attestation, and device logins and
    /// approvals of attested devices an App Attest assertion (default false). Devices bound
    /// without an attestation before it was turned on are then refused (403
    /// `app_attest_required`) until bound again; `keybound user devices --unattested` lists them.
    public var requireAppAttest: Bool = false
    /// The roots App Attest certificate chains must reach: Apple's App Attestation Root CA. Tests
    /// put their own test CA here.
    public var appAttestRoots: [Certificate] = [.appleAppAttestationRootCA]

    // MARK: OAuth 2.0 and OpenID Connect (docs/oauth.md)

    /// The issuer: this server's public URL (`https://login.example.com`; `http://localhost…` and
    /// `http://127.0.0.1…` for development), the same on every instance. nil (the default) turns
    /// the OAuth 2.0 / OpenID Connect provider off: its routes answer 404.
    public var issuer: String?
    /// How long a key made by `keybound keys rotate` is published before it signs, in seconds
    /// (10 minutes): clients that cache the JWK Set learn it before they see a token it signed.
    public var keyPublishDelay: Int = 600
    /// Seals the private signing keys in the database (AES-256-GCM) when set (32 bytes;
    /// `keybound serve` takes it from `KEYBOUND_KEY_ENCRYPTION_KEY`, base64url or base64). nil:
    /// they are stored as they are, like the rest of the database.
    public var keyEncryptionKey: Data?
    /// Android apps that may use this server's passkeys, `PACKAGE:SHA256_CERT_FINGERPRINT`
    /// (`/.well-known/assetlinks.json`).
    public var androidApps: [String] = []

    // MARK: DPoP (docs/server.md, "DPoP")

    /// How long a server nonce for DPoP proofs lasts, in seconds (300): every answer to a request
    /// with a proof carries the current one (`DPoP-Nonce`), proofs must name it, and one is
    /// accepted until the end of the next period. 0 turns server nonces off; proofs are then
    /// bounded by their `iat` alone.
    public var dpopNonceLifetime: Int = 300

    // MARK: Events (docs/webhooks.md)

    /// Whether webhook endpoints may be on loopback, private, link-local or other non-public
    /// addresses (default false: refused when added and when delivered to, against SSRF).
    public var allowPrivateWebhooks: Bool = false

    /// Where the JSON-lines log goes (standard error).
    public var log: LogSink = .standardError
    /// The clock (tests inject one that moves only when they say).
    public var clock: ServerClock = .system

    /// The defaults: loopback port 8420, `sqlite:keybound.sqlite`, OWASP Argon2id.
    public init() {}

    /// A configuration for tests and demos: loopback, a free port, the given SQLite file, cheap
    /// Argon2id parameters, logs discarded, no sign-up limit (tests sign up many users from
    /// loopback), and a 15 s ``databaseTimeout`` (a test machine running many PostgreSQL tests
    /// at once answers slowly; the tests of the timeout set their own).
    /// - Important: the Argon2id parameters are far below production strength.
    public static func testing(databasePath: String) -> Configuration {
        var configuration = Configuration()
        configuration.databaseTimeout = 15
        configuration.port = 0
        configuration.databaseURL = "sqlite:" + databasePath
        configuration.argon2 = .insecureTesting
        configuration.log = .discard
        configuration.signupLimit = 0
        return configuration
    }
}

extension Configuration {
    /// ``perIPv6Slash56ConnectionLimit``, or its default.
    var slash56ConnectionLimit: Int { perIPv6Slash56ConnectionLimit ?? 2 * perIPConnectionLimit }
    /// ``perIPv6Slash48ConnectionLimit``, or its default.
    var slash48ConnectionLimit: Int { perIPv6Slash48ConnectionLimit ?? 4 * perIPConnectionLimit }

    /// Why `url` cannot be a ``databaseURL``, or nil when it can. Checks the form only; whether
    /// the database can be reached shows when the server starts. The reason never repeats the URL.
    public static func databaseURLProblem(_ url: String) -> String? {
        if PostgresURL.names(url) {
            do {
                _ = try PostgresURL(url)
                return nil
            } catch {
                return "\(error)"
            }
        }
        if url.hasPrefix("sqlite:") && url.count > "sqlite:".count { return nil }
        return "use sqlite:PATH or postgres://user@host:port/database"
    }
}

/// A numeric address and port to listen on.
public struct ListenAddress: Sendable, Hashable {
    /// A numeric IPv4 or IPv6 address, e.g. `127.0.0.1` or `::1`.
    public var host: String
    /// The port; 0 picks a free one.
    public var port: UInt16

    /// - Parameters:
    ///   - host: a numeric IPv4 or IPv6 address.
    ///   - port: the port; 0 picks a free one.
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }
}
