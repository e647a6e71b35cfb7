/// A request or payload that does not match the wire format. Its `code` is the stable problem
/// code the server answers with (`invalid_request`, `unknown_member`).
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stable codes a wire error can carry.
    public enum Code: String, Sendable {
        /// Malformed JSON, a missing member, a wrong type or a value outside its grammar.
        case invalidRequest = "invalid_request"
        /// A member the message does not define.
        case unknownMember = "unknown_member"
    }

    /// The stable problem code.
    public let code: Code
    /// What was wrong, for a human; never contains a secret value.
    public let detail: String

    /// An error with a stable code and a detail for humans.
    ///
    /// - Parameters:
    ///   - code: the stable problem code.
    ///   - detail: what was wrong.
    public init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// `WireError.<code>: <detail>`, e.g. `WireError.unknown_member: unknown member "extra"`.
    public var description: String { "WireError.\(code.rawValue): \(detail)" }
}

#if canImport(Synchronization)
    /// What KeyboundWire's functions throw: always a ``WireError``, typed wherever the Swift
    /// runtime supports typed throws.
    public typealias WireFailure = WireError
#else
    /// What KeyboundWire's functions throw: always a ``WireError``, but untyped here.
    ///
    /// Only SDKs with a Swift 5.9 runtime get here (iOS 17 / macOS 14, as `apple-sdk-check` uses;
    /// they lack the Swift 6 `Synchronization` module). A typed `throw` makes the compiler call
    /// the Swift 6 runtime's `_willThrowTyped`, which those SDKs do not have; Swift 6.3 then
    /// crashes (SILGen `emitThrow`). The values thrown are the same.
    public typealias WireFailure = any Error
#endif
