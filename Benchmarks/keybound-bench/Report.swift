import Foundation
import KeyboundServer

struct MemoryNumbers {
    let sessions: Int
    let seedSeconds: Double
    let beforeServerMiB: Double
    let idleMiB: Double
    let peakMiB: Double
    let hashingConcurrency: Int
    let argon2MiB: Double

    static let idleBudgetMiB = 64.0
    /// "Bounded": the peak may exceed idle by at most twice the memory of the hashes the server
    /// lets run at once.
    var growthBudgetMiB: Double { 2 * Double(hashingConcurrency) * argon2MiB }
}

struct PasswordNumbers {
    let result: LoadResult
    let clients: Int
    let verifySeconds: Double
    let cores: Int
    /// Argon2id verifies per second measured with every core hashing at once.
    let allCoresHashes: Double

    var ceiling: Double { Double(cores) / verifySeconds }
}

/// Raw P-256 verifies per second measured right before and right after a load: this shared VM's
/// speed drifts within a run, so a load's ratio is taken to their mean.
struct VerifiesAround {
    let before: Double
    let after: Double

    init(_ before: Double, _ after: Double) {
        (self.before, self.after) = (before, after)
    }

    /// The verify rate ratios are taken to.
    var perSecond: Double { (before + after) / 2 }

    /// `rate` over ``perSecond``; 0 when nothing was measured.
    func ratio(of rate: Double) -> Double { perSecond > 0 ? rate / perSecond : 0 }
}

struct DeviceNumbers {
    let result: LoadResult
    let clients: Int
    let users: Int
    let synchronous: SQLiteSynchronous
    /// Raw verifies per second measured right before and right after these logins (for the
    /// other-mode figure, which runs inside the growth phase, the start of the run's twice).
    let verifiesAround: VerifiesAround

    /// The raw verify rate the ratio is taken to.
    var verifiesPerSecond: Double { verifiesAround.perSecond }
    var ratio: Double { verifiesAround.ratio(of: result.perSecond) }
}

struct ReadNumbers {
    let health: LoadResult
    let me: LoadResult
    let clients: Int
}

struct GrowthNumbers {
    let small: LoadResult
    let smallUsers: Int
    let large: LoadResult
    let largeUsers: Int
    let wantedUsers: Int
    let seedSeconds: Double
    let synchronous: SQLiteSynchronous
}

/// One line of the verdict table.
struct Verdict {
    /// The target's number in docs/design.md's list (`4a`, `4b` for the two memory bounds).
    let number: String
    let id: String
    let title: String
    let ratio: Double
    /// `>=` or `<=`.
    let comparison: String
    let target: Double
    let stretch: Double?
    let details: [String]
    let numbers: [String: Any]

    var pass: Bool { comparison == ">=" ? ratio >= target : ratio <= target }
    var stretchPass: Bool? { stretch.map { ratio >= $0 } }
}

struct Report {
    struct Raw {
        var verifiesPerSecond = 0.0
        var argon2: (parameters: Argon2Parameters, seconds: Double, samples: Int, allCoresPerSecond: Double)?
    }

    let options: BenchOptions
    let cores: Int
    var raw = Raw()
    var memory: MemoryNumbers?
    var passwordLogins: PasswordNumbers?
    var deviceLogins: DeviceNumbers?
    var otherMode: DeviceNumbers?
    var reads: ReadNumbers?
    /// The login's bound: 2 x GET /healthz + one verify + one sign per step, same clients.
    var loginBound: LoadResult?
    /// Refresh-token rotations, same clients and server as the device logins.
    var refreshes: LoadResult?
    var growth: GrowthNumbers?
    /// The PostgreSQL phases (Postgres.swift); nil with --no-postgres.
    var postgres: PostgresNumbers?
    /// Slow senders, the request deadline and login timing (issue 10, item 5).
    var abuse: AbuseNumbers?
    /// The purge of piled-up expired rows (issue 21, item 1).
    var housekeeping: HousekeepingNumbers?
    /// DPoP-bound `GET /v1/me` (issue 23, item 8).
    var dpopReads: DPoPNumbers?
    /// OAuth code exchanges and token-endpoint refreshes (issue 23, item 8).
    var oauth: OAuthNumbers?
    /// Device logins with and without a webhook endpoint (issue 24, item 7).
    var webhooks: WebhookNumbers?
    /// CIBA round trips, SQLite's then PostgreSQL's (issue 24, item 7).
    var ciba: [CIBANumbers] = []
    var totalSeconds = 0.0

