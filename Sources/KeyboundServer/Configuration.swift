import Foundation

/// SQLite's commit durability (`PRAGMA synchronous` in WAL mode).
public enum SQLiteSynchronous: String, Sendable, CaseIterable {
    /// Every commit is synced to disk before the response: survives kill -9 and power loss.
    case full
    /// Every commit reaches the operating system before the response: survives kill -9 of the
    /// server, may lose the last commits if the machine loses power.
    case normal
}

/// Everything that configures a ``Server``. Every property has a safe default.
public struct Configuration: Sendable {
    /// The numeric address to listen on (default loopback `127.0.0.1`; `::1` for IPv6).
    public var host: String = "127.0.0.1"
    /// The port (default 8420; 0 picks a free port, read it from ``Server/port``).
    public var port: UInt16 = 8420
    /// The database: `sqlite:PATH`.
    public var databaseURL: String = "sqlite:keybound.sqlite"
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
    /// HTTP worker threads (default: the core count, at least 2); also the number of database connections.
    public var workerThreads: Int = max(2, ProcessInfo.processInfo.activeProcessorCount)
    /// Idle connections are closed after this many seconds without a byte.
    public var connectionTimeout: Int = 30
    /// At most this many simultaneous connections.
    public var connectionLimit: Int = 1024
    /// At most this many simultaneous connections from one client network: an IPv4 address or
    /// an IPv6 /64 (default 64; 0 for no limit, e.g. behind a reverse proxy, whose connections
    /// all come from one address).
    public var perIPConnectionLimit: Int = 64
    /// A request must arrive whole within this many seconds, counted from the connection's
    /// opening (or, kept alive, the end of the previous response), however steadily its bytes
    /// trickle in; otherwise the connection is closed (default 30).
    public var requestTimeout: Int = 30
    /// Where `GET /metrics` is served, on a listener of its own (plain HTTP); nil (the default)
    /// serves it nowhere. Port 0 picks a free port (read it from ``Server/metricsURL``).
    public var metricsListen: ListenAddress?
    /// PEM file of the TLS certificate (chain); with ``tlsKeyPath`` it turns on HTTPS.
    public var tlsCertificatePath: String?
    /// PEM file of the TLS private key.
    public var tlsKeyPath: String?
    /// Challenge lifetime in seconds (60).
    public var challengeLifetime: Int = 60
    /// Approval lifetime in seconds (5 minutes).
    public var approvalLifetime: Int = 5 * 60
    /// Binding a device needs a password login at most this many seconds ago (5 minutes).
    public var stepUpWindow: Int = 5 * 60
    /// Consecutive failed logins on one account before it is blocked (5).
    public var accountFailureLimit: Int = 5
    /// Failed logins from one client address (within 15 minutes) before it is blocked (20).
    public var addressFailureLimit: Int = 20
    /// First block in seconds; it doubles with every further failure (60 s).
    public var lockoutBaseDelay: Int = 60
    /// The longest block in seconds (1 hour).
    public var lockoutMaximumDelay: Int = 3600
    /// Consecutive bad device signatures before the device is suspended (5).
    public var deviceFailureLimit: Int = 5
    /// Where the JSON-lines log goes (standard error).
    public var log: LogSink = .standardError
    /// The clock (tests inject a ``ManualClock``).
    public var clock: ServerClock = .system

    /// The defaults: loopback port 8420, `sqlite:keybound.sqlite`, OWASP Argon2id.
    public init() {}

    /// A configuration for tests and demos: loopback, a free port, the given SQLite file, cheap
    /// Argon2id parameters, logs discarded.
    /// - Important: the Argon2id parameters are far below production strength.
    public static func testing(databasePath: String) -> Configuration {
        var configuration = Configuration()
        configuration.port = 0
        configuration.databaseURL = "sqlite:" + databasePath
        configuration.argon2 = .insecureTesting
        configuration.log = .discard
        return configuration
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
