import Foundation
import KeyboundWire

/// What a handler receives.
struct RequestContext {
    let request: HTTPRequest
    /// Path parameters by name (`{id}` → `id`).
    let parameters: [String: String]
    /// The current time of this request, to the millisecond (the database's precision).
    let now: Date
    /// The client: the TCP peer, or the forwarded client behind a trusted proxy.
    let clientAddress: ClientAddress

    /// A path parameter (always present for a matched route).
    func parameter(_ name: String) -> String { parameters[name] ?? "" }
}

/// The body of a request, to be decoded as the message its route declares (``Endpoint``): a
/// handler cannot read another message than the one the SDK's client sends.
struct RequestBody<Message: WireMessage> {
    /// The bytes as they came (for the passkey routes, which read the browser's JSON leniently).
    let data: Data

    /// Decodes the body strictly (its media type was checked before routing).
    /// - Throws: ``APIError`` 400 for anything that does not match.
    func decode() throws -> Message {
        do {
            return try Message(jsonData: data)
        } catch {
            throw APIError(400, ProblemCode(rawValue: error.code.rawValue), error.detail)
        }
    }
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
    /// Whether the route speaks OAuth's encodings (``OAuthParameters``): its body is form-encoded
    /// rather than JSON, and its errors are ``OAuthError``s.
    let speaksOAuth: Bool
    /// The pattern's segments, split once: a literal, or the name of a `{parameter}`.
    fileprivate let segments: [Segment]

    fileprivate enum Segment: Sendable {
        case literal(Substring)
        case parameter(String)
    }

    /// A route that answers with bytes of its own (a page, the OpenAPI document, metrics).
    init(
        method: String, pattern: String, answersAtOnce: Bool = false, speaksOAuth: Bool = false,
        handler: @escaping @Sendable (Application, RequestContext) throws -> HTTPResponse
    ) {
        precondition(!answersAtOnce || !pattern.contains("{"), "answered at once: a literal path only")
        self.method = method
        self.pattern = pattern
        self.answersAtOnce = answersAtOnce
        self.speaksOAuth = speaksOAuth
        self.handler = handler
        segments = pattern.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}")
                ? .parameter(String(segment.dropFirst().dropLast())) : .literal(segment)
        }
    }

    /// A route of the OAuth provider (docs/oauth.md): its ``OAuthError``s are answered as OAuth
    /// says, and so are refusals of the request as a whole (413, 405, 503, 500:
    /// ``Application/dispatch``); 404 when no issuer is configured is a problem, as for any path
    /// the server does not have.
    init(
        oauth method: String, _ path: String, answersAtOnce: Bool = false,
        _ handler: @escaping @Sendable (Application) -> (RequestContext) throws -> HTTPResponse
    ) {
        self.init(method: method, pattern: path, answersAtOnce: answersAtOnce, speaksOAuth: true) {
            application, context in
            do {
                return try handler(application)(context)
            } catch let error as OAuthError {
                return error.response
            }
        }
    }

    /// A public document of the provider (metadata, keys, app association files): `GET`, only
    /// reads, 404 when not configured.
    init(
        document path: String,
        _ handler: @escaping @Sendable (Application) -> (RequestContext) throws -> HTTPResponse
    ) {
        self.init(method: "GET", pattern: path, answersAtOnce: true) { application, context in
            try handler(application)(context)
        }
    }

    /// A file of the sign-in page.
    init(_ file: SignInPage.File) {
        self.init(method: "GET", pattern: file.path, answersAtOnce: true) { _, _ in file.response }
    }

    /// An API route: `handler` takes the request's body as the endpoint's request message and
    /// answers with its response message, sent with the endpoint's status (a ``NoBody`` answer
    /// without a body).
    /// - Parameter location: the `Location` header of a success, from its answer.
    init<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, answersAtOnce: Bool = false,
        location: (@Sendable (Response) -> String)? = nil,
        _ handler:
            @escaping @Sendable (Application) -> (RequestContext, RequestBody<Request>) throws -> Response
    ) {
        self.init(method: endpoint.method.rawValue, pattern: endpoint.template, answersAtOnce: answersAtOnce)
        {
            application, context in
            let answer = try handler(application)(context, RequestBody(data: context.request.body))
            let headers = location.map { ["Location": $0(answer)] } ?? [:]
            if Response.self == NoBody.self {
                return HTTPResponse(
                    status: endpoint.status, headers: headers.merging(["Cache-Control": "no-store"]) { $1 })
            }
            return .json(endpoint.status, answer, headers: headers)
        }
    }

    /// An API route whose request has no body.
    init<Response>(
        _ endpoint: Endpoint<NoBody, Response>, answersAtOnce: Bool = false,
        location: (@Sendable (Response) -> String)? = nil,
        _ handler: @escaping @Sendable (Application) -> (RequestContext) throws -> Response
    ) {
        self.init(endpoint, answersAtOnce: answersAtOnce, location: location) { application in
            { context, _ in try handler(application)(context) }
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
    /// The routes without parameters, by their path: most requests are found here at once,
    /// without comparing segments.
    private let literal: [String: [Route]]

    init(_ routes: [Route]) {
        self.routes = routes
        literal = Dictionary(grouping: routes.filter { !$0.pattern.contains("{") }, by: \.pattern)
    }

    func match(method: String, path: String) -> Match {
        if let route = literal[path]?.first(where: { $0.method == method }) { return .found(route, [:]) }
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
