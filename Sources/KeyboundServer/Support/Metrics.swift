import Foundation

/// Prometheus counters and a latency histogram, rendered in the text exposition format.
final class Metrics: Sendable {
    static let latencyBuckets: [Double] = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
    ]

    private struct Histogram {
        var buckets = [Int](repeating: 0, count: Metrics.latencyBuckets.count)
        var count = 0
        var sum = 0.0
    }

    private struct State {
        var requests: [String: [Int: Int]] = [:]  // route → status → count
        var latency: [String: Histogram] = [:]  // route → histogram
        var logins: [String: [String: Int]] = [:]  // method → outcome → count
    }

    private let state = Locked(State())

    func recordRequest(route: String, status: Int, seconds: Double) {
        state.withLock { state in
            state.requests[route, default: [:]][status, default: 0] += 1
            var histogram = state.latency[route] ?? Histogram()
            for (index, bound) in Self.latencyBuckets.enumerated() where seconds <= bound {
                histogram.buckets[index] += 1
            }
            histogram.count += 1
            histogram.sum += seconds
            state.latency[route] = histogram
        }
    }

    /// `method`: password, device, refresh. `outcome`: success, failure, throttled. Inside a
    /// write transaction the count waits for its commit (``AfterCommit``).
    func recordLogin(method: String, outcome: String) {
        AfterCommit.run { [state] in
            state.withLock { $0.logins[method, default: [:]][outcome, default: 0] += 1 }
        }
    }

    func render() -> String {
        let snapshot = state.withLock { $0 }
        func label(_ text: String) -> String {
            text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n")
        }
        var out = "# HELP keybound_http_requests_total HTTP requests by route and status.\n"
        out += "# TYPE keybound_http_requests_total counter\n"
        for route in snapshot.requests.keys.sorted() {
            for (status, count) in (snapshot.requests[route] ?? [:]).sorted(by: { $0.key < $1.key }) {
                out +=
                    "keybound_http_requests_total{route=\"\(label(route))\",status=\"\(status)\"} \(count)\n"
            }
        }
        out += "# HELP keybound_http_request_duration_seconds Request latency by route.\n"
        out += "# TYPE keybound_http_request_duration_seconds histogram\n"
        for route in snapshot.latency.keys.sorted() {
            guard let histogram = snapshot.latency[route] else { continue }
            let name = "keybound_http_request_duration_seconds"
            for (index, bound) in Self.latencyBuckets.enumerated() {
                out +=
                    "\(name)_bucket{route=\"\(label(route))\",le=\"\(bound)\"} \(histogram.buckets[index])\n"
            }
            out += "\(name)_bucket{route=\"\(label(route))\",le=\"+Inf\"} \(histogram.count)\n"
            out += "\(name)_sum{route=\"\(label(route))\"} \(histogram.sum)\n"
            out += "\(name)_count{route=\"\(label(route))\"} \(histogram.count)\n"
        }
        out += "# HELP keybound_logins_total Login attempts by method and outcome.\n"
        out += "# TYPE keybound_logins_total counter\n"
        for method in snapshot.logins.keys.sorted() {
            for (outcome, count) in (snapshot.logins[method] ?? [:]).sorted(by: { $0.key < $1.key }) {
                out +=
                    "keybound_logins_total{method=\"\(label(method))\",outcome=\"\(label(outcome))\"} \(count)\n"
            }
        }
        return out
    }
}
