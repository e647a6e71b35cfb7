import Foundation
import KeyboundWire

@testable import KeyboundServer

extension Harness {
    /// `Authorization` as `GET /v1/me` reads it. Input: the header's value, where `{token}`
    /// stands for a valid access token (issued for this input). Only 200 or 401 may come back.
    static let bearer = Harness(
        name: "bearer", covers: "KeyboundServer: the bearer Authorization header, through GET /v1/me"
    ) { data in
        let fixture = ServerFixture.shared
        // A read cannot end a session: every input can use the same one.
        let value = ServerFixture.substituting(Array(data), fixture.standingTokens)
        let response = fixture.handle(
            HTTPRequest(
                method: API.me.method.rawValue, path: API.me.path(),
                headers: ["Authorization": String(decoding: value, as: UTF8.self)]))
        expect([200, 401].contains(response.status), "GET /v1/me answered \(response.status)")
        ServerFixture.expectWellFormed(response)
    }

    /// Any request to the API, in-process through the live server's router, services and SQLite
    /// storage (no socket). Input: `METHOD TARGET`, header lines `Name: value`, an empty line, the
    /// body; `{token}` and `{refresh}` stand for a session's tokens (issued for this input). No
    /// request may give a 5xx, and every error is problem+json.
    static let serverRequest = Harness(
        name: "server-request",
        covers: "KeyboundServer: routing, query strings, forwarded headers, every handler's body and checks"
    ) { data in
        let fixture = ServerFixture.shared
        // A session of its own for each input: an input that ends it (a logout, a refresh token
        // used twice) does not change what the next input sees.
        let bytes = ServerFixture.substituting(Array(data), fixture.login())
        let response = fixture.handle(ServerFixture.request(from: bytes))
        expect(response.status < 500, "the server answered \(response.status)")
        ServerFixture.expectWellFormed(response)
    }
}

/// One in-process server on a temporary SQLite file, with one account. Lockouts are off, so no
/// fuzzed failure can lock the account out and change what later inputs see; forwarded headers
/// are trusted from loopback, so they are parsed.
final class ServerFixture: Sendable {
    static let shared = ServerFixture()

    private let application: Application
    /// A session opened at start, for inputs that cannot end it.
    let standingTokens: TokenResponse
    private static let username: Username = "fuzz"
    private static let password = "fuzz-password"

    private init() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keybound-fuzz-\(getpid())")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var configuration = Configuration.testing(
                databasePath: directory.appendingPathComponent("keybound.sqlite").path)
            configuration.sqliteSynchronous = .normal
            configuration.clock = ServerClock { Date(timeIntervalSince1970: 1_780_000_000) }
            configuration.accountFailureLimit = Int(Int32.max)
            configuration.accountFailureCeiling = Int(Int32.max)
            configuration.deviceFailureLimit = Int(Int32.max)
            configuration.addressFailureLimit = 0
            configuration.trustedProxies = [CIDR("127.0.0.0/8"), CIDR("::1/128")].compactMap { $0 }
            application = try Application(configuration: configuration)
        } catch {
            fatalError("cannot start the fuzz server: \(error)")
        }
        let account = Self.handle(
            HTTPRequest(
                method: API.createAccount.method.rawValue, path: API.createAccount.path(),
                headers: ["Content-Type": "application/json"],
                body: CreateAccountRequest(username: Self.username, password: Self.password).jsonData),
            by: application)
        guard account.status == 201 else { fatalError("cannot create the fuzz account: \(account.status)") }
        standingTokens = Self.login(to: application)
    }

    /// Handles `request` as the HTTP layer would hand it over.
    func handle(_ request: HTTPRequest) -> HTTPResponse { Self.handle(request, by: application) }

    private static func handle(_ request: HTTPRequest, by application: Application) -> HTTPResponse {
        var request = request
        request.bodyExceededLimit = request.body.count > application.configuration.bodyLimit
        if request.bodyExceededLimit { request.body = Data() }
        return application.handle(request)
    }

    /// The tokens of a new session, from a password login.
    func login() -> TokenResponse { Self.login(to: application) }

    private static func login(to application: Application) -> TokenResponse {
        let login = PasswordLoginRequest(username: username, password: password, clientID: "fuzz")
        let response = handle(
            HTTPRequest(
                method: API.passwordLogin.method.rawValue, path: API.passwordLogin.path(),
                headers: ["Content-Type": "application/json"],
                body: login.jsonData),
            by: application)
        guard let tokens = try? TokenResponse(jsonData: response.body) else {
            fatalError("the fuzz account cannot log in: \(response.status)")
        }
        return tokens
    }

    /// `bytes` with `{token}` and `{refresh}` replaced by the tokens' (asked for only when needed).
    static func substituting(_ bytes: [UInt8], _ tokens: @autoclosure () -> TokenResponse) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "{")) else { return bytes }
        let tokens = tokens()
        return bytes.replacing(Array("{token}".utf8), with: Array(tokens.accessToken.utf8))
            .replacing(Array("{refresh}".utf8), with: Array(tokens.refreshToken.utf8))
    }

    /// A request from `METHOD TARGET\nName: value\n…\n\nbody`; whatever is missing is empty.
    static func request(from bytes: [UInt8]) -> HTTPRequest {
        let newline = UInt8(ascii: "\n")
        var headEnd = bytes.count
        var bodyStart = bytes.count
        for index in bytes.indices.dropLast() where bytes[index] == newline && bytes[index + 1] == newline {
            headEnd = index
            bodyStart = index + 2
            break
        }
        let lines = bytes[..<headEnd].split(separator: newline, omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        let requestLine = lines.first?.split(separator: " ", maxSplits: 1) ?? []
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            headers[String(parts[0])] = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        }
        return HTTPRequest(
            method: requestLine.first.map(String.init) ?? "",
            path: requestLine.dropFirst().first.map(String.init) ?? "",
            headers: headers, body: Data(bytes[bodyStart...]))
    }

    /// Errors are problem+json with their own status; JSON bodies parse.
    static func expectWellFormed(_ response: HTTPResponse) {
        let type = response.header("Content-Type") ?? ""
        if response.status >= 400 {
            let problem = try? Problem(jsonData: response.body)
            expect(problem?.status == response.status, "a \(response.status) without its problem+json body")
        } else if type.hasPrefix("application/json") {
            expect(
                (try? JSON.parse(response.body)) != nil, "a \(response.status) JSON body that does not parse")
        }
    }
}

extension [UInt8] {
    /// Every occurrence of `pattern` replaced by `replacement`.
    fileprivate func replacing(_ pattern: [UInt8], with replacement: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < count {
            if index + pattern.count <= count, self[index..<index + pattern.count].elementsEqual(pattern) {
                out += replacement
                index += pattern.count
            } else {
                out.append(self[index])
                index += 1
            }
        }
        return out
    }
}
