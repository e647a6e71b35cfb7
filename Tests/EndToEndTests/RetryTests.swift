import Foundation
import Keybound
import KeyboundCrypto
import KeyboundServer
import KeyboundWire
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The SDK's retries against a real server (``RetryPolicy``): the answer of a POST is lost after
/// the server committed it (the connection drops on its way back), and the client, sending it
/// again with the same `Idempotency-Key`, gets that answer: one account, one session, a refresh
/// that rotated once. A 503 is sent again after its `Retry-After`, unless that is too long.
@Suite("Retries with Idempotency-Key")
struct RetryTests {
    /// The sessions the server's database holds.
    static func sessions(_ backend: Backend) throws -> Int64 {
        let database = try openDatabase(
            url: "sqlite:" + backend.directory.appendingPathComponent("keybound.sqlite").path, connections: 1,
            synchronous: .normal)
        return try database.read { try $0.queryOne("SELECT COUNT(*) FROM sessions", [])?.integer(0) } ?? -1
    }

    @Test func answersLostAfterTheCommitAreFetchedAgainWithTheSameKey() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let port = try #require(backend.baseURL.port)
        let session = Backend.makeURLSession(protocolClasses: [LossyNetwork.self])
        defer { LossyNetwork.stop(port: port) }
        LossyNetwork.start(
            port: port,
            losing: [
                API.createAccount.template, API.passwordLogin.template, API.refresh.template,
                API.bindDevice.template,
            ])
        let client = backend.client(urlSession: session)

        let userID = try await client.createAccount(username: "ada", password: Backend.password)
        let login = try await client.loginWithPassword(
            username: "ada", password: Backend.password, clientID: "a")
        #expect(login.userID == userID)
        #expect(try Self.sessions(backend) == 1)
        let stored = try await client.me()
        #expect(stored.sessionID == login.sessionID)
        let deviceID = try await client.bindDevice(
            publicKey: try P256SigningKey().publicKey.spkiDER, name: "Phone", keyProtection: .emulator)
        #expect(try await client.devices().map(\.deviceID) == [deviceID])

        // A refresh whose answer is lost: sent again without the key, the used refresh token would
        // end the session (reuse detection); with it, the same new pair.
        backend.clock.advance(by: 16 * 60)
        let me = try await client.me()
        #expect(me.sessionID == login.sessionID)
        #expect(await client.currentSession?.accessToken != login.accessToken)
        #expect(try Self.sessions(backend) == 1)

        // Each call went twice, with one key per call, another for each call.
        let sent = LossyNetwork.sent(port: port)
        for path in [
            API.createAccount.template, API.passwordLogin.template, API.refresh.template,
            API.bindDevice.template,
        ] {
            let keys = sent.filter { $0.path == path && $0.method == "POST" }.map(\.key)
            #expect(keys.count == 2, "\(path): \(keys)")
            #expect(Set(keys).count == 1, "\(path): \(keys)")
            #expect(keys.allSatisfy { $0.flatMap(IdempotencyKey.parse) != nil }, "\(path): \(keys)")
        }
        #expect(Set(sent.filter { $0.method == "POST" }.compactMap(\.key)).count == 4)
        #expect(try await backend.requests(API.createAccount, status: 201) == 2)
        #expect(try await backend.requests(API.createAccount, status: 409) == 0)
    }

    @Test func unavailableIsSentAgainAfterItsRetryAfter() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let port = try #require(backend.baseURL.port)
        let session = Backend.makeURLSession(protocolClasses: [LossyNetwork.self])
        defer { LossyNetwork.stop(port: port) }

        LossyNetwork.start(port: port, unavailable: [API.createAccount.template], retryAfter: 1)
        let client = backend.client(urlSession: session)
        _ = try await client.createAccount(username: "ada", password: Backend.password)
        #expect(try await backend.requests(API.createAccount, status: 201) == 1)

        // A wait longer than the policy's longest: the app gets the 503, and its Retry-After.
        LossyNetwork.start(port: port, unavailable: [API.passwordLogin.template], retryAfter: 60)
        do {
            try await client.loginWithPassword(username: "ada", password: Backend.password, clientID: "a")
            Issue.record("the login went through")
        } catch let error as KeyboundError {
            #expect(error.serverCode == .unavailable, "\(error)")
            #expect(error.retryAfter == 60)
        }
        #expect(try await backend.requests(API.passwordLogin) == 0)
        #expect(LossyNetwork.sent(port: port).filter { $0.path == API.passwordLogin.template }.count == 1)
    }
}

