import Foundation
import KeyboundWire

/// The keys of the rows in `throttles`, one format each. Who can block whom with them is in
/// docs/server.md, "Throttling: who can block whom, and for how long".
enum ThrottleScope {
    /// Failed logins of any kind from one client address (IPv6: its /64).
    static func address(_ client: ClientAddress) -> String { "address:" + client.throttleKey }
    /// Consecutive failed password logins on one account from one client address.
    static func accountAddress(_ username: String, _ client: ClientAddress) -> String {
        "account-address:\(username) \(client.throttleKey)"
    }
    /// Consecutive failed password logins on one account from all addresses (the ceiling).
    static func account(_ username: String) -> String { "account:" + username }
    /// Consecutive bad signatures for one device.
    static func device(_ deviceID: String) -> String { "device:" + deviceID }
    /// Sign-up attempts from one client address in the current hour.
    static func signUp(_ client: ClientAddress) -> String { "signup:" + client.throttleKey }
}

/// One row of `throttles`: consecutive (or windowed) failures, the end of the current block
/// (``unblocked`` or past: none), and when it was last counted.
struct ThrottleRow: Equatable {
    /// The end of no block: the database's 0.
    static let unblocked = Date(milliseconds: 0)

    let failures: Int64
    let blockedUntil: Date
    let updatedAt: Date
}

extension ThrottleRow: SQLRecord {
    static let columns = "failures, blocked_until, updated_at"

    init(row: inout SQLRowReader) throws {
        self.init(failures: try row.integer(), blockedUntil: try row.date(), updatedAt: try row.date())
    }
}

/// One scope's throttle row as ``Application/countFailure(_:scope:limit:window:now:)`` found and
/// left it.
struct ThrottleCount {
    let scope: String
    let before: ThrottleRow?
    let after: ThrottleRow

    /// Whether this count started a block (the scope was not blocked before it).
    var startedBlock: Bool {
        after.blockedUntil > after.updatedAt
            && (before?.blockedUntil ?? ThrottleRow.unblocked) <= after.updatedAt
    }
}

/// A block that refused an attempt inside a write transaction (nothing was written).
struct Blocked: Error {
    let until: Date
}

extension Application {
    /// Failures from one client address older than this many seconds (15 minutes) are forgotten.
    static let addressFailureWindow = 15 * 60
    /// The sign-up limit counts per hour (in seconds).
    static let signUpWindow = 3600

    func throttleRow(_ connection: any SQLConnection, _ scope: String) throws -> ThrottleRow? {
        try connection.queryOne(
            ThrottleRow.self, "SELECT \(ThrottleRow.columns) FROM throttles WHERE scope = ?", [.text(scope)])
    }

    /// The latest end of a block on any of `scopes`, or nil when none is blocked at `now`.
    func blockEnd(_ connection: any SQLConnection, scopes: [String], now: Date) throws -> Date? {
        let ends = try scopes.map { try throttleRow(connection, $0)?.blockedUntil ?? ThrottleRow.unblocked }
        guard let latest = ends.max(), latest > now else { return nil }
        return latest
    }

    /// Counts a throttled login in the metrics (it writes nothing) and returns the 429.
    func refuseThrottled(method: AuthMethod, _ context: RequestContext, blockedUntil: Date) -> APIError {
        metrics.recordLogin(method: method.rawValue, outcome: "throttled")
        traffic.count(.throttled(method.rawValue), at: context.now)
        return APIError.throttled(retryAfter: blockedUntil.seconds(after: context.now))
    }

    /// Counts one more consecutive failure for `scope`; from `limit` on, blocks it with a delay
    /// that doubles with every further failure, up to the maximum. With a `window`, failures older
    /// than it are forgotten.
    func countFailure(
        _ connection: any SQLConnection, scope: String, limit: Int, window: Int?, now: Date
    ) throws -> ThrottleCount {
        let before = try throttleRow(connection, scope)
        var failures = before?.failures ?? 0
        // The quiet period that forgets failures starts when the last block ends, not at the last
        // failure: otherwise a block longer than the window would reset the count, and the delay
        // would never grow past it.
        if let window, let before, now > max(before.updatedAt, before.blockedUntil).adding(seconds: window) {
            failures = 0
        }
        failures += 1
        var blockedUntil = ThrottleRow.unblocked
        if failures >= Int64(limit) {
            let doublings = min(failures - Int64(limit), 20)
            let delay = min(configuration.lockoutBaseDelay << doublings, configuration.lockoutMaximumDelay)
            blockedUntil = now.adding(seconds: delay)
        }
        let after = ThrottleRow(failures: failures, blockedUntil: blockedUntil, updatedAt: now)
        try store(connection, scope: scope, after, replacing: before)
        return ThrottleCount(scope: scope, before: before, after: after)
    }

