import Foundation
import KeyboundCrypto
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

/// When the process started (monotonic), for the progress lines.
let processStart = nanoseconds()

/// Writes a progress line to standard error (standard output carries only the report).
func progress(_ text: String) {
    let resident = residentMiB().map { ", rss \(f($0, 0)) MiB" } ?? ""
    let line = "keybound-bench [\(f(seconds(since: processStart), 1)) s\(resident)]: \(text)\n"
    FileHandle.standardError.write(Data(line.utf8))
}

/// The measurements, in order: raw costs first, then the server phases, each on a fresh
/// database in a temporary folder and a fresh in-process server on 127.0.0.1, port 0.
final class Benchmark {
    let options: BenchOptions
    let durations: Durations
    let cores = ProcessInfo.processInfo.activeProcessorCount
    let folder: URL
    var report: Report
    /// A real encoded Argon2id hash at the default parameters, stored for every seeded user.
    private(set) var passwordHash = ""

    init(options: BenchOptions) {
        self.options = options
        durations = Durations(options)
        folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-bench-\(UUID().uuidString)")
        report = Report(options: options, cores: cores)
    }

    func run() throws -> Report {
        signal(SIGPIPE, SIG_IGN)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { removeDatabases(andFolder: true) }
        let started = nanoseconds()
        if options.abuseOnly || options.housekeepingOnly || options.providerOnly
            || options.webhooksOnly || options.cibaOnly || options.postgresOnly
        {
            if options.providerOnly {
                report.raw.verifiesPerSecond = try measureVerify()
                try measureProvider()
                removeDatabases()
            }
            if options.abuseOnly { try measureAbuse() }
            if options.housekeepingOnly { try measureHousekeeping() }
            if options.webhooksOnly { try measureWebhookLogins() }
            if options.cibaOnly { try measureCIBAOnly() }
            if options.postgresOnly { try measurePostgresOnly() }
            report.totalSeconds = seconds(since: started)
            return report
        }
        let verify = try measureVerify()
        report.raw.verifiesPerSecond = verify
        let argon2 = try measureArgon2()
        // Each phase's servers are gone when it returns: delete its files before the next one.
        try measureMemoryAndPasswordLogins(argon2: argon2)
        removeDatabases()
        try measureDeviceLoginsAndReads()
        removeDatabases()
        try measureGrowth(verifiesPerSecond: verify)
        removeDatabases()
        try measureWebhookLogins()
        removeDatabases()
        try measureSQLiteCIBA()
        removeDatabases()
        if options.postgres { try measurePostgres(verifiesPerSecond: verify) }
        try measureHousekeeping()
        removeDatabases()
        try measureAbuse()
        report.totalSeconds = seconds(since: started)
        return report
    }

