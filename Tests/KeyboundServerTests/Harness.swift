import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A temporary directory removed when the value is released.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Collects log lines for assertions.
final class LogCollector: Sendable {
    private let lines = Locked<[String]>([])
    var sink: LogSink { LogSink { [lines] line in lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }
}

/// How a test reaches its server, as HummingbirdTesting's `.live` and `.router`: the same
/// ``Client`` API over either.
enum Transport: String, Sendable, CaseIterable {
    /// Over a loopback socket: the HTTP daemon, the real bytes on the wire.
    case live
    /// In process: each request goes straight to `Server.handle(_:)`, through the same router,
    /// services and storage, without a socket or a port.
    case inProcess
}

/// The storage engines the server suite runs on: each test that takes an `Engine` runs once
/// per engine, each time on a fresh database.
enum Engine: String, Sendable, CustomTestStringConvertible {
    /// A temporary SQLite file.
    case sqlite
    /// A new database (`CREATE DATABASE`) in the test process's throwaway PostgreSQL cluster.
    case postgres

    var testDescription: String { rawValue }

    /// Both engines; SQLite alone where PostgreSQL cannot run (the suite "PostgreSQL" then says
    /// so in one warning).
    static let all: [Engine] = PostgresCluster.isAvailable ? [.sqlite, .postgres] : [.sqlite]
}

extension PostgresCluster {
    /// Whether the shared cluster runs (started on first use).
    static var isAvailable: Bool { (try? shared.get()) != nil }
}

/// A fresh, empty database for one test; a PostgreSQL one is dropped with the value.
final class TestDatabase: Sendable {
    let engine: Engine
    /// `sqlite:PATH` or `postgres://…`.
    let url: String
    /// The PostgreSQL password (nil for SQLite).
    let password: String?
    private let postgresName: String?

    init(_ engine: Engine, in directory: TemporaryDirectory) throws {
        self.engine = engine
        switch engine {
        case .sqlite:
            url = "sqlite:" + directory.path("keybound.sqlite")
            password = nil
            postgresName = nil
        case .postgres:
            let cluster = try PostgresCluster.shared.get()
            let name = try cluster.createDatabase()
            url = cluster.url(database: name)
            password = cluster.password
            postgresName = name
        }
    }

    /// ``Configuration/testing(databasePath:)`` on this database.
    var configuration: Configuration {
        var configuration = Configuration.testing(databasePath: "")
        configuration.databaseURL = url
        configuration.databasePassword = password
        return configuration
    }

    /// The server's own storage on this database, to look at what a test's requests stored.
    func open() throws -> any Database {
        try openDatabase(url: url, connections: 1, synchronous: .normal, password: password)
    }

    deinit {
        if let postgresName, case .success(let cluster) = PostgresCluster.shared {
            cluster.dropDatabase(postgresName)
        }
    }
}

/// A server for one test: a fresh database (a temporary SQLite file unless told otherwise), a
/// manual clock, collected logs, and a ``Client`` over the chosen transport (a free loopback port
/// for ``Transport/live``). On PostgreSQL it can be several instances on the one database, as
/// `keybound serve` is deployed there: same configuration, clock and logs, a client each.
final class TestServer: Sendable {
    let directory: TemporaryDirectory
    let database: TestDatabase
    /// The first instance.
    let server: Server
    /// Every instance, ``server`` first.
    let servers: [Server]
    let clock: ManualClock
    let logs = LogCollector()
    /// A client of the first instance.
    let client: Client
    /// A client of each instance, in the order of ``servers``.
    let clients: [Client]

