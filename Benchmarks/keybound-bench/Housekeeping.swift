import Foundation
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

/// What the housekeeping section measured (issue 21, item 1): the server's own first purge of a
/// database where expired rows piled up, and refresh-token rotations sent meanwhile.
struct HousekeepingNumbers {
    var usedChallenges = 0
    var endedSessions = 0
    var tokensPerSession = 0
    /// From the server's `housekeeping` log line.
    var rowsDeleted = 0
    var batches = 0
    var longestBatchMilliseconds = 0.0
    var purgeSeconds = 0.0
    /// Refresh rotations, one after another on one connection, while the purge ran, and for 2 s
    /// after it.
    var during = LoadResult()
    var after = LoadResult()
}

extension Benchmark {
    /// Seeds expired rows (the review's stand-in: 1.25M used challenges, and ended sessions with
    /// their tokens), starts a server on them at `synchronous=full` (its first housekeeping run
    /// starts with it), and rotates one session's refresh token in a loop until the run's log line
    /// says it finished. The longest purge transaction is the most any write waited behind one.
    func measureHousekeeping() throws {
        var numbers = HousekeepingNumbers()
        numbers.usedChallenges = options.quick ? 250_000 : 1_250_000
        numbers.endedSessions = options.quick ? 20_000 : 100_000
        numbers.tokensPerSession = 4
        progress(
            "housekeeping: seeding \(numbers.usedChallenges) used challenges and \(numbers.endedSessions) "
                + "ended sessions with \(numbers.tokensPerSession) tokens each")
        let finished = Shared<String?>(nil)
        var configuration = configuration("housekeeping", synchronous: .full)
        configuration.log = LogSink { line in
            if line.contains(#""msg":"housekeeping""#) { finished.withLock { $0 = line } }
        }
        let path = String(configuration.databaseURL.dropFirst("sqlite:".count))
        try Seed.createSchema(path: path)
        let refreshToken = try Seed.expiredRows(
            path: path, usedChallenges: numbers.usedChallenges, endedSessions: numbers.endedSessions,
            tokensPerSession: numbers.tokensPerSession)
        let started = nanoseconds()
        let (server, port) = try start(configuration)
        defer { server.stop() }
        progress("housekeeping: the server's first purge, refresh rotations meanwhile")
        let worker = RefreshWorker(connection: try HTTPConnection(port: port), refreshToken: refreshToken)
        /// Rotations one after another until `done` says stop.
        func rotations(until done: () -> Bool) throws -> LoadResult {
            var result = LoadResult()
            let start = nanoseconds()
            while !done() {
                let sent = nanoseconds()
                if try worker.step() {
                    result.completed += 1
                    result.latencies.append(nanoseconds() - sent)
                } else {
                    result.failed += 1
                }
            }
            result.window = seconds(since: start)
            result.latencies.sort()
            return result
        }
        numbers.during = try rotations { finished.withLock { $0 } != nil || seconds(since: started) > 300 }
        numbers.purgeSeconds = seconds(since: started)
        let quiet = nanoseconds()
        numbers.after = try rotations { seconds(since: quiet) > 2 }
        guard let line = finished.withLock({ $0 }),
            case .object(let members) = try JSON.parse(Data(line.utf8))
        else { throw HTTPClientError(description: "the server logged no housekeeping run within 300 s") }
        func number(_ name: String) -> Double {
            guard case .number(let value)? = members.first(where: { $0.name == name })?.value else {
                return -1
            }
            return Double(value) ?? -1
        }
        numbers.rowsDeleted = Int(number("rows_deleted"))
        numbers.batches = Int(number("batches"))
        numbers.longestBatchMilliseconds = number("longest_batch_ms")
        report.housekeeping = numbers
    }
}

extension Seed {
    /// Inserts `usedChallenges` used challenges that expired two hours ago, `endedSessions`
    /// sessions that ended a year ago with `tokensPerSession` unexpired tokens each, and one live
    /// session, whose refresh token it returns.
    static func expiredRows(path: String, usedChallenges: Int, endedSessions: Int, tokensPerSession: Int)
        throws -> String
    {
        var generator = FastRandom()
        let now = seedTime()
        let database = try SQLiteDatabase(path: path, readers: 1, synchronous: .normal)
        let userID = randomIdentifier("usr", using: &generator)
        let refreshToken = Base64URL.encode(Data(randomBytes(32, using: &generator)))
        try database.write { connection in
            try Rows.insertUser(connection, id: userID, username: "probe", passwordHash: "", createdAt: now)
            let sessionID = randomIdentifier("ses", using: &generator)
            try Rows.insertSession(
                connection, id: sessionID, userID: userID, clientID: "probe", deviceID: nil,
                method: .password,
                createdAt: now)
            try Rows.insertToken(
                connection, refreshToken, kind: .refresh, sessionID: sessionID,
                expiresAt: now.addingTimeInterval(86_400))
        }
        for start in stride(from: 0, to: usedChallenges, by: batch) {
            try database.write { connection in
                for index in start..<min(usedChallenges, start + batch) {
                    try connection.execute(
                        "INSERT INTO used_challenges (id, expires_at) VALUES (?, ?)",
                        [.text("chl_seed\(index)"), .date(now.addingTimeInterval(-7200))])
                }
            }
        }
        let sessionIDs = sortedIdentifiers("ses", count: endedSessions, using: &generator)
        for start in stride(from: 0, to: endedSessions, by: batch / tokensPerSession) {
            try database.write { connection in
                for index in start..<min(endedSessions, start + batch / tokensPerSession) {
                    try Rows.insertSession(
                        connection, id: sessionIDs[index], userID: userID, clientID: "old", deviceID: nil,
                        method: .password, createdAt: now.addingTimeInterval(-400 * 86_400))
                    try connection.execute(
                        "UPDATE sessions SET revoked_at = ? WHERE id = ?",
                        [.date(now.addingTimeInterval(-365 * 86_400)), .text(sessionIDs[index])])
                    for _ in 0..<tokensPerSession {
                        try Rows.insertToken(
                            connection, Base64URL.encode(Data(randomBytes(32, using: &generator))),
                            kind: .refresh,
                            sessionID: sessionIDs[index], expiresAt: now.addingTimeInterval(86_400))
                    }
                }
            }
        }
        sync()
        return refreshToken
    }
}
