import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Operations security")
struct OperationsSecurityTests {
    // MARK: Database files

    @Test func databaseFilesAreReadableByTheOwnerOnly() throws {
        let live = try TestServer()
        let path = live.directory.path("keybound.sqlite")
        // WAL mode: the -wal and -shm files exist while the server holds connections.
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try fileMode(file) == 0o600, "\(file)")
        }
        // Files an older version left world-readable are tightened when the server opens them.
        for file in [path, path + "-wal", path + "-shm"] { chmod(file, 0o644) }
        _ = try Application(configuration: live.server.configuration)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try fileMode(file) == 0o600, "\(file)")
        }
    }

    // MARK: Sessions

    @Test func defaults() {
        let configuration = Configuration()
        #expect(configuration.sessionMaxAge == 30 * 86_400)
        #expect(configuration.retention == 30 * 86_400)
        #expect(configuration.maxDevicesPerUser == 10)
    }

    @Test(arguments: Engine.all) func refreshIsRefusedAfterTheSessionMaximumAge(engine: Engine) throws {
        let app = try SteppedApplication(engine) { $0.sessionMaxAge = 2 * 86_400 }
        try app.createAccount("alice")
        let login = try app.login("alice")
        // Refreshed a day later, and again shortly before the maximum age: both still work.
        app.clock.advance(by: 86_400)
        let first = try app.refresh(login.refreshToken).decode(TokenResponse.self)
        app.clock.advance(by: 86_400 - 60)
        let last = try app.refresh(first.refreshToken).decode(TokenResponse.self)
        #expect(app.send(API.me, token: last.accessToken).status == 200)

        // Past the maximum age the access token (still within its 15 minutes) stops working, and
        // the refresh token (valid for 30 days) is refused; the session has ended.
        app.clock.advance(by: 61)
        #expect(app.send(API.me, token: last.accessToken).status == 401)
        let refused = app.refresh(last.refreshToken)
        #expect(refused.status == 401)
        #expect(refused.headers["Content-Type"] == Problem.mediaType)
        #expect(try Problem(jsonData: refused.body).code == .tokenInvalid)
        let reason = try app.rows("SELECT revoke_reason FROM sessions WHERE id = ?", [.text(login.sessionID)])
        #expect(reason == [[.text("max_age")]])
        // A new login opens a new session.
        #expect(try app.login("alice").sessionID != login.sessionID)
    }

    /// Every write a bearer token authorizes checks the session inside its own transaction: a
    /// session that ends after the handler's first check (here, in between the read and the
    /// write) cannot write.
    @Test(arguments: Engine.all) func aSessionEndedBeforeTheWriteCannotWrite(engine: Engine) throws {
        let app = try SteppedApplication(engine)
        try app.createAccount("alice")
        // A tablet, the device the phone session acts on, and a web session.
        let (tabletKey, tabletID) = try app.bindDevice(try app.login("alice", clientID: "tablet").accessToken)
        let web = try app.login("alice", clientID: "web")

        /// Binds a phone and logs in with it; before the next write, the web session revokes the
        /// phone, which ends the phone's session.
        func phoneSessionRevokedBeforeTheWrite() throws -> String {
            let (phoneKey, phoneID) = try app.bindDevice(
                try app.login("alice", clientID: "phone").accessToken)
            let phone = try app.deviceLogin(deviceID: phoneID, key: phoneKey)
            app.database.beforeNextWrite {
                #expect(
                    app.send(API.revokeDevice, parameters: [phoneID], token: web.accessToken).status == 204)
            }
            return phone.accessToken
        }

        // Log out.
        var token = try phoneSessionRevokedBeforeTheWrite()
        #expect(app.send(API.logout, token: token).status == 401)
        #expect(try app.count("SELECT COUNT(*) FROM audit_events WHERE type = 'logout'") == 0)

        // Ask for an approval.
        token = try phoneSessionRevokedBeforeTheWrite()
        let create = CreateApprovalRequest(deviceID: tabletID, action: try transfer())
        #expect(app.send(API.createApproval, create, token: token).status == 401)
        #expect(try app.count("SELECT COUNT(*) FROM approvals") == 0)

        // Confirm an approval, with a valid signature.
        let approval = try app.send(API.createApproval, create, token: web.accessToken)
            .decode(ApprovalChallengeResponse.self)
        token = try phoneSessionRevokedBeforeTheWrite()
        let confirm = ConfirmApprovalRequest(signature: try sign(approval.payload, with: tabletKey))
        #expect(
            app.send(API.confirmApproval, confirm, parameters: [approval.approvalID], token: token).status
                == 401)
        let status = try app.rows("SELECT status FROM approvals WHERE id = ?", [.text(approval.approvalID)])
        #expect(status == [[.text("pending")]])

        // Bind a device: a password session, replaced by a new login from its client before the write.
        let laptop = try app.login("alice", clientID: "laptop")
        app.database.beforeNextWrite { _ = try? app.login("alice", clientID: "laptop") }
        let bind = BindDeviceRequest(
            publicKey: try P256SigningKey().publicKey.spkiDER, name: "Laptop", keyProtection: .emulator)
        #expect(app.send(API.bindDevice, bind, token: laptop.accessToken).status == 401)
        #expect(try app.count("SELECT COUNT(*) FROM devices WHERE client_id = 'laptop'") == 0)

        // Revoke another device.
        token = try phoneSessionRevokedBeforeTheWrite()
        #expect(app.send(API.revokeDevice, parameters: [tabletID], token: token).status == 401)
        let tablet = try app.rows("SELECT revoked_at FROM devices WHERE id = ?", [.text(tabletID)])
        #expect(tablet == [[.null]])
    }

    // MARK: Retention

    @Test(arguments: Engine.all) func housekeepingPurgesEndedSessionsAndExpiredApprovalsAfterTheRetention(
        engine: Engine
    ) throws {
        let day: TimeInterval = 86_400
        let app = try SteppedApplication(engine) {
            $0.sessionMaxAge = 2 * 86_400
            $0.retention = 86_400
        }
        try app.createAccount("alice")
        let ended = try app.login("alice", clientID: "phone")
        #expect(app.send(API.logout, token: ended.accessToken).status == 204)
        let live = try app.login("alice", clientID: "web")
        let (_, deviceID) = try app.bindDevice(live.accessToken)
        let create = CreateApprovalRequest(deviceID: deviceID, action: try transfer())
        #expect(app.send(API.createApproval, create, token: live.accessToken).status == 201)
        func sessions(_ id: String) throws -> Int64 {
            try app.count("SELECT COUNT(*) FROM sessions WHERE id = '\(id)'")
        }
        func tokens(_ id: String) throws -> Int64 {
            try app.count("SELECT COUNT(*) FROM tokens WHERE session_id = '\(id)'")
        }

        // The retention counts from the logout and from the approval's expiry (5 minutes).
        app.clock.advance(by: day - 1)
        app.application.purgeExpired()
        #expect(try sessions(ended.sessionID) == 1)
        #expect(try tokens(ended.sessionID) == 1)  // its refresh token (the access token expired)
        #expect(try app.count("SELECT COUNT(*) FROM approvals") == 1)
        app.clock.advance(by: 5 * 60 + 2)
        app.application.purgeExpired()
        #expect(try sessions(ended.sessionID) == 0)
        #expect(try tokens(ended.sessionID) == 0)
        #expect(try app.count("SELECT COUNT(*) FROM approvals") == 0)
        #expect(try sessions(live.sessionID) == 1)

        // A session that was never ended ends at its maximum age (2 days); the retention follows.
        app.clock.advance(by: 2 * day - 5 * 60 - 2)
        app.application.purgeExpired()
        #expect(try sessions(live.sessionID) == 1)
        #expect(try tokens(live.sessionID) == 1)
        app.clock.advance(by: 2)
        app.application.purgeExpired()
        #expect(try sessions(live.sessionID) == 0)
        #expect(try tokens(live.sessionID) == 0)
        // Devices and audit events stay.
        #expect(try app.count("SELECT COUNT(*) FROM devices") == 1)
        #expect(try app.count("SELECT COUNT(*) FROM audit_events WHERE type = 'logout'") == 1)
    }

    // MARK: Devices

    @Test(arguments: Engine.all) func activeDevicesPerUserAreCapped(engine: Engine) async throws {
        let live = try TestServer(engine: engine) { $0.maxDevicesPerUser = 2 }
        let client = live.client
        try await client.createAccount("alice")
        _ = try await client.bindDevice(try await client.login("alice", clientID: "a").accessToken)
        let (_, deviceB) = try await client.bindDevice(
            try await client.login("alice", clientID: "b").accessToken)

        let third = try await client.login("alice", clientID: "c")
        let key = try P256SigningKey()
        let bind = BindDeviceRequest(
            publicKey: key.publicKey.spkiDER, name: "Third", keyProtection: .emulator)
        let refused = try await client.send(API.bindDevice, bind, token: third.accessToken)
        #expect(refused.status == 409)
        #expect(refused.problem?.code == .deviceLimitReached)

        // A new key for a client replaces its device: allowed at the cap.
        _ = try await client.bindDevice(try await client.login("alice", clientID: "a").accessToken)
        // Revoked devices do not count.
        #expect(
            try await client.send(API.revokeDevice, parameters: [deviceB], token: third.accessToken).status
                == 204)
        #expect(try await client.send(API.bindDevice, bind, token: third.accessToken).status == 201)
        let devices = try await client.send(API.listDevices, token: third.accessToken).decode(
            DeviceListResponse.self)
        #expect(devices.devices.filter { $0.status == .active }.count == 2)
    }
}

