import Foundation

/// The source of the current time, injected so expiry and throttling can be tested.
public struct ServerClock: Sendable {
    private let read: @Sendable () -> Date

    /// - Parameter now: returns the current time.
    public init(now: @escaping @Sendable () -> Date) { read = now }

    /// The current time.
    public var now: Date { read() }

    /// The system clock.
    public static let system = ServerClock { Date() }

    /// Milliseconds since 1970, the unit stored in the database.
    var nowMilliseconds: Int64 { Int64((now.timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// A clock for tests that only moves when told to.
public final class ManualClock: Sendable {
    private let current: Locked<Date>

    /// - Parameter start: the initial time (default: now, truncated to whole seconds).
    public init(start: Date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))) {
        current = Locked(start)
    }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }

    /// The current time of this clock.
    public var now: Date { current.withLock { $0 } }

    /// A ``ServerClock`` reading this clock.
    public var clock: ServerClock { ServerClock { [current] in current.withLock { $0 } } }
}
