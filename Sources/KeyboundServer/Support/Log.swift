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
            let redact = Self.redactedFields.contains(name.lowercased())
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
    var jsonValue: JSONValue { .number(String(format: "%.3f", self)) }
}

extension Optional: JSONValueConvertible where Wrapped: JSONValueConvertible {
    var jsonValue: JSONValue { map(\.jsonValue) ?? .null }
}
