import Foundation
import KeyboundCrypto
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

/// What the PostgreSQL phases measured, beside SQLite's.
struct PostgresNumbers {
    /// Why nothing was measured (PostgreSQL cannot run here), else nil.
    var skipped: String?
    /// `SHOW server_version`.
    var version = ""
    /// Device logins at about 1000 users, synchronous_commit=on (PostgreSQL's default).
    var logins: LoadResult?
    var loginUsers = 0
    var clients = 0
    /// `GET /healthz` and `GET /v1/me` on the same server.
    var reads: ReadNumbers?
    /// The same clients spread over two servers on one database, against all on one.
    var oneInstance: LoadResult?
    var twoInstances: LoadResult?
    /// Device logins at about 1000 and at `largeUsers` users, synchronous_commit=off on both.
    var growthSmall: LoadResult?
    var growthLarge: LoadResult?
    var smallUsers = 0
    var largeUsers = 0
    var wantedUsers = 0
    var seedSeconds = 0.0
}

extension Benchmark {
    /// The bench cluster: PostgreSQL's durable defaults (fsync, full_page_writes and
    /// synchronous_commit on), memory for a million users' indexes, and no checkpoint forced by
    /// WAL volume in the middle of a measurement (the bench checkpoints after each seeding).
    static let postgresSettings: [String: String] = [
        "shared_buffers": "256MB", "max_connections": "100", "max_wal_size": "8GB",
        "checkpoint_timeout": "30min",
        "work_mem": "4MB", "maintenance_work_mem": "64MB", "log_min_messages": "warning",
    ]

    /// Device logins, reads, one server against two, and the growth from 1k to `growthUsers`
    /// users, on a throwaway PostgreSQL cluster. Where PostgreSQL cannot run, the report says so.
    func measurePostgres(verifiesPerSecond: Double) throws {
        guard let cluster = postgresCluster() else { return }
        var numbers = PostgresNumbers()
        numbers.version = (try? cluster.sql("SHOW server_version")) ?? "?"
        try measurePostgresLoginsAndReads(cluster, into: &numbers)
        try measurePostgresCIBA(cluster, version: numbers.version)
        try measurePostgresGrowth(cluster, into: &numbers)
        report.postgres = numbers
    }

    /// `--postgres`: device logins, reads and one server against two, with the raw verifies
    /// measured just before and just after them (their mean is the ratio's denominator).
    func measurePostgresOnly() throws {
        let before = try measureVerify("before PostgreSQL's logins")
        guard let cluster = postgresCluster() else { return }
        var numbers = PostgresNumbers()
        numbers.version = (try? cluster.sql("SHOW server_version")) ?? "?"
        try measurePostgresLoginsAndReads(cluster, into: &numbers)
        let after = try measureVerify("after PostgreSQL's logins")
        report.raw.verifiesPerSecond = (before + after) / 2
        report.postgres = numbers
    }

    /// A throwaway cluster; nil, with the report saying why, where PostgreSQL cannot run.
    func postgresCluster() -> PostgresCluster? {
        progress("PostgreSQL: starting a throwaway cluster (initdb, pg_ctl) on a free loopback port")
        do {
            return try PostgresCluster(settings: Self.postgresSettings)
        } catch {
            progress("PostgreSQL figures skipped: \(error)")
            report.postgres = PostgresNumbers(skipped: "\(error)")
            return nil
        }
    }

    /// ``measureCIBA(_:engine:)`` on a new database of `cluster`, synchronous_commit=on.
    func measurePostgresCIBA(_ cluster: PostgresCluster, version: String) throws {
        var (configuration, _, _) = try postgresDatabase(
            cluster, users: 0, budget: 1, synchronousCommit: true)
        configuration.issuer = BenchProvider.issuer
        try measureCIBA(configuration, engine: "PostgreSQL \(version) synchronous_commit=on")
    }

