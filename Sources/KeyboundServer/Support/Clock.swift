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