    init(options: BenchOptions, cores: Int) {
        self.options = options
        self.cores = cores
    }

    static let client =
        "raw HTTP/1.1 keep-alive over POSIX sockets (one thread and one connection per client)"

    #if DEBUG
        static let build = "debug (numbers are NOT meaningful: use -c release)"
    #else
        static let build = "release"
    #endif

    /// The median, p99 and longest latency.
    static func spread(_ result: LoadResult) -> String {
        "p50 \(f(result.percentile(0.5), 2)) ms, p99 \(f(result.percentile(0.99), 2)) ms, max "
            + "\(f(Double(result.latencies.last ?? 0) / 1e6, 1)) ms"
    }

    func failures(_ result: LoadResult) -> String {
        guard result.failed > 0 else { return "0 failed" }
        return "\(result.failed) FAILED (first: \(result.firstError ?? "?"))"
    }

    func latency(_ result: LoadResult) -> String {
        "p50 \(f(result.percentile(0.5), 2)) ms, p99 \(f(result.percentile(0.99), 2)) ms, "
            + "CPU \(f(result.cpuPerOperation, 0)) us each"
    }

    private func boundRatio(_ device: DeviceNumbers, _ bound: LoadResult) -> Double {
        bound.perSecond > 0 ? device.result.perSecond / bound.perSecond : 0
    }

    /// Measurements without a target, printed with their ratio.
    var information: [(title: String, line: String, numbers: [String: Any])] {
        apiRefreshInformation + oauthInformation + cibaInformation
    }

    /// The /v1 refresh rotations, printed with their ratio.
    private var apiRefreshInformation: [(title: String, line: String, numbers: [String: Any])] {
        guard let refreshes else { return [] }
        let ratio = raw.verifiesPerSecond > 0 ? refreshes.perSecond / raw.verifiesPerSecond : 0
        // Keycloak's sizing guide budgets 120 refresh requests per second per vCPU.
        let keycloak = 120.0 * Double(cores)
        return [
            (
                "refresh-token rotations/s / raw P-256 verifies/s (1 core)",
                "\(f(refreshes.perSecond, 0)) rotations/s = \(f(ratio, 3)) x verifies; \(latency(refreshes)), "
                    + "\(failures(refreshes)); Keycloak's sizing guide: 120/s per vCPU = \(f(keycloak, 0))/s here",
                [
                    "rotations_per_second": refreshes.perSecond, "ratio_to_verifies": ratio,
                    "p50_ms": refreshes.percentile(0.5), "p99_ms": refreshes.percentile(0.99),
                    "failed": refreshes.failed, "seconds": refreshes.window,
                ]
            )
        ]
    }

