import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A backend with the OAuth provider on, and the operator's side of it (registering clients).
/// Its issuer is its own URL (DPoP proofs name it), so it listens on a port claimed before it
/// starts; ``shutDown()`` stops it and gives the port back.
final class ProviderBackend: Sendable {
    let backend: Backend
    let issuer: String
    let administration: ProviderAdministration
    private let port: UInt16

    init() throws {
        port = try LoopbackPorts.claim()
        let issuer = "http://127.0.0.1:\(port)"
        do {
            backend = try Backend { [port] in
                $0.port = port
                $0.issuer = issuer
            }
            var configuration = Configuration.testing(
                databasePath: backend.directory.appendingPathComponent("keybound.sqlite").path)
            configuration.issuer = issuer
            administration = try ProviderAdministration(configuration: configuration)
        } catch {
            LoopbackPorts.release(port)
            throw error
        }
        self.issuer = issuer
    }

    func shutDown() {
        backend.shutDown()
        LoopbackPorts.release(port)
    }
}

/// One test's backend: a real Keybound server on a free loopback port, with its own temporary
/// SQLite file and a clock that only moves when the test says so.
///
/// The same clock drives the apps' ``KeyboundClient``s (``clientClock``), so "16 minutes later"
/// is 16 minutes later for both sides. Call ``shutDown()`` at the end (a `defer`); it stops the
/// server and removes the database.
final class Backend: Sendable {
    /// The id the server writes into every signing payload; the apps expect it.
    static let serverID = "e2e.keybound.test"
    static let password = "correct horse battery staple"

    let directory: URL
    let server: Server
    let clock: ManualClock
    let baseURL: URL
    /// The HTTP session every app and probe of this test uses (its own connections, so nothing
    /// leaks from one test's server to the next test's).
    let urlSession: URLSession