    /// Takes back a failure counted by ``countFailure(_:scope:limit:window:now:)`` for an attempt
    /// that succeeded. When no other attempt has counted on the scope since, the row is put back
    /// exactly as it was (so a success neither adds to the count, nor starts a block, nor keeps
    /// old failures fresh); otherwise only this attempt's failure is taken off.
    func withdraw(_ connection: any SQLConnection, _ count: ThrottleCount) throws {
        let untouched = "scope = ? AND failures = ? AND blocked_until = ? AND updated_at = ?"
        let key: [SQLValue] = [
            .text(count.scope), .integer(count.after.failures), .date(count.after.blockedUntil),
            .date(count.after.updatedAt),
        ]
        let restored: Int
        if let before = count.before {
            restored = try connection.execute(
                "UPDATE throttles SET failures = ?, blocked_until = ?, updated_at = ? WHERE " + untouched,
                [.integer(before.failures), .date(before.blockedUntil), .date(before.updatedAt)] + key)
        } else {
            restored = try connection.execute("DELETE FROM throttles WHERE " + untouched, key)
        }
        if restored == 0 {
            try connection.execute(
                "UPDATE throttles SET failures = failures - 1 WHERE scope = ? AND failures > 0",
                [.text(count.scope)])
        }
    }

    /// Forgets a scope's count: the right password, a valid signature.
    func clearThrottle(_ connection: any SQLConnection, _ scope: String) throws {
        try connection.executeLater("DELETE FROM throttles WHERE scope = ?", [.text(scope)])
    }

    /// Counts a sign-up attempt from the request's client address against
    /// ``Configuration/signupLimit`` per hour, before its password is hashed, so parallel
    /// requests get no more than the limit. Every attempt that passes counts, whether the name
    /// then turns out free (201) or taken (409): that bounds how fast one address can probe
    /// which usernames exist. Passkey sign-up counts here too.
    /// - Throws: ``APIError`` 429 when the address has used up its hour (nothing is written then).
    func claimSignUp(_ context: RequestContext) throws {
        let limit = Int64(configuration.signupLimit)
        guard limit > 0 else { return }
        let scope = ThrottleScope.signUp(context.clientAddress)
        func refusal(_ until: Date) -> APIError {
            APIError.throttled(
                retryAfter: until.seconds(after: context.now),
                detail: "Too many sign-ups from this address. Try again later.")
        }
        // Refused from a read: a flood of refused sign-ups costs no commit.
        if let until = try database.read({ try blockEnd($0, scopes: [scope], now: context.now) }) {
            throw refusal(until)
        }
        do {
            try database.write { connection in
                let before = try throttleRow(connection, scope)
                if let before, before.blockedUntil > context.now { throw Blocked(until: before.blockedUntil) }
                // `updated_at` holds the start of the hour being counted.
                let current = before.flatMap {
                    context.now < $0.updatedAt.adding(seconds: Self.signUpWindow) ? $0 : nil
                }
                let count = (current?.failures ?? 0) + 1
                let start = current?.updatedAt ?? context.now
                let after = ThrottleRow(
                    failures: count,
                    blockedUntil: count >= limit
                        ? start.adding(seconds: Self.signUpWindow) : ThrottleRow.unblocked,
                    updatedAt: start)
                try store(connection, scope: scope, after, replacing: before)
            }
        } catch let blocked as Blocked {
            throw refusal(blocked.until)
        }
    }

    private func store(
        _ connection: any SQLConnection, scope: String, _ row: ThrottleRow, replacing before: ThrottleRow?
    ) throws {
        let values: [SQLValue] = [.integer(row.failures), .date(row.blockedUntil), .date(row.updatedAt)]
        if before == nil {
            try connection.execute(
                "INSERT INTO throttles (failures, blocked_until, updated_at, scope) VALUES (?, ?, ?, ?)",
                values + [.text(scope)])
        } else {
            try connection.execute(
                "UPDATE throttles SET failures = ?, blocked_until = ?, updated_at = ? WHERE scope = ?",
                values + [.text(scope)])
        }
    }
}