    var verdicts: [Verdict] {
        var verdicts: [Verdict] = []
        if let device = deviceLogins {
            var details = [
                "\(f(device.result.perSecond, 0)) logins/s (POST /v1/challenges + P-256 sign + POST /v1/sessions/device)"
                    + " vs \(f(device.verifiesPerSecond, 0)) raw verifies/s (mean of "
                    + "\(f(device.verifiesAround.before, 0)) just before and \(f(device.verifiesAround.after, 0)) "
                    + "just after the logins; \(f(raw.verifiesPerSecond, 0))/s at the start of the run would give "
                    + "\(f(device.result.perSecond / raw.verifiesPerSecond, 3)))",
                "\(device.clients) clients, \(device.users) users, SQLite synchronous=\(device.synchronous.rawValue), "
                    + "\(latency(device.result)), \(failures(device.result))",
            ]
            if let bound = loginBound {
                details.append(
                    "the login's bound here: \(f(bound.perSecond, 0))/s (2 x GET /healthz + one verify + one sign "
                        + "per step, same clients and cores, CPU \(f(bound.cpuPerOperation, 0)) us each); "
                        + "logins reach \(f(boundRatio(device, bound), 2)) of it"
                )
            }
            if let other = otherMode {
                details.append(
                    "synchronous=\(other.synchronous.rawValue): \(f(other.result.perSecond, 0)) logins/s = "
                        + "\(f(other.ratio, 3)) x verifies, \(latency(other.result)), \(failures(other.result))"
                )
            }
            var numbers: [String: Any] = [
                "logins_per_second": device.result.perSecond, "verifies_per_second": device.verifiesPerSecond,
                "verifies_per_second_at_start": raw.verifiesPerSecond,
                "clients": device.clients, "users": device.users,
                "sqlite_synchronous": device.synchronous.rawValue,
                "p50_ms": device.result.percentile(0.5), "p99_ms": device.result.percentile(0.99),
                "cpu_us_each": device.result.cpuPerOperation,
                "failed": device.result.failed, "seconds": device.result.window,
            ]
            if let bound = loginBound {
                numbers["bound_per_second"] = bound.perSecond
                numbers["ratio_to_bound"] = boundRatio(device, bound)
                numbers["bound_failed"] = bound.failed
            }
            if let other = otherMode {
                numbers["other_mode"] = [
                    "sqlite_synchronous": other.synchronous.rawValue,
                    "logins_per_second": other.result.perSecond,
                    "ratio": other.ratio, "p99_ms": other.result.percentile(0.99),
                    "failed": other.result.failed,
                    "seconds": other.result.window,
                ]
            }
            verdicts.append(
                Verdict(
                    number: "1", id: "device_login",
                    title: "device-key logins/s / raw P-256 verifies/s (1 core)",
                    ratio: device.ratio, comparison: ">=", target: 0.5, stretch: 0.8, details: details,
                    numbers: numbers))
        }
        if let reads {
            let ratio = reads.health.perSecond > 0 ? reads.me.perSecond / reads.health.perSecond : 0
            verdicts.append(
                Verdict(
                    number: "2", id: "me_vs_healthz", title: "GET /v1/me per s / GET /healthz per s",
                    ratio: ratio,
                    comparison: ">=", target: 0.6, stretch: nil,
                    details: [
                        "/v1/me \(f(reads.me.perSecond, 0))/s (\(latency(reads.me)), \(failures(reads.me))); "
                            + "/healthz \(f(reads.health.perSecond, 0))/s (\(latency(reads.health)), "
                            + "\(failures(reads.health))); \(reads.clients) clients, same server"
                    ],
                    numbers: [
                        "me_per_second": reads.me.perSecond, "healthz_per_second": reads.health.perSecond,
                        "clients": reads.clients, "me_p99_ms": reads.me.percentile(0.99),
                        "healthz_p99_ms": reads.health.percentile(0.99),
                        "failed": reads.me.failed + reads.health.failed,
                    ]))
        }
        if let password = passwordLogins {
            let ratio = password.result.perSecond / password.ceiling
            verdicts.append(
                Verdict(
                    number: "3", id: "password_login",
                    title: "password logins/s / (cores / one Argon2id verify)",
                    ratio: ratio,
                    comparison: ">=", target: 0.8, stretch: nil,
                    details: [
                        "\(f(password.result.perSecond, 1)) logins/s with \(password.clients) clients; "
                            + "\(password.cores) cores / \(f(password.verifySeconds * 1000, 1)) ms = "
                            + "\(f(password.ceiling, 1))/s; \(latency(password.result)), \(failures(password.result))",
                        "for reference: Argon2id alone on all \(password.cores) cores at once gave "
                            + "\(f(password.allCoresHashes, 1))/s here, so the server reached "
                            + "\(f(password.result.perSecond / password.allCoresHashes, 2)) of what the hashing allows",
                    ],
                    numbers: [
                        "logins_per_second": password.result.perSecond,
                        "ceiling_per_second": password.ceiling,
                        "argon2id_verify_ms": password.verifySeconds * 1000, "cores": password.cores,
                        "clients": password.clients, "failed": password.result.failed,
                        "argon2id_all_cores_per_second": password.allCoresHashes,
                        "seconds": password.result.window,
                    ]))
        }
        if let memory {
            verdicts.append(
                Verdict(
                    number: "4a", id: "memory_idle",
                    title: "idle RSS with \(memory.sessions) sessions / 64 MiB",
                    ratio: memory.idleMiB / MemoryNumbers.idleBudgetMiB, comparison: "<=", target: 1,
                    stretch: nil,
                    details: [
                        "\(f(memory.idleMiB, 1)) MiB VmRSS of the whole bench process (server in-process; "
                            + "\(f(memory.beforeServerMiB, 1)) MiB before the server started)",
                        "sessions (one user, session, access and refresh token each) seeded through the server's "
                            + "storage in \(f(memory.seedSeconds, 1)) s; 100 seeded tokens checked with GET /v1/me",
                    ],
                    numbers: [
                        "idle_mib": memory.idleMiB, "before_server_mib": memory.beforeServerMiB,
                        "sessions": memory.sessions, "seed_seconds": memory.seedSeconds,
                    ]))
            verdicts.append(
                Verdict(
                    number: "4b", id: "memory_peak",
                    title: "RSS growth under 64 password logins / (hashing slots x Argon2 m)",
                    ratio: (memory.peakMiB - memory.idleMiB) / (memory.growthBudgetMiB / 2), comparison: "<=",
                    target: 2, stretch: nil,
                    details: [
                        "peak \(f(memory.peakMiB, 1)) MiB = idle + \(f(memory.peakMiB - memory.idleMiB, 1)) MiB; "
                            + "\(memory.hashingConcurrency) hashes at once x \(f(memory.argon2MiB, 0)) MiB "
                            + "(bounded = growth at most twice that)"
                    ],
                    numbers: [
                        "peak_mib": memory.peakMiB, "idle_mib": memory.idleMiB,
                        "hashing_concurrency": memory.hashingConcurrency, "argon2_mib": memory.argon2MiB,
                    ]))
        }
        if let growth {
            let small = growth.small.percentile(0.99)
            let large = growth.large.percentile(0.99)
            var details = [
                "p99 \(f(large, 2)) ms at \(growth.largeUsers) users vs \(f(small, 2)) ms at \(growth.smallUsers) users; "
                    + "\(f(growth.large.perSecond, 0)) vs \(f(growth.small.perSecond, 0)) logins/s, "
                    + "\(failures(growth.large))",
                "both at synchronous=\(growth.synchronous.rawValue), alternating rounds, \(f(growth.large.window, 1)) s "
                    + "each; users with a bound device each, seeded through the server's storage in \(f(growth.seedSeconds, 1)) s",
            ]
            let smallMedian = growth.small.percentile(0.5)
            let largeMedian = growth.large.percentile(0.5)
            details.append(
                "p50 \(f(largeMedian, 2)) vs \(f(smallMedian, 2)) ms (ratio \(f(smallMedian > 0 ? largeMedian / smallMedian : 0, 2))); "
                    + "p99 here is set by WAL checkpoint syncs, see the per-round lines on stderr")
            if growth.largeUsers < growth.wantedUsers {
                details.append(
                    "ONLY \(growth.largeUsers) of \(growth.wantedUsers) users: seeding hit its time bound")
            }
            verdicts.append(
                Verdict(
                    number: "5", id: "growth",
                    title: "device-login p99 at \(growth.largeUsers) users / at \(growth.smallUsers)",
                    ratio: small > 0 ? large / small : 0, comparison: "<=", target: 2, stretch: nil,
                    details: details,
                    numbers: [
                        "large_users": growth.largeUsers, "wanted_users": growth.wantedUsers,
                        "large_p50_ms": growth.large.percentile(0.5),
                        "small_p50_ms": growth.small.percentile(0.5),
                        "small_users": growth.smallUsers, "large_p99_ms": large, "small_p99_ms": small,
                        "large_logins_per_second": growth.large.perSecond, "seed_seconds": growth.seedSeconds,
                        "failed": growth.large.failed, "sqlite_synchronous": growth.synchronous.rawValue,
                    ]))
        }
        if let abuse {
            verdicts.append(
                Verdict(
                    number: "6", id: "login_timing",
                    title: "median unknown-user vs wrong-password login: |difference| / smaller",
                    ratio: abuse.loginDifference, comparison: "<=", target: 0.1, stretch: nil,
                    details: [
                        "unknown user \(f(abuse.unknownUserMedian, 2)) ms, wrong password "
                            + "\(f(abuse.wrongPasswordMedian, 2)) ms (medians of \(abuse.loginSamples) each, "
                            + "alternating on one connection; ratio \(f(abuse.unknownUserMedian / max(abuse.wrongPasswordMedian, 1e-9), 3))); "
                            + "\(abuse.loginFailures) not 401",
                        "default Argon2id and throttling; every attempt from its own address (X-Forwarded-For "
                            + "through --trusted-proxy 127.0.0.0/8), wrong passwords spread over 64 accounts: "
                            + "no limit is reached, every attempt runs the hash",
                    ],
                    numbers: [
                        "unknown_user_median_ms": abuse.unknownUserMedian,
                        "wrong_password_median_ms": abuse.wrongPasswordMedian, "samples": abuse.loginSamples,
                        "not_401": abuse.loginFailures,
                    ]))
        }
        if let housekeeping {
            let during = housekeeping.during
            verdicts.append(
                Verdict(
                    number: "7", id: "housekeeping",
                    title:
                        "longest housekeeping transaction, ms (first statement to commit: the most it holds the writer)",
                    ratio: housekeeping.longestBatchMilliseconds, comparison: "<=", target: 50, stretch: nil,
                    details: [
                        "the server's first purge at start, synchronous=full: \(housekeeping.rowsDeleted) rows "
                            + "(\(housekeeping.usedChallenges) used challenges, \(housekeeping.endedSessions) ended "
                            + "sessions with \(housekeeping.tokensPerSession) tokens each) in \(housekeeping.batches) "
                            + "transactions, \(f(housekeeping.purgeSeconds, 1)) s",
                        "refresh rotations meanwhile, one at a time: \(during.completed) "
                            + "(\(Self.spread(during)), \(failures(during))); for 2 s after it: "
                            + Self.spread(housekeeping.after),
                        "the rotations' longest waits are the writer's WAL checkpoints (every 4000 frames, "
                            + "which the purge's deletes fill quickly), not the purge's transactions",
                    ],
                    numbers: [
                        "rows_deleted": housekeeping.rowsDeleted, "batches": housekeeping.batches,
                        "longest_batch_ms": housekeeping.longestBatchMilliseconds,
                        "purge_seconds": housekeeping.purgeSeconds,
                        "rotations_during": during.completed, "rotations_failed": during.failed,
                        "rotation_p50_ms": during.percentile(0.5), "rotation_p99_ms": during.percentile(0.99),
                        "rotation_max_ms": Double(during.latencies.last ?? 0) / 1e6,
                    ]))
        }
        return verdicts + dpopVerdicts + webhookVerdicts + postgresVerdicts
    }