    /// A new database with the server's schema (a `Server` opened on it runs the migrations)
    /// and `users` filler users with devices, seeded through the server's storage.
    /// - Returns: its configuration, how many users were seeded, and in how many seconds.
    private func postgresDatabase(
        _ cluster: PostgresCluster, users: Int, budget: Double, synchronousCommit: Bool
    ) throws -> (Configuration, Int, Double) {
        let name = try cluster.createDatabase()
        if !synchronousCommit { try cluster.sql("ALTER DATABASE \(name) SET synchronous_commit = off") }
        var configuration = configuration("postgres", synchronous: .full)
        configuration.databaseURL = cluster.url(database: name)
        configuration.databasePassword = cluster.password
        _ = try Server(configuration: configuration)
        let started = nanoseconds()
        let storage = try PostgresDatabase(
            url: configuration.databaseURL, password: cluster.password, maximumConnections: 1)
        let seeded = try Seed.usersWithDevices(
            into: storage, count: users, passwordHash: passwordHash,
            publicKey: P256SigningKey().publicKey.spkiDER, deadline: started + UInt64(budget * 1e9))
        // Statistics for the planner on the tables seeded, and the seeded pages written out now
        // rather than by a checkpoint in the middle of a measurement. Only those: an empty table
        // ANALYZE has seen is believed empty (PostgreSQL assumes 10 pages only for one never
        // analyzed), so a statement first prepared on it keeps a plan for an empty table (the
        // token lookup of GET /v1/me scanned every session) until autovacuum analyzes it again.
        // A production database has no such table: its tables were analyzed with rows in them,
        // or never.
        try cluster.sql("ANALYZE users, devices", database: name)
        try cluster.sql("CHECKPOINT")
        let elapsed = seconds(since: started)
        progress("PostgreSQL: seeded \(seeded) users with devices in \(f(elapsed, 1)) s")
        return (configuration, seeded, elapsed)
    }

    private func measurePostgresLoginsAndReads(
        _ cluster: PostgresCluster, into numbers: inout PostgresNumbers
    )
        throws
    {
        let fillers = max(0, 1000 - options.concurrency)
        let (configuration, _, _) = try postgresDatabase(
            cluster, users: fillers, budget: 60, synchronousCommit: true)
        let (server, port) = try start(configuration)
        defer { server.stop(gracePeriod: 1) }
        let clients = try deviceClients(port: port, tag: "pg")
        numbers.clients = clients.count
        numbers.loginUsers = fillers + clients.count
        progress(
            "PostgreSQL: device-key logins, \(numbers.loginUsers) users, synchronous_commit=on, "
                + "\(clients.count) clients, \(durations.deviceLogins) s")
        numbers.logins = runLoad(clients, warmup: durations.warmup, duration: durations.deviceLogins)

        progress("PostgreSQL: GET /healthz and GET /v1/me alternating, \(durations.reads) s each")
        let (health, me) = alternate(
            clients.map { GetWorker(connection: $0.connection, endpoint: API.health, bearer: nil) },
            clients.map { GetWorker(connection: $0.connection, endpoint: API.me, bearer: $0.accessToken) },
            rounds: 2, roundSeconds: durations.reads / 2, warmup: 0.1)
        numbers.reads = ReadNumbers(health: health, me: me, clients: clients.count)

        // The same number of clients, all on one server or half on each of two servers that
        // share the database. Each side has users of its own, new ones: a user's every login
        // leaves a session behind, and the sides should not differ in how many they have.
        let (second, secondPort) = try start(configuration)
        defer { second.stop(gracePeriod: 1) }
        let half = max(1, clients.count / 2)
        let one = try deviceClients(port: port, tag: "pg-one")
        let two =
            try deviceClients(port: port, tag: "pg-two-a").prefix(half)
            + deviceClients(port: secondPort, tag: "pg-two-b").prefix(clients.count - half)
        progress(
            "PostgreSQL: device-key logins from \(clients.count) clients on one server, then spread over "
                + "two, alternating, \(durations.growthRounds) x \(durations.growthRoundSeconds) s each")
        (numbers.oneInstance, numbers.twoInstances) = alternate(
            one, Array(two), rounds: durations.growthRounds, roundSeconds: durations.growthRoundSeconds,
            warmup: durations.warmup)
    }