    /// - Parameter instances: servers on the database; more than one needs PostgreSQL (SQLite
    ///   has one writer process by design).
    init(
        _ transport: Transport = .live, engine: Engine = .sqlite, instances: Int = 1,
        _ adjust: (inout Configuration) -> Void = { _ in }
    ) throws {
        guard instances >= 1, instances == 1 || engine == .postgres else {
            throw TestFailure("\(instances) instances on \(engine)")
        }
        directory = try TemporaryDirectory()
        database = try TestDatabase(engine, in: directory)
        clock = ManualClock()
        var configuration = database.configuration
        configuration.clock = clock.serverClock
        configuration.log = logs.sink
        configuration.serverID = "keybound-test"
        adjust(&configuration)
        let servers = try (0..<instances).map { _ in try Server(configuration: configuration) }
        self.servers = servers
        server = servers[0]
        switch transport {
        case .live:
            do {
                clients = try servers.map { server in
                    try server.start()
                    guard let baseURL = server.baseURL else { throw TestFailure("no base URL") }
                    return Client(baseURL: baseURL)
                }
            } catch {
                for server in servers { server.stop(gracePeriod: 1) }
                throw error
            }
        case .inProcess:
            clients = servers.map { Client(inProcess: $0) }
        }
        client = clients[0]
    }

    deinit { for server in servers { server.stop(gracePeriod: 1) } }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A response as the client saw it.
struct Reply: Sendable {
    let status: Int
    /// Header fields, names lowercased.
    let headers: [String: String]
    let body: Data

    func header(_ name: String) -> String? { headers[name.lowercased()] }

