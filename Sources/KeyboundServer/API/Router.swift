import Foundation
import KeyboundWire

/// What a handler receives.
struct RequestContext {
    let request: HTTPRequest
    /// Path parameters by name (`{id}` → `id`).
    let parameters: [String: String]
    /// The current time of this request, in milliseconds since 1970.
    let now: Int64
    /// The client: the TCP peer, or the forwarded client behind a trusted proxy.
    let clientAddress: ClientAddress

    /// Decodes the body strictly (its media type was checked before routing).
    /// - Throws: ``APIError`` 400 for anything that does not match.
    func decode<T: WireMessage>(_ type: T.Type) throws -> T {
        do {
            return try T(jsonData: request.body)
        } catch {
            throw APIError(400, ProblemCode(rawValue: error.code.rawValue), error.detail)
        }
    }

    /// A path parameter (always present for a matched route).
    func parameter(_ name: String) -> String { parameters[name] ?? "" }
}

/// A route: method, path pattern (`/v1/devices/{id}`), handler.
struct Route: Sendable {
    let method: String
    let pattern: String
    let handler: @Sendable (Application, RequestContext) throws -> HTTPResponse
    /// Whether the handler only reads, a bounded amount, and never waits for a write: with the
    /// database in this process, such a request is answered on the HTTP thread that read it
    /// (``Application/answersAtOnce(_:)``). Only for patterns without parameters.
    let answersAtOnce: Bool
    /// The pattern's segments, split once: a literal, or the name of a `{parameter}`.
    fileprivate let segments: [Segment]

    fileprivate enum Segment: Sendable {
        case literal(Substring)
        case parameter(String)
    }

    init(
        method: String, pattern: String, answersAtOnce: Bool = false,
        handler: @escaping @Sendable (Application, RequestContext) throws -> HTTPResponse
    ) {
        precondition(!answersAtOnce || !pattern.contains("{"), "answered at once: a literal path only")
        self.method = method
        self.pattern = pattern
        self.answersAtOnce = answersAtOnce
        self.handler = handler
        segments = pattern.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}")
                ? .parameter(String(segment.dropFirst().dropLast())) : .literal(segment)
        }
    }
}

/// A small router: exact segments and `{name}` parameters.
struct Router: Sendable {
    enum Match {
        case found(Route, [String: String])
        /// The path exists with other methods.
        case methodNotAllowed(pattern: String, allowed: [String])
        case notFound
    }

    private let routes: [Route]

    init(_ routes: [Route]) { self.routes = routes }

    func match(method: String, path: String) -> Match {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var allowed: [String] = []
        var allowedPattern = ""
        for route in routes {
            guard route.segments.count == segments.count else { continue }
            var parameters: [String: String] = [:]
            var matches = true
            for (expected, actual) in zip(route.segments, segments) {
                switch expected {
                case .parameter(let name):
                    guard !actual.isEmpty, actual.utf8.count <= 128 else {
                        matches = false
                        break
                    }
                    parameters[name] = String(actual)
                case .literal(let literal):
                    guard literal == actual else {
                        matches = false
                        break
                    }
                }
                if !matches { break }
            }
            guard matches else { continue }
            if route.method == method { return .found(route, parameters) }
            allowed.append(route.method)
            allowedPattern = route.pattern
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(pattern: allowedPattern, allowed: allowed)
    }
}
