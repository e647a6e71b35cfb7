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

    /// The current time to the millisecond, the database's precision (cut toward the past): a
    /// time a request stores reads back the same.
    var nowToTheMillisecond: Date {
        Date(milliseconds: Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))
    }
}

extension Date {
    /// This time plus a whole number of seconds (a lifetime, a delay of the configuration),
    /// computed on whole milliseconds: two times the server derives this way compare exactly as
    /// the numbers the database keeps for them.
    func adding(seconds: Int) -> Date { Date(milliseconds: milliseconds + Int64(seconds) * 1000) }

    /// This time without its fraction of a second (toward the past): payloads and challenges
    /// expire on a whole second.
    var wholeSeconds: Date { Date(milliseconds: milliseconds / 1000 * 1000) }

    /// Whole seconds from `earlier` to this time, rounded up (a `Retry-After`).
    func seconds(after earlier: Date) -> Int64 { (milliseconds - earlier.milliseconds + 999) / 1000 }
}