    /// The abuse section's lines (slow senders and the request deadline).
    var abuseLines: [String] {
        guard let abuse else { return [] }
        let base = abuse.baseline
        let attacked = abuse.underAttack
        let share = base.perSecond > 0 ? attacked.perSecond / base.perSecond : 0
        let lifetimes = abuse.trickleLifetimes
        let median = lifetimes.isEmpty ? 0 : lifetimes[lifetimes.count / 2]
        return [
            "  slow senders (default limits: 1024 connections, 64 per address, 30 s request deadline)",
            "       \(abuse.normalClients) normal clients from 127.0.0.1, GET /healthz: alone \(f(base.perSecond, 0))/s "
                + "(\(latency(base)), \(failures(base)))",
            "       while \(abuse.attackerSlots) slow senders from 127.0.0.2 trickle headers: \(f(attacked.perSecond, 0))/s "
                + "= \(f(share, 2)) of alone (\(latency(attacked)), \(failures(attacked)))",
            "       the server held \(abuse.attackerHeld) of the attacker's \(abuse.attackerSlots) connections; "
                + "\(abuse.attackerReconnects) cut connections were opened again",
            "  request deadline (--request-timeout 2, 16 requests trickled a byte per 200 ms)",
            "       cut after \(f(lifetimes.first ?? 0, 2)) to \(f(lifetimes.last ?? 0, 2)) s, median \(f(median, 2)) s",
        ]
    }

