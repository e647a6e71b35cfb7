import Foundation
import KeyboundCrypto
import KeyboundWire

/// Fails unless the response has the expected status.
func expect(_ result: HTTPResult, _ status: Int, _ what: String) throws {
    guard result.status == status else {
        let body = String(decoding: result.body.prefix(300), as: UTF8.self)
        throw HTTPClientError(description: "\(what): HTTP \(result.status), expected \(status): \(body)")
    }
}

/// A client with its own account, key and bound device, logging in with the device key:
/// `POST /v1/challenges`, sign the payload, `POST /v1/sessions/device`.
final class DeviceLoginWorker: LoadWorker, @unchecked Sendable {
    let connection: HTTPConnection
    private let key: P256SigningKey
    private let deviceID: String
    private(set) var accessToken: String

    /// Creates the account, logs in with the password (the step-up binding needs) and binds a
    /// fresh P-256 key, all through the public API.
    init(port: UInt16, username: String) throws {
        connection = try HTTPConnection(port: port)
        let password = "bench password of " + username
        try expect(
            connection.send(
                "POST", "/v1/accounts",
                body: CreateAccountRequest(username: try Username(username), password: password).jsonData),
            201, "create account")
        let login = try connection.send(
            "POST", "/v1/sessions/password",
            body: PasswordLoginRequest(
                username: try Username(username), password: password, clientID: "bench-phone"
            )
            .jsonData)
        try expect(login, 200, "password login")
        accessToken = try TokenResponse(jsonData: login.body).accessToken
        key = try P256SigningKey()
        let bound = try connection.send(
            "POST", "/v1/devices",
            body: BindDeviceRequest(
                publicKey: key.publicKey.spkiDER, name: "bench phone", keyProtection: .software
            )
            .jsonData,
            bearer: accessToken)
        try expect(bound, 201, "bind device")
        deviceID = try BindDeviceResponse(jsonData: bound.body).deviceID
        guard try step() else { throw HTTPClientError(description: "the first device login failed") }
    }

    func step() throws -> Bool {
        let challenge = try connection.send(
            "POST", "/v1/challenges", body: ChallengeRequest(deviceID: deviceID).jsonData)
        guard challenge.status == 201 else { return false }
        let issued = try ChallengeResponse(jsonData: challenge.body)
        let signature = try key.signature(for: issued.payload).derRepresentation
        let login = try connection.send(
            "POST", "/v1/sessions/device",
            body: DeviceLoginRequest(challengeID: issued.challengeID, signature: signature).jsonData)
        guard login.status == 200 else { return false }
        accessToken = try TokenResponse(jsonData: login.body).accessToken
        return true
    }
}

/// A `GET` of one path, optionally with a bearer token, expecting 200.
final class GetWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let path: String
    private let bearer: String?

    init(connection: HTTPConnection, path: String, bearer: String?) {
        self.connection = connection
        self.path = path
        self.bearer = bearer
    }

    func step() throws -> Bool {
        try connection.send("GET", path, bearer: bearer).status == 200
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
        try connection.send("POST", "/v1/sessions/password", body: body).status == 200
    }
}
