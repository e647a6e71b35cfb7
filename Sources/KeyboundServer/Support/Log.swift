import Foundation
import KeyboundWire

/// Where the server's JSON-lines log goes.
public struct LogSink: Sendable {
    private let write: @Sendable (String) -> Void

    /// - Parameter write: receives one complete JSON line (without the newline).
    public init(_ write: @escaping @Sendable (String) -> Void) { self.write = write }

    /// Standard error, one JSON object per line.
    public static let standardError = LogSink { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Discards everything.
    public static let discard = LogSink { _ in }

    func emit(_ line: String) { write(line) }
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

    func log(_ level: Level, _ message: String, _ fields: [(String, JSONValueConvertible)] = []) {
        var object: [JSONMember] = [
            JSONMember("time", .string(Timestamp.format(clock.now))),
            JSONMember("level", .string(level.rawValue)),
            JSONMember("msg", .string(message)),
        ]
        for (name, value) in fields {
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
