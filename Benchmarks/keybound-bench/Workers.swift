import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire

/// Fails unless the response has the expected status.
func expect(_ result: HTTPResult, _ status: Int, _ what: String) throws {
    guard result.status == status else {
        let body = String(decoding: result.body.prefix(300), as: UTF8.self)
        throw HTTPClientError(description: "\(what): HTTP \(result.status), expected \(status): \(body)")
    }
}

/// Creates `username`'s account through the API and logs in with its password (a sign-in that
/// step-up and `POST /v1/oauth/authorize` accept), on `connection`.
/// - Parameter headers: sent with the login (a DPoP proof, say).
/// - Returns: the login's tokens.
func signUpAndLogIn(
    _ connection: HTTPConnection, username: String, clientID: ClientID, headers: [String: String] = [:]
) throws -> TokenResponse {
    let password = "bench password of " + username
    try expect(
        connection.send(
            API.createAccount, CreateAccountRequest(username: try Username(username), password: password)),
        201, "create account")
    let login = try connection.send(
        API.passwordLogin,
        PasswordLoginRequest(username: try Username(username), password: password, clientID: clientID),
        headers: headers)
    try expect(login, 200, "password login")
    return try TokenResponse(jsonData: login.body)
}

/// A client with its own account, key and bound device, logging in with the device key:
/// `POST /v1/challenges`, sign the payload, `POST /v1/sessions/device`.
final class DeviceLoginWorker: LoadWorker, @unchecked Sendable {
    let connection: HTTPConnection
    /// The bound key (software here; the Secure Enclave's on a phone).
    let key: P256SigningKey
    private let deviceID: String
    private(set) var accessToken: String
    /// The refresh token of the latest session.
    private(set) var refreshToken: String

    /// Creates the account, logs in with the password (the step-up binding needs) and binds a
    /// fresh P-256 key, all through the public API.
    init(port: UInt16, username: String) throws {
        connection = try HTTPConnection(port: port)
        let tokens = try signUpAndLogIn(connection, username: username, clientID: "bench-phone")
        (accessToken, refreshToken) = (tokens.accessToken, tokens.refreshToken)
        key = try P256SigningKey()
        let bound = try connection.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: key.publicKey.spkiDER, name: "bench phone", keyProtection: .software),
            bearer: accessToken)
        try expect(bound, 201, "bind device")
        deviceID = try BindDeviceResponse(jsonData: bound.body).deviceID
        guard try step() else { throw HTTPClientError(description: "the first device login failed") }
    }

    func step() throws -> Bool {
        let challenge = try connection.send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
        guard challenge.status == 201 else { return false }
        let issued = try ChallengeResponse(jsonData: challenge.body)
        let signature = try key.signature(for: issued.payload).derRepresentation
        let login = try connection.send(
            API.deviceLogin, DeviceLoginRequest(challengeID: issued.challengeID, signature: signature))
        guard login.status == 200 else { return false }
        let tokens = try TokenResponse(jsonData: login.body)
        (accessToken, refreshToken) = (tokens.accessToken, tokens.refreshToken)
        return true
    }
}

/// Refresh-token rotations of one session: `POST /v1/sessions/refresh` with the latest refresh
/// token, which the answer replaces.
final class RefreshWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private var refreshToken: String

    init(connection: HTTPConnection, refreshToken: String) {
        self.connection = connection
        self.refreshToken = refreshToken
    }

    func step() throws -> Bool {
        let reply = try connection.send(API.refresh, RefreshRequest(refreshToken: refreshToken))
        guard reply.status == 200 else { return false }
        refreshToken = try TokenResponse(jsonData: reply.body).refreshToken
        return true
    }
}

/// What a device login cannot go below on this machine: per step the work a login needs apart
/// from the server's own bookkeeping — two HTTP round trips (`GET /healthz`, the cheapest
/// request), one P-256 verify (the server's) and one P-256 sign (the device's) of a login
/// payload, on the same cores and the same connections as the logins.
final class LoginBoundWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let key: P256SigningKey
    private let payload: Data

    init(connection: HTTPConnection) throws {
        self.connection = connection
        key = try P256SigningKey()
        payload = try SigningPayload(
            purpose: .login, server: "keybound", device: "dev_AAAAAAAAAAAAAAAAAAAAAA",
            challenge: SecureRandom.bytes(32), expires: Date(), action: nil
        ).bytes
    }

    func step() throws -> Bool {
        guard try connection.send(API.health).status == 200 else { return false }
        let signature = try key.signature(for: payload)
        guard key.publicKey.isValidSignature(signature, for: payload) else { return false }
        return try connection.send(API.health).status == 200
    }
}

/// Requests without a body to one route, optionally with a bearer token, expecting 200.
final class GetWorker<Response: WireMessage>: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let endpoint: Endpoint<NoBody, Response>
    private let bearer: String?

    init(connection: HTTPConnection, endpoint: Endpoint<NoBody, Response>, bearer: String?) {
        self.connection = connection
        self.endpoint = endpoint
        self.bearer = bearer
    }

    func step() throws -> Bool {
        try connection.send(endpoint, bearer: bearer).status == 200
    }
}

/// Password logins of one user, expecting 200.
final class PasswordLoginWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let body: Data

    init(port: UInt16, username: String, password: String) throws {
        connection = try HTTPConnection(port: port)
        body =
            PasswordLoginRequest(
                username: try Username(username), password: password, clientID: "bench-web"
            )
            .jsonData
    }

    func step() throws -> Bool {
        try connection.send(API.passwordLogin, raw: body).status == 200
    }
}