    var text: String {
        var lines = [
            "keybound-bench: \(Report.build) build, \(cores) cores, server in-process on 127.0.0.1",
            "client: \(Report.client)",
        ]
        // Not measured with --abuse.
        if raw.verifiesPerSecond > 0 {
            lines += [
                "",
                "raw costs (same run)",
                "  P-256 verify, one core (KeyboundCrypto P256PublicKey.isValidSignature): "
                    + "\(f(raw.verifiesPerSecond, 0))/s",
            ]
        }
        if let argon2 = raw.argon2 {
            lines.append(
                "  Argon2id verify, libsodium, m=\(argon2.parameters.memoryKiB) KiB t=\(argon2.parameters.iterations) "
                    + "p=1 (server default): \(f(argon2.seconds * 1000, 1)) ms (median of \(argon2.samples)); "
                    + "on all \(cores) cores at once: \(f(argon2.allCoresPerSecond, 1))/s")
        }
        lines += ["", "targets"]
        for verdict in verdicts {
            var result = verdict.pass ? "PASS" : "FAIL"
            if let stretch = verdict.stretch, let reached = verdict.stretchPass {
                result +=
                    reached
                    ? " (stretch \(f(stretch, 1)) reached)" : " (stretch \(f(stretch, 1)) not reached)"
            }
            lines.append(
                "  \(verdict.number). \(verdict.title): \(f(verdict.ratio, 3))  target \(verdict.comparison) "
                    + "\(f(verdict.target, 1))  \(result)")
            lines += verdict.details.map { "       " + $0 }
        }
        let information = information
        if !information.isEmpty {
            lines += ["", "measured without a target"]
            for item in information { lines += ["  \(item.title)", "       \(item.line)"] }
        }
        if let skipped = postgres?.skipped { lines += ["", "PostgreSQL figures skipped: \(skipped)"] }
        let abuseLines = abuseLines
        if !abuseLines.isEmpty { lines += ["", "abuse (issue 10, item 5)"] + abuseLines }
        let passed = verdicts.filter(\.pass).count
        lines += ["", "\(passed) of \(verdicts.count) targets pass; whole run \(f(totalSeconds, 1)) s"]
        return lines.joined(separator: "\n")
    }