    /// Deletes the databases of finished phases (a million users take about 550 MB), and at the
    /// end the folder. Says so when something is left behind.
    private func removeDatabases(andFolder: Bool = false) {
        let manager = FileManager.default
        let names = (try? manager.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names {
            let file = folder.appendingPathComponent(name)
            // A server that just stopped may have removed its -wal and -shm files itself.
            if (try? manager.removeItem(at: file)) == nil, manager.fileExists(atPath: file.path) {
                progress("could not delete \(file.path)")
            }
        }
        if andFolder, (try? manager.removeItem(at: folder)) == nil {
            progress("could not delete \(folder.path)")
        }
    }

    // MARK: Raw costs

    /// Raw P-256 verifies per second on one core (this thread), through KeyboundCrypto, of a
    /// login payload of the real size. `when` says which measurement it is, if not the first.
    func measureVerify(_ when: String? = nil) throws -> Double {
        progress("raw P-256 verify, one core, \(durations.verify) s" + (when.map { ", \($0)" } ?? ""))
        let key = try P256SigningKey()
        let payload = try SigningPayload(
            purpose: .login, server: "keybound", device: "dev_AAAAAAAAAAAAAAAAAAAAAA",
            challenge: SecureRandom.bytes(32), expires: Date(), action: nil
        ).bytes
        let signature = try key.signature(for: payload)
        let publicKey = key.publicKey
        var count = 0
        var start = nanoseconds()
        var warm = false
        while true {
            for _ in 0..<50 {
                guard publicKey.isValidSignature(signature, for: payload) else {
                    throw HTTPClientError(description: "a valid signature did not verify")
                }
            }
            count += 50
            let elapsed = seconds(since: start)
            if !warm && elapsed >= 0.2 {
                (warm, count, start) = (true, 0, nanoseconds())
            } else if warm && elapsed >= durations.verify {
                return Double(count) / elapsed
            }
        }
    }

    /// `workers` under load for `duration` seconds (after the warm-up), with the raw verifies
    /// measured right before and right after: the machine's speed drifts within a run (a shared
    /// VM), so a load's rate is compared with those, not only with the start of the run's.
    /// - Parameter load: what the load is, for the progress lines (`the logins`).
    func loadBetweenVerifies(_ workers: [any LoadWorker], duration: Double, _ load: String) throws -> (
        LoadResult, VerifiesAround
    ) {
        let before = try measureVerify("just before \(load)")
        let result = runLoad(workers, warmup: durations.warmup, duration: duration)
        let after = try measureVerify("just after \(load)")
        return (result, VerifiesAround(before, after))
    }

    struct Argon2Cost {
        let parameters: Argon2Parameters
        let verifySeconds: Double
        let allCoresPerSecond: Double
        let password: String
        let encodedHash: String
    }

    /// One Argon2id verify at the server's default parameters, through the server's own
    /// ``PasswordHasher`` (libsodium), single-threaded: the median of several.
    private func measureArgon2() throws -> Argon2Cost {
        let parameters = Configuration().argon2
        progress("Argon2id verify at m=\(parameters.memoryKiB) KiB, t=\(parameters.iterations), p=1")
        // As many slots as cores, so the all-cores measurement below is not held back.
        let hasher = try PasswordHasher(parameters: parameters, concurrency: cores)
        let password = "bench password of the login users"
        let encoded = try hasher.hash(password)
        var samples: [Double] = []
        let start = nanoseconds()
        while samples.count < 3 || (seconds(since: start) < durations.argon2 && samples.count < 31) {
            let began = nanoseconds()
            guard hasher.verify(password, against: encoded) else {
                throw HTTPClientError(description: "argon2id verify failed")
            }
            samples.append(seconds(since: began))
        }
        samples.sort()
        let median = samples[samples.count / 2]
        // The same verify on every core at once: what the hardware gives when all cores hash.
        let budget = durations.argon2 / 2
        let counts = try parallelMap(cores, threads: cores) { _ -> (Int, Double) in
            var done = 0
            let began = nanoseconds()
            while done < 2 || seconds(since: began) < budget {
                guard hasher.verify(password, against: encoded) else {
                    throw HTTPClientError(description: "argon2id verify failed")
                }
                done += 1
            }
            return (done, seconds(since: began))
        }
        let allCores = counts.reduce(0) { $0 + Double($1.0) / $1.1 }
        report.raw.argon2 = (parameters, median, samples.count, allCores)
        passwordHash = encoded
        return Argon2Cost(
            parameters: parameters, verifySeconds: median, allCoresPerSecond: allCores, password: password,
            encodedHash: encoded)
    }

    // MARK: Servers

    func configuration(_ name: String, synchronous: SQLiteSynchronous) -> Configuration {
        var configuration = Configuration()
        configuration.port = 0
        configuration.databaseURL = "sqlite:" + folder.appendingPathComponent("\(name).sqlite").path
        configuration.log = .discard
        configuration.sqliteSynchronous = synchronous
        configuration.signupLimit = 0  // every bench client signs up from loopback
        // Every load connection comes from 127.0.0.1: no per-address cap, and no per-address
        // failure count (a password login counts as a failure until its hash has said otherwise,
        // so many concurrent logins from one address would be throttled).
        configuration.perIPConnectionLimit = 0
        configuration.addressFailureLimit = 0
        return configuration
    }

    private func path(of configuration: Configuration) -> String {
        String(configuration.databaseURL.dropFirst("sqlite:".count))
    }

    /// Runs the server's migrations on a new file, so seeding writes into exactly the server's
    /// schema.
    private func createSchema(_ configuration: Configuration) throws {
        try Seed.createSchema(path: path(of: configuration))
    }

    func start(_ configuration: Configuration) throws -> (Server, UInt16) {
        let server = try Server(configuration: configuration)
        try server.start()
        guard let port = server.port else { throw HTTPClientError(description: "the server has no port") }
        return (server, port)
    }

    /// `concurrency` device-login clients, registered in parallel through the API.
    func deviceClients(port: UInt16, tag: String) throws -> [DeviceLoginWorker] {
        try parallelMap(options.concurrency, threads: options.concurrency) { index in
            try DeviceLoginWorker(port: port, username: "bench-\(tag)-\(index)")
        }
    }

    // MARK: Memory and password logins (targets 3 and 4)

    private func measureMemoryAndPasswordLogins(argon2: Argon2Cost) throws {
        let configuration = configuration("memory", synchronous: options.synchronous)
        try createSchema(configuration)
        let loginUsers = (0..<64).map { "login\($0)" }
        progress("seeding \(options.sessions) live sessions through the server's storage")
        let seedStart = nanoseconds()
        let sample = try Seed.sessions(
            path: path(of: configuration), count: options.sessions, passwordHash: argon2.encodedHash,
            loginUsers: loginUsers)
        let seedSeconds = seconds(since: seedStart)
        trimHeap()
        let before = residentMiB() ?? 0
        let (server, port) = try start(configuration)
        defer { server.stop(gracePeriod: 1) }
        // The seeded tokens must work, or the population is not what it claims to be.
        let checker = try HTTPConnection(port: port)
        try expect(checker.send(API.health), 200, "healthz")
        for token in sample {
            try expect(checker.send(API.me, bearer: token), 200, "GET /v1/me (seeded)")
        }
        Thread.sleep(forTimeInterval: 0.5)
        let idle = residentMiB() ?? 0

        progress("64 concurrent password logins (Argon2id at the default), \(durations.passwordLogins) s")
        let workers = try loginUsers.map {
            try PasswordLoginWorker(port: port, username: $0, password: argon2.password)
        }
        let sampler = ResidentSampler()
        let logins = runLoad(workers, warmup: durations.warmup, duration: durations.passwordLogins)
        let peak = max(sampler.stop(), idle)
        report.memory = MemoryNumbers(
            sessions: options.sessions, seedSeconds: seedSeconds, beforeServerMiB: before, idleMiB: idle,
            peakMiB: peak, hashingConcurrency: configuration.hashingConcurrency,
            argon2MiB: Double(argon2.parameters.memoryKiB) / 1024)
        report.passwordLogins = PasswordNumbers(
            result: logins, clients: workers.count, verifySeconds: argon2.verifySeconds, cores: cores,
            allCoresHashes: argon2.allCoresPerSecond)
    }

    // MARK: Device logins and reads (targets 1 and 2)

    private func seedFillers(_ configuration: Configuration, users: Int, budget: Double) throws -> (
        Int, Double
    ) {
        let started = nanoseconds()
        let inserted = try Seed.usersWithDevices(
            path: path(of: configuration), count: users, passwordHash: passwordHash,
            publicKey: P256SigningKey().publicKey.spkiDER, deadline: started + UInt64(budget * 1e9))
        let elapsed = seconds(since: started)
        progress("seeded \(inserted) users with devices in \(f(elapsed, 1)) s")
        return (inserted, elapsed)
    }

    /// The configuration of a server with the provider on (``BenchProvider``), and the id of the
    /// public client registered on its new database.
    private func providerConfiguration(_ name: String) throws -> (Configuration, clientID: String) {
        var configuration = configuration(name, synchronous: options.synchronous)
        configuration.issuer = BenchProvider.issuer
        try createSchema(configuration)
        return (configuration, try BenchProvider.registerClient(configuration))
    }

    /// `--oauth`: only issue 23's figures (DPoP-bound reads, code exchanges, token-endpoint
    /// refreshes), on a server of their own with 64 device clients.
    private func measureProvider() throws {
        let (configuration, clientID) = try providerConfiguration("provider")
        let (server, port) = try start(configuration)
        defer { server.stop(gracePeriod: 1) }
        let clients = try deviceClients(port: port, tag: "provider")
        try measureDPoPReads(port: port, bearerClients: clients)
        try measureOAuth(
            port: port, clientID: clientID,
            apiRefreshes: clients.map {
                RefreshWorker(connection: $0.connection, refreshToken: $0.refreshToken)
            })
    }

    @discardableResult
    private func measureDeviceLoginsAndReads() throws -> LoadResult {
        // The provider is on (issue 23's figures run on this server too); nothing else changes.
        let (configuration, clientID) = try providerConfiguration("small")
        let fillers = max(0, 1000 - options.concurrency)
        _ = try seedFillers(configuration, users: fillers, budget: 30)
        let (server, port) = try start(configuration)
        defer { server.stop(gracePeriod: 1) }
        let clients = try deviceClients(port: port, tag: "small")
        progress(
            "device-key logins, \(fillers + clients.count) users, synchronous=\(options.synchronous.rawValue), "
                + "\(clients.count) clients, \(durations.deviceLogins) s")
        let (logins, verifies) = try loadBetweenVerifies(
            clients, duration: durations.deviceLogins, "the logins")
        report.deviceLogins = DeviceNumbers(
            result: logins, clients: clients.count, users: fillers + clients.count,
            synchronous: options.synchronous, verifiesAround: verifies)

        progress(
            "the login's bound (2 x GET /healthz + verify + sign), \(clients.count) clients, \(durations.bound) s"
        )
        report.loginBound = runLoad(
            try clients.map { try LoginBoundWorker(connection: $0.connection) }, warmup: durations.warmup,
            duration: durations.bound)

        progress("refresh-token rotations, \(clients.count) clients, \(durations.refresh) s")
        let refreshers = clients.map {
            RefreshWorker(connection: $0.connection, refreshToken: $0.refreshToken)
        }
        report.refreshes = runLoad(refreshers, warmup: durations.warmup, duration: durations.refresh)

        progress(
            "GET /healthz and GET /v1/me alternating, \(clients.count) clients, \(durations.reads) s each")
        let (health, me) = alternate(
            clients.map { GetWorker(connection: $0.connection, endpoint: API.health, bearer: nil) },
            clients.map { GetWorker(connection: $0.connection, endpoint: API.me, bearer: $0.accessToken) },
            rounds: 2, roundSeconds: durations.reads / 2, warmup: 0.1)
        report.reads = ReadNumbers(health: health, me: me, clients: clients.count)
        try measureDPoPReads(port: port, bearerClients: clients)
        try measureOAuth(port: port, clientID: clientID, apiRefreshes: refreshers)
        return logins
    }

    // MARK: Growth (target 5)

    /// Device logins against a server with 1000 users and one with `growthUsers`, in alternating
    /// rounds. Both run with synchronous=normal: fsync latency on a shared disk (hundreds of ms at
    /// p99 here) would otherwise decide the ratio, not the size of the tables. The 1000-user side
    /// also gives the device-login rate at synchronous=normal for target 1.
    private func measureGrowth(verifiesPerSecond: Double) throws {
        let smallConfiguration = configuration("growth-small", synchronous: .normal)
        try createSchema(smallConfiguration)
        let smallFillers = max(0, 1000 - options.concurrency)
        _ = try seedFillers(smallConfiguration, users: smallFillers, budget: 30)

        let largeConfiguration = configuration("growth-large", synchronous: .normal)
        try createSchema(largeConfiguration)
        let wanted = max(0, durations.growthUsers - options.concurrency)
        progress(
            "seeding up to \(wanted) users with devices through the server's storage (budget \(durations.growthSeedBudget) s)"
        )
        let (largeFillers, seedSeconds) = try seedFillers(
            largeConfiguration, users: wanted, budget: durations.growthSeedBudget)

        let (smallServer, smallPort) = try start(smallConfiguration)
        defer { smallServer.stop(gracePeriod: 1) }
        let (largeServer, largePort) = try start(largeConfiguration)
        defer { largeServer.stop(gracePeriod: 1) }
        let smallClients = try deviceClients(port: smallPort, tag: "small")
        let largeClients = try deviceClients(port: largePort, tag: "large")
        let smallUsers = smallFillers + smallClients.count
        let largeUsers = largeFillers + largeClients.count
        progress(
            "device-key logins at \(smallUsers) and \(largeUsers) users alternating, synchronous=normal, "
                + "\(durations.growthRounds) x \(durations.growthRoundSeconds) s each")
        let (small, large) = alternate(
            smallClients, largeClients, rounds: durations.growthRounds,
            roundSeconds: durations.growthRoundSeconds,
            warmup: durations.warmup)
        if options.synchronous != .normal {
            report.otherMode = DeviceNumbers(
                result: small, clients: smallClients.count, users: smallUsers, synchronous: .normal,
                verifiesAround: VerifiesAround(verifiesPerSecond, verifiesPerSecond))
        }
        report.growth = GrowthNumbers(
            small: small, smallUsers: smallUsers, large: large, largeUsers: largeUsers,
            wantedUsers: durations.growthUsers, seedSeconds: seedSeconds, synchronous: .normal)
    }
}
