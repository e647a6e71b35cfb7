import Foundation
import Keybound

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A throwaway PostgreSQL cluster for tests and the bench: `initdb` into a temporary folder,
/// `pg_ctl start` on a free loopback port (its Unix socket in the same folder), stopped and
/// deleted when the process exits — by `atexit`, and, should the process die without running it
/// (a crash, SIGKILL), by a small watchdog shell that notices within a second.
///
/// Servers connect as the role ``role`` with ``password`` over TCP (scram-sha-256), so the
/// password path is exercised; the harness itself runs `psql` as the superuser over the Unix
/// socket. `initdb` refuses to run as root, so as root every PostgreSQL program runs as the
/// `postgres` user through `runuser`, and the folder belongs to that user.
public final class PostgresCluster: Sendable {
    /// Why no cluster could be started (PostgreSQL is not installed, or it failed).
    public struct Unavailable: Error, CustomStringConvertible {
        /// What is missing or what failed.
        public let description: String
    }

    /// The cluster shared by the tests of this process, started on first use; or why there is none.
    public static let shared: Result<PostgresCluster, Unavailable> = Result {
        try PostgresCluster()
    }.mapError { $0 as? Unavailable ?? Unavailable(description: "\($0)") }

    /// Small and fast for tests: little shared memory, no fsync (a stopped server's files are
    /// still in the page cache; only a power loss would need the syncs), enough connections for
    /// many servers running in parallel.
    public static let testSettings: [String: String] = [
        "shared_buffers": "16MB", "max_connections": "600", "fsync": "off", "full_page_writes": "off",
        "max_wal_size": "256MB", "work_mem": "2MB", "maintenance_work_mem": "16MB",
        "max_pred_locks_per_transaction": "128", "log_min_messages": "warning",
    ]

    /// The role the servers connect as (owner of every database made by ``createDatabase()``).
    public static let role = "keybound"
    /// ``role``'s password: random per cluster.
    public let password = "pw-" + UUID().uuidString
    /// The TCP port on 127.0.0.1.
    public let port: UInt16
    /// The folder holding the data (`data`), the socket and the log (`log`).
    public var folder: URL { tools.folder }
    private let tools: Tools
    private let settings: [String: String]

    /// Starts a new cluster.
    /// - Parameter settings: `postgres -c` settings (defaults: ``testSettings``).
    /// - Throws: ``Unavailable`` when PostgreSQL is not installed or does not start.
    public init(settings: [String: String] = PostgresCluster.testSettings) throws {
        guard let binaries = Self.findBinaries() else {
            throw Unavailable(
                description: "PostgreSQL's initdb and pg_ctl were not found (run `make deps`, which "
                    + "installs Debian's postgresql; or set KEYBOUND_TEST_PG_BIN to their folder)")
        }
        self.settings = settings
        var owner: (uid: uid_t, gid: gid_t)?
        var runUser: URL?
        if getuid() == 0 {
            guard let entry = getpwnam("postgres") else {
                throw Unavailable(
                    description: "running as root, but there is no postgres user to run initdb as")
            }
            owner = (entry.pointee.pw_uid, entry.pointee.pw_gid)
            guard
                let runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].first(where: {
                    FileManager.default.isExecutableFile(atPath: $0)
                })
            else { throw Unavailable(description: "running as root, but runuser was not found") }
            runUser = URL(fileURLWithPath: runuser)
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if let owner, chown(folder.path, owner.uid, owner.gid) != 0 {
            throw Unavailable(description: "cannot give \(folder.path) to the postgres user")
        }
        let tools = Tools(binaries: binaries, runUser: runUser, folder: folder)
        self.tools = tools
        var started: UInt16?
        do {
            let passwordFile = folder.appendingPathComponent("superuser-password")
            try Data(UUID().uuidString.utf8).write(to: passwordFile)
            if let owner { _ = chown(passwordFile.path, owner.uid, owner.gid) }
            try tools.run(
                "initdb",
                [
                    "-D", tools.data, "-U", "postgres", "--no-locale", "--encoding=UTF8",
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256", "--pwfile=\(passwordFile.path)", "--no-sync",
                    "--no-instructions",
                ])
            try? FileManager.default.removeItem(at: passwordFile)
            Self.register(tools)
            // A free port can be taken between our probe and the server's bind: try a few.
            var lastError: (any Error)?
            for _ in 0..<5 where started == nil {
                let candidate = try LoopbackPorts.claim()
                do {
                    try tools.start(port: candidate, settings: settings)
                    started = candidate
                } catch {
                    lastError = error
                    LoopbackPorts.release(candidate)
                }
            }
            guard let started else { throw lastError ?? Unavailable(description: "pg_ctl start failed") }
            port = started
            try tools.psql("CREATE ROLE \(Self.role) LOGIN PASSWORD '\(password)'", port: started)
        } catch {
            Self.destroy(tools)
            if let started { LoopbackPorts.release(started) }
            throw error as? Unavailable ?? Unavailable(description: "\(error)")
        }
    }

