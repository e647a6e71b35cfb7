import Foundation

/// When ``KeyboundClient`` sends a request again by itself: after a lost connection, a `503`
/// (the server or its database is briefly unavailable, as in a failover), or a `409
/// idempotency_key_in_flight` (the first attempt is still running on the server).
///
/// Only requests that are safe to send twice are sent again: `GET`s, and `POST`s, which the
/// client sends with an `Idempotency-Key` (a new one per call, the same one on every attempt of
/// it). The server keeps a POST's answer in the transaction of its change, so an attempt whose
/// answer was lost (the change committed, the connection dropped) is answered with that same
/// answer: a retried sign-up creates one account, a retried login opens one session, with the
/// same tokens. `DELETE`s are not sent again: a second one could find nothing to delete and say
/// so. A 429 is never retried here; it reaches the app as `throttled`, with its `Retry-After`.
///
/// ```swift
/// let client = KeyboundClient(baseURL: url, retryPolicy: RetryPolicy(attempts: 6))
/// ```
public struct RetryPolicy: Sendable, Hashable {
    /// How many times a request is sent at most, the first time included; 1 never retries.
    public var attempts: Int
    /// The wait before the first retry, in seconds; it doubles with each retry (each wait a
    /// random 0.5 to 1.5 times that, so that clients that failed together do not come back
    /// together).
    public var initialDelay: TimeInterval
    /// The longest wait before a retry, in seconds. A server that asks for a longer one
    /// (`Retry-After`) gets no retry: its answer goes to the app.
    public var maximumDelay: TimeInterval

    /// - Parameters:
    ///   - attempts: at most this many sends of one request (at least 1).
    ///   - initialDelay: seconds before the first retry.
    ///   - maximumDelay: the longest wait before a retry, in seconds.
    public init(attempts: Int = 4, initialDelay: TimeInterval = 0.25, maximumDelay: TimeInterval = 8) {
        self.attempts = max(1, attempts)
        self.initialDelay = max(0, initialDelay)
        self.maximumDelay = max(0, maximumDelay)
    }

    /// Four sends at most, from a quarter of a second apart, waiting at most 8 s.
    public static let standard = RetryPolicy()
    /// Every request is sent once.
    public static let never = RetryPolicy(attempts: 1)

    /// The wait before retry number `retry` (1 for the first), or nil for none: no retries
    /// left, or the server asked for a wait longer than ``maximumDelay``.
    func delay(beforeRetry retry: Int, retryAfter: TimeInterval?) -> TimeInterval? {
        guard retry < attempts else { return nil }
        let backoff =
            min(maximumDelay, initialDelay * pow(2, Double(retry - 1))) * Double.random(in: 0.5...1.5)
        guard let retryAfter else { return backoff }
        return retryAfter <= maximumDelay ? max(retryAfter, backoff) : nil
    }

    /// Whether a send that failed with `error` may have lost its answer on the way, and is worth
    /// sending again: the connection was lost or timed out, or the server could not be reached.
    static func isTransient(_ error: any Error) -> Bool {
        guard let error = error as? URLError else { return false }
        return [.networkConnectionLost, .timedOut, .cannotConnectToHost, .notConnectedToInternet]
            .contains(error.code)
    }
}
