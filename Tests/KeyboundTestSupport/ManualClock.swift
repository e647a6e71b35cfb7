import Foundation
import Keybound
import KeyboundServer

/// A clock that only moves when a test says so. One value drives both sides: the SDK and the
/// emulator read ``clock``, the server reads ``serverClock``, so "16 minutes later" is 16 minutes
/// later for the app and for the server alike.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    /// - Parameter start: the initial time (default: now, truncated to whole seconds, as the
    ///   wire's timestamps are).
    public init(start: Date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))) {
        current = Mutex(start)
    }

    /// The current time of this clock.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }

    /// This clock for the SDK and the emulator.
    public var clock: Keybound.Clock { Keybound.Clock { [current] in current.withLock { $0 } } }

    /// This clock for the server (``Configuration/clock``).
    public var serverClock: ServerClock { ServerClock { [current] in current.withLock { $0 } } }
}
