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
    /// The listener the request arrived on: a login on the console's opens a session for an
    /// admin only (``Application/openSession``).
    var listener: Application.Listener = .api
    /// The administrator on whose behalf a console request changes things: every audit event it
    /// records names them (``Application/audit(_:_:_:method:userID:deviceID:sessionID:details:)``).
    var actorID: String?

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
    /// The route's answer made from `value`, when `value` is what a write transaction of its
    /// handler returned and is the answer (the endpoint's response message, or a `WriteOutcome`
    /// done with one; nil for a value of another type or a refusal): a POST with an
    /// `Idempotency-Key` keeps it in that transaction (``IdempotentRequest``). The connection is
    /// the write's, for an answer that reads to be made. Nil for a route that takes no
    /// `Idempotency-Key`: every route but a POST, and the browser's authorization form.
    private(set) var answer:
        (@Sendable (Application, RequestContext, Any, any SQLConnection) throws -> HTTPResponse?)?
    /// The pattern's segments, split once: a literal, or the name of a `{parameter}`.
    fileprivate let segments: [Segment]

    fileprivate enum Segment: Sendable {
        case literal(Substring)
        case parameter(String)
    }

    /// A route that answers with bytes of its own (a page, the OpenAPI document, metrics).
    /// - Parameter answer: how a write's value is a POST's answer (``answer``).
    init(
        method: String, pattern: String, answersAtOnce: Bool = false, speaksOAuth: Bool = false,
        answer: (@Sendable (Application, RequestContext, Any, any SQLConnection) throws -> HTTPResponse?)? =
            nil,
        handler: @escaping @Sendable (Application, RequestContext) throws -> HTTPResponse
    ) {
        precondition(!answersAtOnce || !pattern.contains("{"), "answered at once: a literal path only")
        self.method = method
        self.pattern = pattern
        self.answersAtOnce = answersAtOnce
        self.speaksOAuth = speaksOAuth
        self.handler = handler
        self.answer = method == "POST" ? answer : nil
        segments = pattern.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}")
                ? .parameter(String(segment.dropFirst().dropLast())) : .literal(segment)
        }
    }

    /// A route of the OAuth provider (docs/oauth.md): its ``OAuthError``s are answered as OAuth
    /// says, and so are refusals of the request as a whole (413, 405, 503, 500:
    /// ``Application/dispatch``); 404 when no issuer is configured is a problem, as for any path
    /// the server does not have.
    /// - Parameter idempotent: whether a POST takes an `Idempotency-Key`, and keeps the response
    ///   a write of its handler returns (``answer``).
    init(
        oauth method: String, _ path: String, answersAtOnce: Bool = false, idempotent: Bool = true,
        _ handler: @escaping @Sendable (Application) -> (RequestContext) throws -> HTTPResponse
    ) {
        self.init(
            oauth: method, path, answersAtOnce: answersAtOnce, rendering: { _, _, response, _ in response },
            handler)
        if !idempotent { answer = nil }
    }

    /// A route of the OAuth provider whose handler's answer is a value that `render` makes the
    /// response of (the token endpoint's grant: ``OAuthGrant``), on the connection of the write
    /// that returned it when it is kept for an `Idempotency-Key`, else on none.
    init<Answer>(
        oauth method: String, _ path: String, answersAtOnce: Bool = false,
        rendering render:
            @escaping @Sendable (Application, RequestContext, Answer, (any SQLConnection)?) throws
            -> HTTPResponse,
        _ handler: @escaping @Sendable (Application) -> (RequestContext) throws -> Answer
    ) {
        self.init(
            method: method, pattern: path, answersAtOnce: answersAtOnce, speaksOAuth: true,
            answer: Self.answering(render)
        ) { application, context in
            do {
                let answer = try handler(application)(context)
                // Made already, and kept, in the transaction of the write that returned it.
                if let kept = IdempotentRequest.current?.kept.withLock({ $0 }) { return kept }
                return try render(application, context, answer, nil)
            } catch let error as OAuthError {
                return error.response
            }
        }
    }

    /// ``answer`` for a route whose answer is an `Answer`, made into its response by `render`.
    private static func answering<Answer>(
        _ render:
            @escaping @Sendable (Application, RequestContext, Answer, any SQLConnection) throws
            -> HTTPResponse
    ) -> @Sendable (Application, RequestContext, Any, any SQLConnection) throws -> HTTPResponse? {
        { application, context, value, connection in
            switch value {
            case let answer as Answer: try render(application, context, answer, connection)
            case let outcome as WriteOutcome<Answer>:
                if case .done(let answer) = outcome {
                    try render(application, context, answer, connection)
                } else {
                    nil
                }
            default: nil
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
        let render = { @Sendable (answer: Response) -> HTTPResponse in
            let headers = location.map { ["Location": $0(answer)] } ?? [:]
            if Response.self == NoBody.self {
                return HTTPResponse(
                    status: endpoint.status, headers: headers.merging(["Cache-Control": "no-store"]) { $1 })
            }
            return .json(endpoint.status, answer, headers: headers)
        }
        self.init(
            method: endpoint.method.rawValue, pattern: endpoint.template, answersAtOnce: answersAtOnce,
            answer: Self.answering { _, _, answer, _ in render(answer) }
        ) { application, context in
            render(try handler(application)(context, RequestBody(data: context.request.body)))
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