    var json: String {
        var object: [String: Any] = [
            "build": Report.build, "cores": cores, "client": Report.client, "quick": options.quick,
            "concurrency": options.concurrency, "sqlite_synchronous": options.synchronous.rawValue,
            "total_seconds": totalSeconds,
            "raw": [
                "p256_verifies_per_second_one_core": raw.verifiesPerSecond,
                "argon2id_verify_ms": (raw.argon2?.seconds ?? 0) * 1000,
                "argon2id_memory_kib": raw.argon2?.parameters.memoryKiB ?? 0,
                "argon2id_iterations": raw.argon2?.parameters.iterations ?? 0,
                "argon2id_verifies_per_second_all_cores": raw.argon2?.allCoresPerSecond ?? 0,
            ],
        ]
        if let skipped = postgres?.skipped { object["postgres_skipped"] = skipped }
        if let abuse {
            object["abuse"] = [
                "normal_clients": abuse.normalClients, "alone_per_second": abuse.baseline.perSecond,
                "alone_p99_ms": abuse.baseline.percentile(0.99),
                "under_attack_per_second": abuse.underAttack.perSecond,
                "under_attack_p99_ms": abuse.underAttack.percentile(0.99),
                "under_attack_failed": abuse.underAttack.failed, "attacker_slots": abuse.attackerSlots,
                "attacker_held": abuse.attackerHeld, "attacker_reconnects": abuse.attackerReconnects,
                "trickle_lifetimes_s": abuse.trickleLifetimes,
            ]
        }
        object["information"] = information.map { ["title": $0.title, "numbers": $0.numbers] }
        object["targets"] = verdicts.map { verdict -> [String: Any] in
            var entry: [String: Any] = [
                "id": verdict.id, "number": verdict.number, "title": verdict.title, "ratio": verdict.ratio,
                "target": "\(verdict.comparison) \(verdict.target)", "pass": verdict.pass,
                "numbers": verdict.numbers,
                "details": verdict.details,
            ]
            if let stretch = verdict.stretch {
                entry["stretch"] = stretch
                entry["stretch_pass"] = verdict.stretchPass ?? false
            }
            return entry
        }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// `value` with `digits` decimals.
func f(_ value: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", value)
}
