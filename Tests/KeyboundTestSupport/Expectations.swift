import Keybound
import Testing

/// Runs `body`, which must fail with a ``KeyboundError`` of `code` (any code when nil) and,
/// when given, that recovery and server problem code. Records an issue otherwise.
/// - Returns: the error, for further checks (its native code, its message); nil when `body`
///   did not throw a `KeyboundError`.
@discardableResult
public func expectKeyboundError<Result>(
    _ code: KeyboundError.Code? = nil, recovery: KeyboundError.Recovery? = nil,
    serverCode: ProblemCode? = nil,
    _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Result
) async -> KeyboundError? {
    let caught: KeyboundError
    do {
        let result = try await body()
        Issue.record(
            "expected \(code.map { "\($0)" } ?? "a KeyboundError"), got success: \(result). \(comment?.rawValue ?? "")",
            sourceLocation: sourceLocation)
        return nil
    } catch let error as KeyboundError {
        caught = error
    } catch {
        Issue.record(
            "expected KeyboundError \(code.map { "\($0)" } ?? ""), got \(type(of: error)): \(error). \(comment?.rawValue ?? "")",
            sourceLocation: sourceLocation)
        return nil
    }
    if let code {
        #expect(caught.code == code, "\(caught). \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
    }
    if let recovery {
        #expect(caught.recovery == recovery, "\(caught)", sourceLocation: sourceLocation)
    }
    if let serverCode {
        #expect(caught.serverCode == serverCode, "\(caught)", sourceLocation: sourceLocation)
    }
    return caught
}