/// The permission bits of a file.
private func fileMode(_ path: String) throws -> mode_t {
    var status = stat()
    guard stat(path, &status) == 0 else { throw TestFailure("cannot stat \(path)") }
    return status.st_mode & 0o777
}

/// A database that lets a test act between two transactions of a request: the action given to
/// ``beforeNextWrite(_:)`` runs once, just before the next write transaction begins.
private final class SteppingDatabase: DatabaseWrapper {
    let base: any Database
    private let action = Locked<(@Sendable () -> Void)?>(nil)

    init(_ base: any Database) { self.base = base }

    func beforeNextWrite(_ body: @escaping @Sendable () -> Void) { action.withLock { $0 = body } }

    func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        let pending = action.withLock { current in
            defer { current = nil }
            return current
        }
        pending?()
        return try base.write(body)
    }

    func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }

    var readsInProcess: Bool { base.readsInProcess }

    func migrate<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.migrate(body) }
}

/// The application without sockets, on a manual clock, over a ``SteppingDatabase``.
private final class SteppedApplication: InProcessApplicationHandle, Sendable {
    let directory: TemporaryDirectory
    let testDatabase: TestDatabase
    let clock = ManualClock()
    let database: SteppingDatabase
    let application: Application

    init(_ engine: Engine = .sqlite, _ adjust: (inout Configuration) -> Void = { _ in }) throws {
        directory = try TemporaryDirectory()
        testDatabase = try TestDatabase(engine, in: directory)
        var configuration = testDatabase.configuration
        configuration.clock = clock.serverClock
        adjust(&configuration)
        database = SteppingDatabase(
            try openDatabase(
                url: configuration.databaseURL, connections: 4, synchronous: .normal,
                password: configuration.databasePassword))
        application = try Application(configuration: configuration, database: database)
    }