    /// - Parameter clock: the server's clock (default: a new one at the current second); pass the
    ///   one something else of the test's also reads, such as a test certificate authority.
    init(clock: ManualClock = ManualClock(), _ adjust: (inout Configuration) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-e2e-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.clock = clock
        var configuration = Configuration.testing(
            databasePath: directory.appendingPathComponent("keybound.sqlite").path)
        configuration.serverID = Self.serverID
        configuration.clock = clock.serverClock
        configuration.metricsListen = ListenAddress(host: "127.0.0.1", port: 0)
        adjust(&configuration)
        server = try Server(configuration: configuration)
        urlSession = Self.makeURLSession()
        do {
            try server.start()
            baseURL = try #require(server.baseURL)
        } catch {
            server.stop(gracePeriod: 0)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    static func makeURLSession(protocolClasses: [AnyClass] = []) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 16
        configuration.timeoutIntervalForRequest = 20
        if !protocolClasses.isEmpty { configuration.protocolClasses = protocolClasses }
        return URLSession(configuration: configuration)
    }

    private let isShutDown = Mutex(false)

    /// Stops the server and removes its database (once; later calls do nothing).
    func shutDown() {
        guard
            isShutDown.withLock({ done in
                defer { done = true }
                return !done
            })
        else { return }
        urlSession.finishTasksAndInvalidate()
        server.stop(gracePeriod: 1)
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { shutDown() }

    /// The clock the apps' clients read: the server's clock.
    var clientClock: Keybound.Clock { clock.clock }

    /// The same manual clock as a ``MonotonicClock`` (seconds since 1970), for the app lock and
    /// the secret cache: "10 s later" moves both.
    var monotonicClock: MonotonicClock { MonotonicClock { [clock] in clock.now.timeIntervalSince1970 } }

    /// A fresh `KeyboundClient`, as an app makes at launch (no session).
    func client(urlSession: URLSession? = nil) -> KeyboundClient {
        KeyboundClient(baseURL: baseURL, urlSession: urlSession ?? self.urlSession, clock: clientClock)
    }

    /// An app's biometric-login flow at launch: a new client, the given device. Its sessions are
    /// bound to a DPoP key on the device unless `dpop` is false.
    func app(
        _ mode: BiometricLogin.Mode, device: EmulatedDevice, policy: AccessPolicy = .biometryCurrentSet,
        serverID: String = Backend.serverID, clientID: String? = nil, namespace: String? = nil,
        urlSession: URLSession? = nil, dpop: Bool = true
    ) throws -> BiometricLogin {
        try BiometricLogin(
            client: client(urlSession: urlSession), device: DeviceBackends(device),
            configuration: .init(
                clientID: clientID ?? "phone-\(mode.rawValue)", serverID: serverID, mode: mode,
                policy: policy, deviceName: "Ada's iPhone", keyProtection: .emulator,
                unlockReason: "Log in to Acme", namespace: namespace ?? "acme-\(mode.rawValue)",
                bindSessionsWithDPoP: dpop),
            clock: clientClock)
    }

    /// An app that logged in with Ada's password and enabled biometric login.
    func enabledApp(_ mode: BiometricLogin.Mode, device: EmulatedDevice, dpop: Bool = true) async throws
        -> BiometricLogin
    {
        let app = try app(mode, device: device, dpop: dpop)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        try await app.enable()
        return app
    }

    /// Creates an account; returns its user id.
    @discardableResult
    func createUser(_ username: String) async throws -> String {
        try await client().createAccount(username: username, password: Self.password)
    }

    /// `keybound_http_requests_total` for a route, summed over statuses (or for one status),
    /// read from the server's own `GET /metrics` on its metrics listener.
    func requests(_ endpoint: some EndpointDescription, status: Int? = nil) async throws -> Int {
        let (data, response) = try await urlSession.data(from: try #require(server.metricsURL))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let prefix = "keybound_http_requests_total{route=\"\(endpoint.template)\",status=\""
        var total = 0
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix(prefix)
        {
            let rest = line.dropFirst(prefix.count)
            guard let quote = rest.firstIndex(of: "\""), let lineStatus = Int(rest[..<quote]),
                let count = Int(rest.split(separator: " ").last ?? "")
            else {
                Issue.record("unreadable metrics line: \(line)")
                continue
            }
            if status == nil || status == lineStatus { total += count }
        }
        return total
    }
}

/// A new emulated iPhone: Face ID, passcode 123456, one face enrolled.
func makePhone(biometry: BiometryType = .faceID) throws -> EmulatedDevice {
    try EmulatedDevice(biometry: biometry, passcode: "123456", enrolledIdentities: 1)
}

// MARK: - A man in the middle

/// Rewrites requests on their way to the server, for attacks on the path between app and
/// server (malware hooking the network layer, a hostile proxy). Installed only in the
/// `URLSession` of the app under attack (``Backend/makeURLSession(protocolClasses:)``); each
/// test registers its rewrite for its own server's port, so parallel tests do not meet.
final class ManInTheMiddle: URLProtocol {
    typealias Rewrite = @Sendable (_ method: String, _ path: String, _ body: Data) -> Data

    private static let rewrites = Mutex<[Int: Rewrite]>([:])
    private static let forwarder = URLSession(configuration: .ephemeral)

    /// Rewrites the bodies of requests to `port` with `rewrite` until ``stop(port:)``.
    static func intercept(port: Int, _ rewrite: @escaping Rewrite) {
        rewrites.withLock { $0[port] = rewrite }
    }

    static func stop(port: Int) { _ = rewrites.withLock { $0.removeValue(forKey: port) } }

    override class func canInit(with request: URLRequest) -> Bool { request.url?.port != nil }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        var forwarded = request
        if let url = request.url, let port = url.port, let rewrite = Self.rewrites.withLock({ $0[port] }) {
            let body = request.httpBody ?? Self.drain(request.httpBodyStream)
            forwarded.httpBodyStream = nil
            forwarded.httpBody = rewrite(request.httpMethod ?? "GET", url.path, body)
        }
        // URLProtocol is not Sendable, but its client's callbacks may be made from any thread.
        // Everything here happens on a global queue: FoundationNetworking's sessions share one
        // work queue, this method runs on it, and both starting the forwarder's task and the
        // client's callbacks wait on it, which from here would deadlock (libdispatch traps).
        let this = UncheckedSendable(self)
        let forwardedRequest = forwarded
        DispatchQueue.global().async {
            Self.forwarder.dataTask(with: forwardedRequest) { data, response, error in
                DispatchQueue.global().async { this.value.deliver(data, response, error) }
            }.resume()
        }
    }

    override func stopLoading() {}
}

extension URLProtocol {
    /// Hands the loading client what a forwarded request got: its error, or its response and data.
    func deliver(_ data: Data?, _ response: URLResponse?, _ error: (any Error)?) {
        guard let client else { return }
        if let error {
            client.urlProtocol(self, didFailWithError: error)
            return
        }
        if let response {
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        }
        client.urlProtocol(self, didLoad: data ?? Data())
        client.urlProtocolDidFinishLoading(self)
    }

    /// The bytes of a request's body stream (URLSession hands a body over as one).
    static func drain(_ stream: InputStream?) -> Data {
        guard let stream else { return Data() }
        stream.open()
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            data.append(buffer, count: count)
        }
        return data
    }
}

/// Carries a value across a `@Sendable` boundary where the callee is known to be thread-safe.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