    deinit {
        Self.destroy(tools)
        LoopbackPorts.release(port)
    }

    // MARK: Use

    /// The URL a server uses for `database` (its password goes separately: ``password``).
    public func url(database: String) -> String {
        "postgres://\(Self.role)@127.0.0.1:\(port)/\(database)"
    }

    /// Creates a new, empty database owned by ``role``.
    /// - Returns: its name.
    public func createDatabase() throws -> String {
        let name = "kb_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        try sql("CREATE DATABASE \(name) OWNER \(Self.role)")
        return name
    }

    /// Drops a database, ending its connections first. Errors are ignored: the cluster is thrown
    /// away at the end anyway.
    public func dropDatabase(_ name: String) {
        _ = try? sql("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs SQL as the superuser through `psql` on the Unix socket.
    /// - Returns: the output, unaligned, tuples only (`psql -At`).
    @discardableResult
    public func sql(_ statement: String, database: String = "postgres") throws -> String {
        try tools.psql(statement, port: port, database: database)
    }

    /// Stops the server: `fast` ends connections and checkpoints; `immediate` is a crash (the
    /// next start recovers from the WAL).
    public func stop(immediate: Bool = false) throws {
        try tools.run("pg_ctl", ["-D", tools.data, "-m", immediate ? "immediate" : "fast", "-w", "stop"])
    }

    /// Starts the server again after ``stop(immediate:)``, on the same port. The port lies outside
    /// the ephemeral range (see ``LoopbackPorts/claim()``), so no connection takes it meanwhile; should
    /// something still hold it for a moment, this tries again, for up to 30 s.
    public func start() throws {
        let deadline = Date().addingTimeInterval(30)
        while true {
            do {
                return try tools.start(port: port, settings: settings)
            } catch {
                guard Date() < deadline else { throw error }
                usleep(500_000)
            }
        }
    }

    // MARK: Running PostgreSQL's programs

    /// PostgreSQL's programs, run as the right user on one cluster folder.
    private struct Tools: Sendable {
        let binaries: URL
        /// `runuser` when running as root (PostgreSQL's programs then run as `postgres`).
        let runUser: URL?
        let folder: URL

        var data: String { folder.appendingPathComponent("data").path }

        func start(port: UInt16, settings: [String: String]) throws {
            var options = settings.sorted { $0.key < $1.key }.map { "-c \($0.key)=\($0.value)" }
            options += [
                "-c listen_addresses=127.0.0.1", "-c port=\(port)",
                "-c unix_socket_directories=\(folder.path)",
            ]
            let log = folder.appendingPathComponent("log")
            do {
                try run(
                    "pg_ctl",
                    [
                        "-D", data, "-l", log.path, "-w", "-t", "60", "-o", options.joined(separator: " "),
                        "start",
                    ])
            } catch {
                // pg_ctl only says "could not start server": the reason is in the server's log.
                let tail = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").suffix(8)
                throw Unavailable(
                    description: "\(error)\nthe server's log ends:\n" + (tail ?? []).joined(separator: "\n"))
            }
        }

        @discardableResult
        func psql(_ statement: String, port: UInt16, database: String = "postgres") throws -> String {
            try run(
                "psql",
                [
                    "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", folder.path, "-p", String(port), "-U",
                    "postgres", "-d", database, "-c", statement,
                ], asPostgres: false)
        }

        /// The command that stops the server at once, as the right user.
        var stopCommand: [String] {
            let stop = [
                binaries.appendingPathComponent("pg_ctl").path, "-D", data, "-m", "immediate", "-w", "stop",
            ]
            return (runUser.map { [$0.path, "-u", "postgres", "--"] } ?? []) + stop
        }

        /// Runs one of PostgreSQL's programs and waits for it; as root, as the postgres user.
        /// - Returns: its standard output, trimmed.
        @discardableResult
        func run(_ tool: String, _ arguments: [String], asPostgres: Bool = true) throws -> String {
            let program = binaries.appendingPathComponent(tool).path
            var command = [program] + arguments
            if asPostgres, let runUser { command = [runUser.path, "-u", "postgres", "--"] + command }
            let (status, output) = try PostgresCluster.run(command, files: folder)
            guard status == 0 else {
                throw Unavailable(description: "\(tool) failed (\(status)): \(output.prefix(2000))")
            }
            return output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Runs `command` (with `LC_ALL=C` and without `PGPASSWORD`) and waits for it; its output goes
    /// through files in `files`.
    /// - Returns: its exit status, and its standard output or, when it failed, its standard error.
    private static func run(_ command: [String], files: URL) throws -> (Int32, String) {
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        environment.removeValue(forKey: "PGPASSWORD")
        let name = "run-\(UUID().uuidString)"
        let child = try ChildProcess(
            URL(fileURLWithPath: command[0]), Array(command.dropFirst()), environment: environment,
            workingDirectory: URL(fileURLWithPath: "/"), files: files, name: name)
        try child.process.run()
        child.process.waitUntilExit()
        let (out, err) = try child.output()
        for suffix in [".out", ".err"] { unlink(files.appendingPathComponent(name + suffix).path) }
        let status = child.process.terminationStatus
        return (status, String(decoding: status == 0 || err.isEmpty ? out : err, as: UTF8.self))
    }

    /// `KEYBOUND_TEST_PG_BIN`, else the newest `/usr/lib/postgresql/N/bin` (Debian), else the
    /// folder of an `initdb` on `PATH` (Homebrew).
    private static func findBinaries() -> URL? {
        let manager = FileManager.default
        func usable(_ folder: String) -> Bool {
            manager.isExecutableFile(atPath: folder + "/initdb")
                && manager.isExecutableFile(atPath: folder + "/pg_ctl")
                && manager.isExecutableFile(atPath: folder + "/psql")
        }
        if let explicit = ProcessInfo.processInfo.environment["KEYBOUND_TEST_PG_BIN"] {
            return usable(explicit) ? URL(fileURLWithPath: explicit) : nil
        }
        let versions = ((try? manager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions where usable("/usr/lib/postgresql/\(version)/bin") {
            return URL(fileURLWithPath: "/usr/lib/postgresql/\(version)/bin")
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for folder in path.split(separator: ":").map(String.init) where usable(folder) {
            return URL(fileURLWithPath: folder)
        }
        return nil
    }

    // MARK: Clean-up at exit, and after a crash

    /// The clusters of this process that still run (folder → stop command).
    private static let live = Mutex<[String: [String]]>([:])

    /// Remembers the cluster for `atexit`, and starts its watchdog: a shell that waits while this
    /// process lives and the folder exists; if the process dies first, it stops the server and
    /// deletes the folder. It ignores SIGINT and SIGHUP, which a Ctrl-C sends to every process of
    /// the terminal's group, so that it outlives us to clean up.
    private static func register(_ tools: Tools) {
        let first = live.withLock { clusters in
            defer { clusters[tools.folder.path] = tools.stopCommand }
            return clusters.isEmpty
        }
        if first { atexit { PostgresCluster.destroyAll() } }
        let quoted = tools.stopCommand.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let script = """
            trap '' INT HUP
            while kill -0 "$1" 2>/dev/null && [ -d "$2" ]; do sleep 1; done
            if [ -d "$2" ]; then \(quoted.joined(separator: " ")) >/dev/null 2>&1; rm -rf "$2"; fi
            """
        // `sh -c '(…) &'` returns at once and leaves the watchdog to init: no zombie, and it is
        // nobody's child that could be waited for by mistake.
        let detached = "(" + script + "\n) >/dev/null 2>&1 &"
        _ = try? run(
            ["/bin/sh", "-c", detached, "keybound-pg-watchdog", String(getpid()), tools.folder.path],
            files: tools.folder)
    }

    private static func destroyAll() {
        for (folder, stop) in live.withLock({ $0 }) { destroy(folder: folder, stop: stop) }
    }

    private static func destroy(_ tools: Tools) {
        destroy(folder: tools.folder.path, stop: tools.stopCommand)
    }

    /// Stops the server at once (its data is thrown away) and deletes the folder.
    private static func destroy(folder: String, stop: [String]) {
        live.withLock { _ = $0.removeValue(forKey: folder) }
        if FileManager.default.fileExists(atPath: folder + "/data/postmaster.pid") {
            _ = try? run(stop, files: URL(fileURLWithPath: folder))
        }
        try? FileManager.default.removeItem(atPath: folder)
    }
}