    func createAccount(_ username: String) throws {
        let reply = send(
            API.createAccount,
            CreateAccountRequest(username: try Username(username), password: Client.password))
        guard reply.status == 201 else { throw TestFailure("account: \(reply.status)") }
    }

    func login(_ username: String, clientID: String = "app-1") throws -> TokenResponse {
        try send(
            API.passwordLogin,
            PasswordLoginRequest(
                username: try Username(username), password: Client.password, clientID: try ClientID(clientID))
        ).decode(TokenResponse.self)
    }

    func refresh(_ refreshToken: String) -> HTTPResponse {
        send(API.refresh, RefreshRequest(refreshToken: refreshToken))
    }

    func bindDevice(_ accessToken: String) throws -> (P256SigningKey, String) {
        let key = try P256SigningKey()
        let request = BindDeviceRequest(
            publicKey: key.publicKey.spkiDER, name: "Phone", keyProtection: .emulator)
        let deviceID = try send(API.bindDevice, request, token: accessToken).decode(
            BindDeviceResponse.self
        )
        .deviceID
        return (key, deviceID)
    }

    func deviceLogin(deviceID: String, key: P256SigningKey) throws -> TokenResponse {
        let challenge = try send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
            .decode(ChallengeResponse.self)
        let request = DeviceLoginRequest(
            challengeID: challenge.challengeID, signature: try sign(challenge.payload, with: key))
        return try send(API.deviceLogin, request).decode(TokenResponse.self)
    }

    func rows(_ sql: String, _ parameters: [SQLValue] = []) throws -> [[SQLValue]] {
        try application.database.read { try $0.query(sql, parameters) }.map(\.values)
    }

    func count(_ sql: String) throws -> Int64 {
        try application.database.read { try $0.queryOne(sql, [])?.integer(0) ?? 0 }
    }
}

extension HTTPResponse {
    /// Decodes a JSON body, or fails with the status and body.
    fileprivate func decode<T: WireMessage>(_ type: T.Type) throws -> T {
        do {
            return try T(jsonData: body)
        } catch {
            throw TestFailure(
                "cannot decode \(T.self) from \(status) \(String(decoding: body, as: UTF8.self))")
        }
    }
}