    /// Device logins at 1000 users and at ``Durations/growthUsers``, in alternating rounds, both
    /// at synchronous_commit=off: as on SQLite (synchronous=normal), the commit's disk flush would
    /// otherwise decide the ratio, not the size of the tables.
    private func measurePostgresGrowth(_ cluster: PostgresCluster, into numbers: inout PostgresNumbers) throws
    {
        let smallFillers = max(0, 1000 - options.concurrency)
        let (smallConfiguration, _, _) = try postgresDatabase(
            cluster, users: smallFillers, budget: 60, synchronousCommit: false)
        let wanted = max(0, durations.growthUsers - options.concurrency)
        progress(
            "PostgreSQL: seeding up to \(wanted) users with devices through the server's storage "
                + "(budget \(f(durations.postgresSeedBudget, 0)) s)")
        let (largeConfiguration, largeFillers, seedSeconds) = try postgresDatabase(
            cluster, users: wanted, budget: durations.postgresSeedBudget, synchronousCommit: false)
        let (smallServer, smallPort) = try start(smallConfiguration)
        defer { smallServer.stop(gracePeriod: 1) }
        let (largeServer, largePort) = try start(largeConfiguration)
        defer { largeServer.stop(gracePeriod: 1) }
        let smallClients = try deviceClients(port: smallPort, tag: "pg-small")
        let largeClients = try deviceClients(port: largePort, tag: "pg-large")
        numbers.smallUsers = smallFillers + smallClients.count
        numbers.largeUsers = largeFillers + largeClients.count
        numbers.wantedUsers = durations.growthUsers
        numbers.seedSeconds = seedSeconds
        progress(
            "PostgreSQL: device-key logins at \(numbers.smallUsers) and \(numbers.largeUsers) users "
                + "alternating, synchronous_commit=off, \(durations.growthRounds) x "
                + "\(durations.growthRoundSeconds) s each")
        (numbers.growthSmall, numbers.growthLarge) = alternate(
            smallClients, largeClients, rounds: durations.growthRounds,
            roundSeconds: durations.growthRoundSeconds,
            warmup: durations.warmup)
    }
}

