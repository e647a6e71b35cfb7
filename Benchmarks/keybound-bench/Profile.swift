import Foundation
import KeyboundCrypto
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

/// `keybound-bench --profile OPERATION N`: N operations of one kind against an in-process server,
/// through ``Server/handle(_:)`` — the router, services and storage of the live server without
/// sockets or HTTP parsing — one after another on one thread. Run it under `perf record` or
/// `valgrind --tool=callgrind` to see what one operation costs the server (docs/benchmarks.md,
/// "Profiles"); the difference between two counts N and 2N cancels the set-up.
enum Profile {
    /// What can be profiled.
    enum Operation: String, CaseIterable {
        case healthz
        case me
        case challenge
        case login
        case refresh
        /// `GET /v1/me` of a DPoP-bound session, a fresh proof each (made here, outside the server
        /// but inside the count: subtract a sign).
        case dpopMe = "dpop-me"
    }

    static func run(_ operation: Operation, count: Int) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-bench-profile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = Configuration()
        configuration.databaseURL = "sqlite:" + folder.appendingPathComponent("profile.sqlite").path
        configuration.log = .discard
        configuration.argon2 = .insecureTesting  // the set-up's password login is not what is measured
        let server = try Server(configuration: configuration)
        let client = InProcessClient(server: server)

        let password = "profile password"
        try client.expect(API.createAccount, CreateAccountRequest(username: "profile", password: password))
        var tokens = try TokenResponse(
            jsonData: client.expect(
                API.passwordLogin,
                PasswordLoginRequest(username: "profile", password: password, clientID: "profile")))
        let key = try P256SigningKey()
        let deviceID = try BindDeviceResponse(
            jsonData: client.expect(
                API.bindDevice,
                BindDeviceRequest(
                    publicKey: key.publicKey.spkiDER, name: "profile", keyProtection: .software),
                bearer: tokens.accessToken)
        ).deviceID
        let dpopKey = try DPoPTestKey()
        let uri = "http://127.0.0.1" + API.me.template
        // Any answer to a request with a DPoP header carries the server's nonce.
        var nonce = try client.send(API.health, headers: [DPoP.proofHeader: "none"]).header(DPoP.nonceHeader)
        let dpopTokens = try TokenResponse(
            jsonData: client.send(
                API.passwordLogin,
                PasswordLoginRequest(username: "profile", password: password, clientID: "profile-dpop"),
                headers: [
                    DPoP.proofHeader: try dpopKey.proof(
                        "POST", "http://127.0.0.1" + API.passwordLogin.template, at: Date(), nonce: nonce)
                ]
            ).body)
        let started = nanoseconds()
        for _ in 0..<count {
            switch operation {
            case .healthz: try client.expect(API.health)
            case .me: try client.expect(API.me, bearer: tokens.accessToken)
            case .challenge:
                try client.expect(API.createChallenge, ChallengeRequest(deviceID: deviceID))
            case .login:
                let challenge = try ChallengeResponse(
                    jsonData: client.expect(API.createChallenge, ChallengeRequest(deviceID: deviceID)))
                let signature = try key.signature(for: challenge.payload).derRepresentation
                tokens = try TokenResponse(
                    jsonData: client.expect(
                        API.deviceLogin,
                        DeviceLoginRequest(challengeID: challenge.challengeID, signature: signature)))
            case .refresh:
                tokens = try TokenResponse(
                    jsonData: client.expect(API.refresh, RefreshRequest(refreshToken: tokens.refreshToken)))
            case .dpopMe:
                let proof = try dpopKey.proof(
                    "GET", uri, at: Date(), nonce: nonce, accessToken: dpopTokens.accessToken)
                let answer = try client.send(
                    API.me,
                    headers: ["Authorization": "DPoP \(dpopTokens.accessToken)", DPoP.proofHeader: proof])
                nonce = answer.header(DPoP.nonceHeader) ?? nonce
            }
        }
        let elapsed = seconds(since: started)
        print(
            "\(count) x \(operation.rawValue) in \(f(elapsed, 3)) s: \(f(elapsed / Double(count) * 1e6, 1)) us each"
        )
    }
}

/// Sends requests to ``Server/handle(_:)`` and waits for each answer, which must be the route's
/// success.
private struct InProcessClient {
    let server: Server

    /// Sends `message` to `endpoint`; returns the body of the answer.
    @discardableResult
    func expect<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ message: Request, bearer: String? = nil
    ) throws -> Data {
        try send(endpoint, body: message.jsonData, bearer: bearer, headers: [:]).body
    }

    /// Sends a request without a body to `endpoint`; returns the body of the answer.
    @discardableResult
    func expect<Response>(_ endpoint: Endpoint<NoBody, Response>, bearer: String? = nil) throws -> Data {
        try send(endpoint, body: nil, bearer: bearer, headers: [:]).body
    }

    /// Sends `message` to `endpoint` with `headers` besides the usual; returns the answer.
    func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ message: Request, headers: [String: String]
    ) throws -> HTTPResponse {
        try send(endpoint, body: message.jsonData, bearer: nil, headers: headers)
    }

    /// Sends a request without a body to `endpoint` with `headers` besides the usual.
    func send<Response>(_ endpoint: Endpoint<NoBody, Response>, headers: [String: String]) throws
        -> HTTPResponse
    {
        try send(endpoint, body: nil, bearer: nil, headers: headers)
    }

    private func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, body: Data?, bearer: String?, headers extra: [String: String]
    ) throws -> HTTPResponse {
        // The path is the template: no profiled route has parameters, and the profile should
        // spend nothing on filling them in.
        let (method, path, status) = (endpoint.method.rawValue, endpoint.template, endpoint.status)
        var headers = ["Host": "127.0.0.1", "Accept": "application/json"]
        if body != nil { headers["Content-Type"] = "application/json" }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        headers.merge(extra) { $1 }
        let request = HTTPRequest(method: method, path: path, headers: headers, body: body ?? Data())
        let done = DispatchSemaphore(value: 0)
        let response = Shared<HTTPResponse?>(nil)
        Task { [server] in
            let answer = await server.handle(request)
            response.withLock { $0 = answer }
            done.signal()
        }
        done.wait()
        guard let answer = response.withLock({ $0 }), answer.status == status else {
            throw HTTPClientError(description: "\(method) \(path): not \(status)")
        }
        return answer
    }
}
