import Foundation
import KeyboundServer

/// Command-line options.
struct BenchOptions {
    var quick = false
    var json = false
    var help = false
    /// `--abuse`: only the abuse section (slow senders, the request deadline, login timing).
    var abuseOnly = false
    /// `--housekeeping`: only the housekeeping section (the purge of piled-up expired rows).
    var housekeepingOnly = false
    /// `--oauth`: only issue 23's section (DPoP-bound reads, code exchanges, token-endpoint
    /// refreshes).
    var providerOnly = false
    /// `--webhooks`: only device logins with and without a webhook endpoint.
    var webhooksOnly = false
    /// `--ciba`: only CIBA round trips (issue 24), on SQLite and PostgreSQL.
    var cibaOnly = false
    /// `--postgres`: only PostgreSQL's device logins, reads and one server against two.
    var postgresOnly = false
    /// Client threads (connections) for device logins, refreshes and the read comparison: enough
    /// requests in flight that a group commit has company while it waits for its sync.
    var concurrency = 64
    /// Durability of the main measurements; the other mode is measured briefly beside it.
    var synchronous: SQLiteSynchronous = .full
    /// Users for the growth measurement (default 1M, 100k with --quick).
    var growthUsers: Int?
    /// Live sessions for the idle memory measurement.
    var sessions = 100_000
    /// Whether to measure on PostgreSQL too (a throwaway cluster; skipped, with a line saying
    /// why, where PostgreSQL cannot run).
    var postgres = true
    /// `--profile OPERATION N`: only run N operations in-process, for a profiler.
    var profile: (operation: Profile.Operation, count: Int)?

    static let usage = """
        usage: keybound-bench [--quick] [--json] [--concurrency N] [--sqlite-synchronous full|normal]
                              [--growth-users N] [--sessions N] [--no-postgres] [--abuse]
                              [--housekeeping] [--oauth] [--webhooks] [--ciba] [--postgres]
               keybound-bench --profile healthz|me|challenge|login|refresh|dpop-me N

          Measures the performance targets of docs/design.md against an in-process server on 127.0.0.1
          in one run, on SQLite then PostgreSQL (about 3 minutes; 80 s with --no-postgres), and
          prints each as a ratio with PASS/FAIL.
          --json                  one JSON object on standard output instead of the table
          --concurrency N         client connections for device logins and reads (default 64)
          --sqlite-synchronous M  durability of the main runs (default full, the server's default);
                                  the growth comparison always runs at normal and also gives the
                                  device-login rate at normal
          --growth-users N        users for the growth measurement (default 1000000; 100000 with --quick)
          --sessions N            live sessions for the idle memory measurement (default 100000)
          --no-postgres           skip the PostgreSQL figures (device logins, reads, two servers
                                  against one, the growth to --growth-users users), which otherwise
                                  run on a throwaway cluster after SQLite's
          --abuse                 only the abuse section: normal clients under slow senders, the
                                  request deadline, unknown-user vs wrong-password login timing
          --webhooks              only device logins with and without one webhook endpoint (each
                                  login then emits session.revoked: its client's session replaced)
          --ciba                  only CIBA round trips (POST /oauth/bc-authorize, the phone lists the
                                  approval, signs and confirms it, POST /oauth/token), on SQLite then
                                  PostgreSQL (about 20 s)
          --postgres              only PostgreSQL's device logins, reads and one server against
                                  two (issue 25), with raw verifies just before and just after
                                  (about 40 s)
          --housekeeping          only the housekeeping section: the server's purge of 1.25M expired
                                  challenges and 100k ended sessions (250k and 20k with --quick), and
                                  the refresh rotations that wait for it meanwhile
          --oauth                 only the provider's section (issue 23): DPoP-bound GET /v1/me (with its
                                  bound and bearer GET /v1/me alternating), OAuth code exchanges, and
                                  refresh rotations on /oauth/token alternating with /v1's, on a server
                                  of their own (about 30 s; 15 s with --quick)
          --profile OPERATION N   instead: N operations one after another through the server's
                                  in-process handler (no sockets), to run under perf or callgrind
        """

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ arguments: [String]) throws -> BenchOptions {
        var options = BenchOptions()
        var remaining = arguments[...]
        func value(_ name: String) throws -> String {
            guard let next = remaining.popFirst() else { throw Invalid(description: "\(name) needs a value") }
            return next
        }
        func count(_ name: String, _ range: ClosedRange<Int>) throws -> Int {
            let text = try value(name)
            guard let number = Int(text), range.contains(number) else {
                throw Invalid(description: "\(name) must be a whole number in \(range)")
            }
            return number
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--quick": options.quick = true
            case "--json": options.json = true
            case "--abuse": options.abuseOnly = true
            case "--housekeeping": options.housekeepingOnly = true
            case "--oauth": options.providerOnly = true
            case "--webhooks": options.webhooksOnly = true
            case "--ciba": options.cibaOnly = true
            case "--postgres": options.postgresOnly = true
            case "-h", "--help": options.help = true
            case "--concurrency": options.concurrency = try count(argument, 1...256)
            case "--growth-users": options.growthUsers = try count(argument, 1000...10_000_000)
            case "--sessions": options.sessions = try count(argument, 0...10_000_000)
            case "--no-postgres": options.postgres = false
            case "--profile":
                let name = try value(argument)
                guard let operation = Profile.Operation(rawValue: name) else {
                    throw Invalid(
                        description: "--profile is one of healthz, me, challenge, login, refresh, dpop-me")
                }
                options.profile = (operation, try count("--profile \(name)", 1...10_000_000))
            case "--sqlite-synchronous":
                let text = try value(argument)
                guard let mode = SQLiteSynchronous(rawValue: text) else {
                    throw Invalid(description: "--sqlite-synchronous is full or normal")
                }
                options.synchronous = mode
            default: throw Invalid(description: "unknown argument \(argument)")
            }
        }
        return options
    }
}

/// How long each measurement runs, in seconds.
struct Durations {
    let verify: Double
    let argon2: Double
    let warmup: Double
    let deviceLogins: Double
    /// The login's bound, right after the logins.
    let bound: Double
    let refresh: Double
    let reads: Double
    /// OAuth code exchanges (issue 23).
    let exchanges: Double
    /// CIBA round trips (issue 24), on each engine.
    let ciba: Double
    let growthRounds: Int
    let growthRoundSeconds: Double
    let passwordLogins: Double
    let growthSeedBudget: Double
    /// Seeding PostgreSQL goes through a server process and its WAL: slower than SQLite's.
    let postgresSeedBudget: Double
    let growthUsers: Int

    init(_ options: BenchOptions) {
        if options.quick {
            (verify, argon2, warmup, deviceLogins, reads, passwordLogins, growthSeedBudget) =
                (1, 0.4, 0.2, 1.5, 1, 1.5, 4)
            (growthRounds, growthRoundSeconds) = (2, 0.75)
            (bound, refresh, exchanges, ciba) = (1, 1, 1, 1)
            growthUsers = options.growthUsers ?? 100_000
            postgresSeedBudget = 30
        } else {
            (verify, argon2, warmup, deviceLogins, reads, passwordLogins, growthSeedBudget) =
                (2, 1.5, 0.3, 4, 2, 4, 30)
            (growthRounds, growthRoundSeconds) = (3, 1.5)
            (bound, refresh, exchanges, ciba) = (2, 2, 2, 2)
            growthUsers = options.growthUsers ?? 1_000_000
            postgresSeedBudget = 240
        }
    }
}