/// The network between the app and its server losing answers: for the paths it is told, the
/// first request reaches the server, which answers and commits, and the answer never arrives
/// (the connection is lost); or the first request is answered 503 without reaching it. Every
/// request is recorded with its `Idempotency-Key`. Installed only in the session of the app
/// under test; per server port, so parallel tests do not meet.
final class LossyNetwork: URLProtocol {
    struct Sent: Sendable {
        let method: String
        let path: String
        let key: String?
    }

    private struct Plan: Sendable {
        var losing: Set<String> = []
        var unavailable: Set<String> = []
        var retryAfter = 1
        var sent: [Sent] = []
    }

    private static let plans = Mutex<[Int: Plan]>([:])
    private static let forwarder = URLSession(configuration: .ephemeral)

    static func start(port: Int, losing: Set<String> = [], unavailable: Set<String> = [], retryAfter: Int = 1)
    {
        plans.withLock { plans in
            let sent = plans[port]?.sent ?? []
            plans[port] = Plan(losing: losing, unavailable: unavailable, retryAfter: retryAfter, sent: sent)
        }
    }

    static func stop(port: Int) { _ = plans.withLock { $0.removeValue(forKey: port) } }

    static func sent(port: Int) -> [Sent] { plans.withLock { $0[port]?.sent ?? [] } }

    override class func canInit(with request: URLRequest) -> Bool { request.url?.port != nil }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    private enum Fate {
        case deliver, lose
        case unavailable(Int)
    }

    override func startLoading() {
        let request = self.request
        let path = request.url?.path ?? ""
        let fate = Self.plans.withLock { plans -> Fate in
            guard let port = request.url?.port, var plan = plans[port] else { return .deliver }
            defer { plans[port] = plan }
            plan.sent.append(
                Sent(
                    method: request.httpMethod ?? "GET", path: path,
                    key: request.value(forHTTPHeaderField: IdempotencyKey.header)))
            if plan.losing.remove(path) != nil { return .lose }
            if plan.unavailable.remove(path) != nil { return .unavailable(plan.retryAfter) }
            return .deliver
        }
        var forwarded = request
        if forwarded.httpBody == nil, let stream = request.httpBodyStream {
            forwarded.httpBodyStream = nil
            forwarded.httpBody = Self.drain(stream)
        }
        // As in ``ManInTheMiddle``: everything on a global queue, never on the session's own.
        let this = UncheckedSendable(self)
        let forwardedRequest = forwarded
        DispatchQueue.global().async {
            if case .unavailable(let seconds) = fate, let url = request.url {
                let problem = Problem(
                    status: 503, code: .unavailable, title: "Service unavailable",
                    detail: "Try again shortly.")
                let response = HTTPURLResponse(
                    url: url, statusCode: 503, httpVersion: "HTTP/1.1",
                    headerFields: ["Content-Type": Problem.mediaType, "Retry-After": String(seconds)])
                this.value.deliver(problem.jsonData, response, nil)
                return
            }
            Self.forwarder.dataTask(with: forwardedRequest) { data, response, error in
                DispatchQueue.global().async {
                    if case .lose = fate, error == nil {
                        // The server answered (and committed); the answer is lost on the way.
                        this.value.deliver(nil, nil, URLError(.networkConnectionLost))
                    } else {
                        this.value.deliver(data, response, error)
                    }
                }
            }.resume()
        }
    }

    override func stopLoading() {}
}