    func decode<T: WireMessage>(_ type: T.Type, sourceLocation: SourceLocation = #_sourceLocation) throws -> T
    {
        do {
            return try T(jsonData: body)
        } catch {
            Issue.record(
                "cannot decode \(T.self) from \(status) \(String(decoding: body, as: UTF8.self))",
                sourceLocation: sourceLocation)
            throw error
        }
    }

    var problem: Problem? { try? Problem(jsonData: body) }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// An HTTP client of a test server, over a loopback socket or in process (``Transport``). Every
/// reply is checked against docs/openapi.yaml.
///
/// Over a socket it sends through ``HTTPConnection``s (kept alive, one per request in flight),
/// not URLSession: under the load of the whole suite URLSession sometimes missed a socket's
/// events until its own 30 s timer fired, which failed tests at random.
struct Client: Sendable {
    private enum Route: Sendable {
        case socket(ConnectionPool)
        case inProcess(Server)
    }

    private let route: Route

    /// A client of the plain-HTTP server at `baseURL` (on 127.0.0.1), over loopback.
    init(baseURL: URL) {
        route = .socket(ConnectionPool(port: UInt16(baseURL.port ?? 80), basePath: baseURL.path))
    }

    /// A client that hands each request to `server` in process.
    init(inProcess server: Server) { route = .inProcess(server) }

    /// Sends `method` `path` as they are: for the requests that name no route on purpose (a
    /// method a path does not take, a path that is none); a route's requests go through the
    /// endpoint overloads below.
    @discardableResult
    func send(
        _ method: String, _ path: String, body: Data? = nil, token: String? = nil,
        contentType: String? = "application/json", headers: [String: String] = [:], checkSpec: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Reply {
        var headers = headers
        if body != nil, let contentType { headers["Content-Type"] = contentType }
        if let token { headers["Authorization"] = "Bearer \(token)" }
        let reply: Reply
        switch route {
        case .socket(let pool):
            reply = try await pool.send(method, path, body: body, headers: headers)
        case .inProcess(let server):
            let response = await server.handle(
                HTTPRequest(method: method, path: path, headers: headers, body: body ?? Data()))
            reply = Reply(
                status: response.status,
                headers: Dictionary(
                    response.headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 }),
                body: response.body)
        }
        if checkSpec {
            let templatePath = path.split(separator: "?").first.map(String.init) ?? path
            for problem in OpenAPISpec.shared.check(method: method, path: templatePath, reply: reply) {
                Issue.record(
                    "\(method) \(path) → \(reply.status): \(problem)", sourceLocation: sourceLocation)
            }
        }
        return reply
    }

    /// Sends `body` to `endpoint`: its method, and its path with `parameters` (and `query`).
    @discardableResult
    func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ body: Request, parameters: [String] = [],
        query: String? = nil, token: String? = nil, headers: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Reply {
        try await send(
            endpoint, raw: body.jsonData, parameters: parameters, query: query, token: token,
            headers: headers, sourceLocation: sourceLocation)
    }

    /// Sends a request without a body to `endpoint`.
    @discardableResult
    func send<Response>(
        _ endpoint: Endpoint<NoBody, Response>, parameters: [String] = [], query: String? = nil,
        token: String? = nil, headers: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Reply {
        try await send(
            endpoint, raw: nil, parameters: parameters, query: query, token: token, headers: headers,
            sourceLocation: sourceLocation)
    }

    /// Sends `body` as it is (nil: none) to `endpoint`: for the bodies a test makes by hand, malformed
    /// or shaped like a browser's on purpose.
    @discardableResult
    func send(
        _ endpoint: some EndpointDescription, raw body: Data?, parameters: [String] = [],
        query: String? = nil, token: String? = nil, contentType: String? = "application/json",
        headers: [String: String] = [:], checkSpec: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Reply {
        try await send(
            endpoint.method.rawValue, endpoint.path(parameters) + (query.map { "?" + $0 } ?? ""), body: body,
            token: token, contentType: contentType, headers: headers, checkSpec: checkSpec,
            sourceLocation: sourceLocation)
    }
}

/// Steps of the stories, shared by the tests.
extension Client {
    static let password = "correct horse battery"

    @discardableResult
    func createAccount(_ username: String, password: String = Client.password) async throws -> String {
        let reply = try await send(
            API.createAccount, CreateAccountRequest(username: try Username(username), password: password))
        #expect(reply.status == 201, "\(reply.text)")
        return try reply.decode(CreateAccountResponse.self).userID
    }

    func login(_ username: String, password: String = Client.password, clientID: String = "app-1")
        async throws
        -> TokenResponse
    {
        let reply = try await send(
            API.passwordLogin,
            PasswordLoginRequest(
                username: try Username(username), password: password, clientID: try ClientID(clientID)))
        #expect(reply.status == 200, "\(reply.text)")
        return try reply.decode(TokenResponse.self)
    }

    /// Creates an account, logs in and binds a new software device key.
    func userWithDevice(_ username: String, clientID: String = "app-1") async throws -> (
        tokens: TokenResponse, key: P256SigningKey, deviceID: String
    ) {
        try await createAccount(username)
        let tokens = try await login(username, clientID: clientID)
        let (key, deviceID) = try await bindDevice(tokens.accessToken)
        return (tokens, key, deviceID)
    }

    func bindDevice(_ accessToken: String) async throws -> (P256SigningKey, String) {
        let key = try P256SigningKey()
        let reply = try await send(
            API.bindDevice,
            BindDeviceRequest(publicKey: key.publicKey.spkiDER, name: "Test phone", keyProtection: .emulator),
            token: accessToken)
        #expect(reply.status == 201, "\(reply.text)")
        return (key, try reply.decode(BindDeviceResponse.self).deviceID)
    }

    func challenge(_ deviceID: String) async throws -> ChallengeResponse {
        let reply = try await send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
        #expect(reply.status == 201, "\(reply.text)")
        return try reply.decode(ChallengeResponse.self)
    }

    func deviceLogin(challengeID: String, signature: Data) async throws -> Reply {
        try await send(
            API.deviceLogin, DeviceLoginRequest(challengeID: challengeID, signature: signature))
    }
}

/// A test's handle on an `Application` in process, without sockets: it sends requests straight to
/// its router, each one saying its body is JSON.
protocol InProcessApplicationHandle {
    var application: Application { get }
}

extension InProcessApplicationHandle {
    /// Sends `method` `path` as they are, as if from `address`.
    func send(
        _ method: String, _ path: String, _ body: Data = Data(), token: String? = nil,
        from address: String = "127.0.0.1"
    ) -> HTTPResponse {
        var headers = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return application.handle(
            HTTPRequest(method: method, path: path, headers: headers, body: body, clientAddress: address))
    }

    /// Sends `body` to `endpoint` (its path with `parameters`), as if from `address`.
    func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ body: Request, parameters: [String] = [],
        token: String? = nil, from address: String = "127.0.0.1"
    ) -> HTTPResponse {
        send(endpoint, raw: body.jsonData, parameters: parameters, token: token, from: address)
    }

    /// Sends a request without a body to `endpoint`, as if from `address`.
    func send<Response>(
        _ endpoint: Endpoint<NoBody, Response>, parameters: [String] = [], token: String? = nil,
        from address: String = "127.0.0.1"
    ) -> HTTPResponse {
        send(endpoint, raw: Data(), parameters: parameters, token: token, from: address)
    }

    /// Sends `body` as it is to `endpoint`, as if from `address`.
    func send(
        _ endpoint: some EndpointDescription, raw body: Data, parameters: [String] = [],
        token: String? = nil, from address: String = "127.0.0.1"
    ) -> HTTPResponse {
        send(endpoint.method.rawValue, endpoint.path(parameters), body, token: token, from: address)
    }
}

func sign(_ payload: Data, with key: P256SigningKey) throws -> Data {
    try key.signature(for: payload).derRepresentation
}

func transfer(_ amount: String = "0.5", asset: String = "ETH", to: String = "0x12ab34cd56ef") throws
    -> ApprovalAction
{
    .transfer(try TransferAction(amount: DecimalAmount(amount), asset: asset, to: to))
}

/// Idle kept-alive connections to one test server, and the requests in flight on others.
private final class ConnectionPool: Sendable {
    private let port: UInt16
    /// The base URL's path without its last slash, before each request's path.
    private let basePath: String
    private let idle = Locked<[UncheckedConnection]>([])

    /// An ``HTTPConnection`` moving between the pool's lock and the one thread that uses it.
    private struct UncheckedConnection: @unchecked Sendable {
        let connection: HTTPConnection
    }

    init(port: UInt16, basePath: String) {
        self.port = port
        self.basePath = basePath.hasSuffix("/") ? String(basePath.dropLast()) : basePath
    }

    /// Sends the request on an idle connection (or a new one), off Swift's cooperative threads:
    /// the socket calls block.
    func send(_ method: String, _ path: String, body: Data?, headers: [String: String]) async throws -> Reply
    {
        let target = basePath + (path.hasPrefix("/") ? path : "/" + path)
        return try await offThePool { [self] in try exchange(method, target, body: body, headers: headers) }
    }

    private func exchange(_ method: String, _ target: String, body: Data?, headers: [String: String]) throws
        -> Reply
    {
        // A kept-alive connection may have been closed by the server meanwhile (its idle limit):
        // then the request never reached it, and goes again on a new connection.
        if let reused = idle.withLock({ $0.popLast() }) {
            do {
                return try exchange(on: reused.connection, method, target, body: body, headers: headers)
            } catch let error as HTTPClientError where error.beforeResponse {}
        }
        return try exchange(
            on: try HTTPConnection(port: port, timeoutSeconds: 30, keepsHeaders: true), method, target,
            body: body,
            headers: headers)
    }

    private func exchange(
        on connection: HTTPConnection, _ method: String, _ target: String, body: Data?,
        headers: [String: String]
    ) throws -> Reply {
        let result = try connection.send(method, target, exactHeaders: headers, body: body)
        if connection.isOpen { idle.withLock { $0.append(UncheckedConnection(connection: connection)) } }
        return Reply(status: result.status, headers: result.headers, body: result.body)
    }
}

extension Sequence {
    /// `map` with an async transform, one element after another.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