extension Report {
    /// The targets measured again on PostgreSQL, and the two-server comparison.
    var postgresVerdicts: [Verdict] {
        guard let postgres, postgres.skipped == nil else { return [] }
        var verdicts: [Verdict] = []
        if let logins = postgres.logins {
            var details = [
                "\(f(logins.perSecond, 0)) logins/s vs \(f(raw.verifiesPerSecond, 0)) raw verifies/s; "
                    + "\(postgres.clients) clients, \(postgres.loginUsers) users, PostgreSQL \(postgres.version) "
                    + "synchronous_commit=on, \(latency(logins)), \(failures(logins))"
            ]
            if let sqlite = deviceLogins {
                details.append(
                    "beside SQLite synchronous=\(sqlite.synchronous.rawValue): "
                        + "\(f(sqlite.result.perSecond, 0)) logins/s, \(latency(sqlite.result))")
            }
            if let one = postgres.oneInstance, let two = postgres.twoInstances {
                details.append(
                    "two servers on one database: \(f(two.perSecond, 0)) logins/s (\(latency(two)), "
                        + "\(failures(two))) vs one: \(f(one.perSecond, 0)) logins/s (\(latency(one))), "
                        + "\(postgres.clients) clients either way; ratio \(f(one.perSecond > 0 ? two.perSecond / one.perSecond : 0, 2))"
                )
            }
            var numbers: [String: Any] = [
                "logins_per_second": logins.perSecond, "verifies_per_second": raw.verifiesPerSecond,
                "clients": postgres.clients, "users": postgres.loginUsers, "p50_ms": logins.percentile(0.5),
                "p99_ms": logins.percentile(0.99), "failed": logins.failed,
                "postgres_version": postgres.version,
            ]
            if let one = postgres.oneInstance, let two = postgres.twoInstances {
                numbers["one_server_logins_per_second"] = one.perSecond
                numbers["two_servers_logins_per_second"] = two.perSecond
                numbers["two_servers_p99_ms"] = two.percentile(0.99)
                numbers["two_servers_failed"] = two.failed
            }
            verdicts.append(
                Verdict(
                    number: "1", id: "postgres_device_login",
                    title: "PostgreSQL: device-key logins/s / raw P-256 verifies/s (1 core)",
                    ratio: raw.verifiesPerSecond > 0 ? logins.perSecond / raw.verifiesPerSecond : 0,
                    comparison: ">=", target: 0.5, stretch: 0.8, details: details, numbers: numbers))
        }
        if let reads = postgres.reads {
            verdicts.append(
                Verdict(
                    number: "2", id: "postgres_me_vs_healthz",
                    title: "PostgreSQL: GET /v1/me per s / GET /healthz per s",
                    ratio: reads.health.perSecond > 0 ? reads.me.perSecond / reads.health.perSecond : 0,
                    comparison: ">=", target: 0.6, stretch: nil,
                    details: [
                        "/v1/me \(f(reads.me.perSecond, 0))/s (\(latency(reads.me)), \(failures(reads.me))); "
                            + "/healthz \(f(reads.health.perSecond, 0))/s (\(latency(reads.health)), "
                            + "\(failures(reads.health)))"
                    ],
                    numbers: [
                        "me_per_second": reads.me.perSecond, "healthz_per_second": reads.health.perSecond,
                        "me_p99_ms": reads.me.percentile(0.99),
                        "healthz_p99_ms": reads.health.percentile(0.99),
                        "failed": reads.me.failed + reads.health.failed,
                    ]))
        }
        if let small = postgres.growthSmall, let large = postgres.growthLarge {
            let smallP99 = small.percentile(0.99)
            let largeP99 = large.percentile(0.99)
            var details = [
                "p99 \(f(largeP99, 2)) ms at \(postgres.largeUsers) users vs \(f(smallP99, 2)) ms at "
                    + "\(postgres.smallUsers) users; \(f(large.perSecond, 0)) vs \(f(small.perSecond, 0)) logins/s, "
                    + "\(failures(large))",
                "p50 \(f(large.percentile(0.5), 2)) vs \(f(small.percentile(0.5), 2)) ms; both at "
                    + "synchronous_commit=off, alternating rounds, \(f(large.window, 1)) s each; users with a bound "
                    + "device each, seeded through the server's storage in \(f(postgres.seedSeconds, 1)) s",
            ]
            if postgres.largeUsers < postgres.wantedUsers {
                details.append(
                    "ONLY \(postgres.largeUsers) of \(postgres.wantedUsers) users: seeding hit its time bound"
                )
            }
            verdicts.append(
                Verdict(
                    number: "5", id: "postgres_growth",
                    title:
                        "PostgreSQL: device-login p99 at \(postgres.largeUsers) users / at \(postgres.smallUsers)",
                    ratio: smallP99 > 0 ? largeP99 / smallP99 : 0, comparison: "<=", target: 2, stretch: nil,
                    details: details,
                    numbers: [
                        "large_users": postgres.largeUsers, "wanted_users": postgres.wantedUsers,
                        "small_users": postgres.smallUsers, "large_p99_ms": largeP99,
                        "small_p99_ms": smallP99,
                        "large_p50_ms": large.percentile(0.5), "small_p50_ms": small.percentile(0.5),
                        "large_logins_per_second": large.perSecond, "seed_seconds": postgres.seedSeconds,
                        "failed": large.failed + small.failed,
                    ]))
        }
        return verdicts
    }
}
