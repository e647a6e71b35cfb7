import Foundation
import KeyboundWire

/// What the console's overview charts (docs/console.md): each a count per five-minute bucket.
struct TrafficSeries: Hashable, Sendable {
    /// Its name in the database and in `GET /admin/v1/overview`.
    let name: String

    /// A session opened by a login with `method` (password, device, passkey), or by an OAuth
    /// client's grant (`oauth`, whatever the user signed in with).
    static func login(_ method: String) -> TrafficSeries { TrafficSeries(name: "login." + method) }
    /// A login with `method` refused: a wrong password, a bad signature or assertion.
    static func failure(_ method: String) -> TrafficSeries { TrafficSeries(name: "failure." + method) }
    /// A login with `method` answered 429 because its account, device, passkey or address waits.
    static func throttled(_ method: String) -> TrafficSeries { TrafficSeries(name: "throttled." + method) }
    /// An approval its user confirmed on the device.
    static let approvalApproved = TrafficSeries(name: "approval.approved")
    /// An approval its user denied.
    static let approvalDenied = TrafficSeries(name: "approval.denied")
    /// A webhook delivery attempt that its endpoint did not acknowledge.
    static let webhookFailed = TrafficSeries(name: "webhook.failed")
}

/// The traffic one instance counted and has not written yet, by bucket and series. Counting is
/// in memory, after the commit of what is counted (``AfterCommit``); ``Application/flushTraffic()``
/// adds the counts to `traffic_counts` every ``Configuration/trafficFlushInterval`` and when the
/// server stops, so one row per bucket and series holds every instance's traffic, and a login
/// costs no write of its own.
final class TrafficCounters: Sendable {
    /// The width of a bucket, in seconds.
    static let bucketSeconds: Int64 = 300

    private struct Key: Hashable {
        let bucket: Int64
        let series: TrafficSeries
    }

    private let pending = Locked<[Key: Int64]>([:])

    /// The bucket `time` falls in: its start, in seconds since 1970.
    static func bucket(of time: Date) -> Int64 {
        let seconds = Int64(time.timeIntervalSince1970.rounded(.down))
        return seconds - ((seconds % bucketSeconds) + bucketSeconds) % bucketSeconds
    }

    /// Counts one `series` event at `time`, once the running write (if any) has committed.
    func count(_ series: TrafficSeries, at time: Date) {
        let key = Key(bucket: Self.bucket(of: time), series: series)
        AfterCommit.run { [pending] in pending.withLock { $0[key, default: 0] += 1 } }
    }

    /// Takes what was counted, leaving nothing.
    fileprivate func take() -> [(bucket: Int64, name: String, count: Int64)] {
        pending.withLock { pending in
            defer { pending = [:] }
            return pending.map { ($0.key.bucket, $0.key.series.name, $0.value) }
        }
    }

    /// Puts counts back that could not be written, to be written with the next flush.
    fileprivate func restore(_ counts: [(bucket: Int64, name: String, count: Int64)]) {
        pending.withLock { pending in
            for count in counts {
                pending[Key(bucket: count.bucket, series: TrafficSeries(name: count.name)), default: 0] +=
                    count.count
            }
        }
    }
}

extension Application {
    /// Adds what this instance counted (``TrafficCounters``) to the database's counts, in one
    /// write. When the database refuses, the counts wait for the next flush; none is lost
    /// while the process lives.
    func flushTraffic() {
        let counts = traffic.take()
        guard !counts.isEmpty else { return }
        do {
            try database.write { connection in
                for count in counts {
                    try connection.executeLater(
                        """
                        INSERT INTO traffic_counts (bucket, name, count) VALUES (?, ?, ?)
                        ON CONFLICT (bucket, name) DO UPDATE SET count = traffic_counts.count + excluded.count
                        """, [.integer(count.bucket), .text(count.name), .integer(count.count)])
                }
            }
        } catch {
            traffic.restore(counts)
            logger.log(.warning, "traffic counts not written", [("error", String(describing: error))])
        }
    }

    /// The counts of every series in the buckets from `start` (a bucket's start) on, as the
    /// database holds them, with the approvals that expired in each bucket (those are read from the
    /// approvals themselves: an approval expires when nobody acts on it).
    func trafficCounts(since start: Int64, _ connection: any SQLConnection) throws -> [String: [Int64: Int64]]
    {
        var series: [String: [Int64: Int64]] = [:]
        for row in try connection.query(
            "SELECT bucket, name, count FROM traffic_counts WHERE bucket >= ?", [.integer(start)])
        {
            series[try row.text(1), default: [:]][try row.integer(0)] = try row.integer(2)
        }
        let now = clock.nowToTheMillisecond
        for row in try connection.query(
            "SELECT expires_at FROM approvals WHERE status = ? AND expires_at >= ? AND expires_at <= ?",
            [.text(ApprovalStatus.pending.rawValue), .integer(start * 1000), .date(now)])
        {
            let bucket = TrafficCounters.bucket(of: Date(milliseconds: try row.integer(0)))
            series["approval.expired", default: [:]][bucket, default: 0] += 1
        }
        return series
    }
}
