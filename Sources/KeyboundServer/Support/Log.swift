import Dispatch
import Foundation
import KeyboundWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the server's JSON-lines log goes.
public struct LogSink: Sendable {
    private let write: @Sendable (String) -> Void
    private let waitForPending: @Sendable (DispatchTime) -> Void
    /// Whether lines are thrown away unread (``discard``): then none is formatted.
    let discards: Bool

    /// - Parameter write: receives one complete JSON line (without the newline). It is called on
    ///   the thread that handles a request: it must not block.
    public init(_ write: @escaping @Sendable (String) -> Void) {
        self.init(write: write, waitForPending: { _ in }, discards: false)
    }

    private init(
        write: @escaping @Sendable (String) -> Void,
        waitForPending: @escaping @Sendable (DispatchTime) -> Void, discards: Bool
    ) {
        self.write = write
        self.waitForPending = waitForPending
        self.discards = discards
    }

    /// Standard error, one JSON object per line. Logging never blocks or crashes a request:
    /// lines are queued for one writer that uses `write(2)` and ignores its errors, and while
    /// standard error does not drain (a full pipe or disk, a closed pipe), lines beyond the
    /// 4096 already queued are dropped.
    public static let standardError: LogSink = {
        let writer = DescriptorWriter(descriptor: STDERR_FILENO, capacity: 4096)
        return LogSink(write: writer.enqueue, waitForPending: writer.wait, discards: false)
    }()

    /// Discards everything.
    public static let discard = LogSink(write: { _ in }, waitForPending: { _ in }, discards: true)

    func emit(_ line: String) { write(line) }

    /// Waits until the lines logged so far are written, at most `timeout` seconds.
    func flush(timeout: TimeInterval = 1) {
        waitForPending(.now() + timeout)
    }
}

/// Writes lines to a file descriptor from one background queue, in order, so that a slow, full
/// or closed descriptor never holds up or crashes the thread that logs.
private final class DescriptorWriter: Sendable {
    private let descriptor: Int32
    private let capacity: Int
    private let queue = DispatchQueue(label: "keybound.log")
    /// Lines queued and not yet written.
    private let pending = Locked(0)

    init(descriptor: Int32, capacity: Int) {
        self.descriptor = descriptor
        self.capacity = capacity
    }

    func enqueue(_ line: String) {
        let accepted = pending.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
        // The descriptor has not drained the queue: drop the line rather than wait.
        guard accepted else { return }
        let bytes = Array((line + "\n").utf8)
        queue.async { [self] in
            Self.writeAll(bytes, to: descriptor)
            pending.withLock { $0 -= 1 }
        }
    }

    func wait(until deadline: DispatchTime) {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        _ = done.wait(timeout: deadline)
    }

    /// Writes all bytes, or stops at the first error (EPIPE, ENOSPC, …): a log line is not worth more.
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, base + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}

/// A JSON-lines logger. Field names that can carry secrets are always redacted.
struct Logger: Sendable {
    /// Field names whose values are never written.
    static let redactedFields: Set<String> = [
        "password", "token", "access_token", "refresh_token", "authorization", "signature", "secret",
        "cookie", "payload", "challenge",
    ]

    let sink: LogSink
    let clock: ServerClock

    enum Level: String {
        case info
        case warning
        case error
    }

    /// Writes one line. `fields` is not even built when the sink discards: a device login logs
    /// three lines (two requests, one audit event), not worth formatting for nobody.
    func log(
        _ level: Level, _ message: String, _ fields: @autoclosure () -> [(String, JSONValueConvertible)] = []
    ) {
        guard !sink.discards else { return }
        var object: [JSONMember] = [
            JSONMember("time", .string(Timestamp.format(clock.now))),
            JSONMember("level", .string(level.rawValue)),
            JSONMember("msg", .string(message)),
        ]
        for (name, value) in fields() {
            // Field names are lower-case literals almost always: lowercase only when needed.
            let hasUpperCase = name.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
            let redact = Self.redactedFields.contains(hasUpperCase ? name.lowercased() : name)
            object.append(JSONMember(name, redact ? .string("[redacted]") : value.jsonValue))
        }
        sink.emit(String(decoding: JSON.serialize(.object(object)), as: UTF8.self))
    }
}

/// Values a log field can hold.
protocol JSONValueConvertible: Sendable {
    var jsonValue: JSONValue { get }
}

extension String: JSONValueConvertible {
    var jsonValue: JSONValue { .string(self) }
}

extension Int: JSONValueConvertible {
    var jsonValue: JSONValue { .integer(self) }
}

extension Double: JSONValueConvertible {
    /// Three decimals (durations in milliseconds), written without `String(format:)`, which costs
    /// more than the rest of a log line on Linux.
    var jsonValue: JSONValue {
        guard isFinite, magnitude < 1e15 else { return .null }
        let thousandths = Int64((magnitude * 1000).rounded())
        let fraction = String(thousandths % 1000)
        let digits = String(repeating: "0", count: 3 - fraction.count) + fraction
        return .number((sign == .minus && thousandths > 0 ? "-" : "") + "\(thousandths / 1000).\(digits)")
    }
}

extension Optional: JSONValueConvertible where Wrapped: JSONValueConvertible {
    var jsonValue: JSONValue { map(\.jsonValue) ?? .null }
}
