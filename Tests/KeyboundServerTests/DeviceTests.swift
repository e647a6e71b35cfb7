import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Devices and device-key login")
struct DeviceTests {
    @Test(arguments: Engine.all) func bindListAndLogInWithTheDeviceKey(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        let list = try await live.client.send(API.listDevices, token: tokens.accessToken)
        let devices = try list.decode(DeviceListResponse.self).devices
        #expect(devices.map(\.deviceID) == [deviceID])
        #expect(devices.first?.status == .active)
        #expect(devices.first?.keyProtection == .emulator)

        let challenge = try await live.client.challenge(deviceID)
        let payload = try SigningPayload(parsing: challenge.payload)
        #expect(payload.purpose == .login)
        #expect(payload.server == "keybound-test")
        #expect(payload.device == deviceID)
        #expect(payload.action == nil)
        #expect(payload.expires == challenge.expiresAt)
        #expect(Int(payload.expires.timeIntervalSince(live.clock.now)) == 60)

        let login = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: key))
        #expect(login.status == 200, "\(login.text)")
        let session = try login.decode(TokenResponse.self)
        let me = try await live.client.send(API.me, token: session.accessToken).decode(MeResponse.self)
        #expect(me.authMethod == .device)
        #expect(me.username == "alice")
    }

    @Test(arguments: Engine.all) func replayedSignatureIsRefused(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let challenge = try await live.client.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        #expect(
            try await live.client.deviceLogin(challengeID: challenge.challengeID, signature: signature).status
                == 200)
        let replay = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: signature)
        #expect(replay.status == 409)
        #expect(replay.problem?.code == .challengeUsed)
        // The old signature does not fit a new challenge either.
        let fresh = try await live.client.challenge(deviceID)
        let wrong = try await live.client.deviceLogin(challengeID: fresh.challengeID, signature: signature)
        #expect(wrong.status == 401)
        #expect(wrong.problem?.code == .signatureInvalid)
    }

    @Test(arguments: Engine.all) func signatureByAnotherDeviceIsRefused(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, _, aliceDevice) = try await live.client.userWithDevice("alice")
        let (_, bobKey, _) = try await live.client.userWithDevice("bob")
        let challenge = try await live.client.challenge(aliceDevice)
        let reply = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: bobKey))
        #expect(reply.status == 401)
        #expect(reply.problem?.code == .signatureInvalid)
    }

    @Test(arguments: Engine.all) func tamperedLoginPayloadIsRefused(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let challenge = try await live.client.challenge(deviceID)
        let original = try SigningPayload(parsing: challenge.payload)
        let otherServer = try SigningPayload(
            purpose: .login, server: "evil-server", device: deviceID, challenge: original.challenge,
            expires: original.expires, action: nil)
        let reply = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(otherServer.bytes, with: key))
        #expect(reply.status == 401)
    }

    @Test(arguments: Engine.all) func expiredAndReusedChallenges(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let challenge = try await live.client.challenge(deviceID)
        live.clock.advance(by: 61)
        let expired = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: key))
        #expect(expired.status == 410)
        #expect(expired.problem?.code == .challengeExpired)
        // A late attempt does not use the challenge up: it stays expired.
        let again = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: key))
        #expect(again.status == 410)
        let unknown = try await live.client.deviceLogin(
            challengeID: "chl_unknownunknownunknow", signature: Data([1]))
        #expect(unknown.status == 404)
    }

    @Test(arguments: Engine.all) func thirtyTwoConcurrentUsesOfOneChallengeGiveExactlyOneSuccess(
        engine: Engine
    ) async throws {
        let live = try TestServer(engine: engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let challenge = try await live.client.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        let client = live.client
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    try await client.deviceLogin(challengeID: challenge.challengeID, signature: signature)
                        .status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 32)
        #expect(statuses.filter { $0 == 200 }.count == 1)
        #expect(statuses.filter { $0 == 409 }.count == 31)
        #expect(
            try live.database.open().read {
                try $0.queryOne("SELECT COUNT(*) FROM sessions WHERE auth_method = 'device'", [])?.integer(0)
            } == 1)
    }

    @Test(arguments: Engine.all) func revokedDeviceCanNeitherLogInNorApprove(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let pending = try await live.client.challenge(deviceID)
        let deviceSession = try await live.client.deviceLogin(
            challengeID: pending.challengeID, signature: sign(pending.payload, with: key)
        ).decode(TokenResponse.self)
        // The device login replaced the password session of the same client; manage from the web.
        let tokens = try await live.client.login("alice", clientID: "web")
        let approval = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let loginChallenge = try await live.client.challenge(deviceID)

        let revoke = try await live.client.send(
            API.revokeDevice, parameters: [deviceID], token: tokens.accessToken)
        #expect(revoke.status == 204)
        // Its sessions are gone.
        #expect(try await live.client.send(API.me, token: deviceSession.accessToken).status == 401)
        // No new challenge, no login with an outstanding one.
        let challenge = try await live.client.send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
        #expect(challenge.status == 403)
        #expect(challenge.problem?.code == .deviceRevoked)
        let login = try await live.client.deviceLogin(
            challengeID: loginChallenge.challengeID, signature: sign(loginChallenge.payload, with: key))
        #expect(login.status == 403)
        #expect(login.problem?.code == .deviceRevoked)
        // No approval with an outstanding payload, no new approval.
        let confirm = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(signature: sign(approval.payload, with: key)),
            parameters: [approval.approvalID], token: tokens.accessToken)
        #expect(confirm.status == 403)
        #expect(confirm.problem?.code == .deviceRevoked)
        let create = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken)
        #expect(create.status == 403)
        let list = try await live.client.send(API.listDevices, token: tokens.accessToken)
        #expect(try list.decode(DeviceListResponse.self).devices.first?.status == .revoked)
        #expect(
            try await live.client.send(API.revokeDevice, parameters: [deviceID], token: tokens.accessToken)
                .status == 204)
    }

    @Test(arguments: Engine.all) func bindingNeedsARecentPasswordLogin(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let newKey = try P256SigningKey()
        let request = BindDeviceRequest(
            publicKey: newKey.publicKey.spkiDER, name: "Phone", keyProtection: .software)

        // A device-key session is not a password step-up.
        let challenge = try await live.client.challenge(deviceID)
        let deviceSession = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: key)
        ).decode(TokenResponse.self)
        let byDevice = try await live.client.send(API.bindDevice, request, token: deviceSession.accessToken)
        #expect(byDevice.status == 403)
        #expect(byDevice.problem?.code == .stepUpRequired)

        // A password session older than 5 minutes is not either, even after a refresh.
        let tokens = try await live.client.login("alice", clientID: "web")
        #expect(try await live.client.send(API.bindDevice, request, token: tokens.accessToken).status == 201)
        live.clock.advance(by: 301)
        let refreshed = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: tokens.refreshToken)
        ).decode(TokenResponse.self)
        let late = try await live.client.send(API.bindDevice, request, token: refreshed.accessToken)
        #expect(late.status == 403)
        #expect(late.problem?.code == .stepUpRequired)
    }

    /// `GET /v1/me` states the end of the window the server enforces, its own configured one.
    @Test(arguments: Engine.all) func meStatesTheStepUpWindowTheServerEnforces(engine: Engine) async throws {
        let live = try TestServer(engine: engine) { $0.stepUpWindow = 60 }
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        let tokens = try await live.client.login("alice", clientID: "web")
        let me = try await live.client.send(API.me, token: tokens.accessToken).decode(MeResponse.self)
        #expect(me.stepUpExpiresAt == me.authTime.addingTimeInterval(60))
        let request = BindDeviceRequest(
            publicKey: try P256SigningKey().publicKey.spkiDER, name: "Phone", keyProtection: .software)
        live.clock.advance(by: 59)
        #expect(try await live.client.send(API.bindDevice, request, token: tokens.accessToken).status == 201)
        live.clock.advance(by: 1)
        let late = try await live.client.send(API.bindDevice, request, token: tokens.accessToken)
        #expect(late.problem?.code == .stepUpRequired)

        // A device-key session never may: no end to state.
        let challenge = try await live.client.challenge(deviceID)
        let deviceSession = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: key)
        ).decode(TokenResponse.self)
        let byDevice = try await live.client.send(API.me, token: deviceSession.accessToken)
        #expect(try byDevice.decode(MeResponse.self).stepUpExpiresAt == nil)
    }

    @Test(arguments: Engine.all) func newKeyFromTheSameClientRevokesTheOldDevice(engine: Engine) async throws
    {
        let live = try TestServer(engine: engine)
        let (tokens, oldKey, oldDevice) = try await live.client.userWithDevice("alice", clientID: "phone")
        let (_, newDevice) = try await live.client.bindDevice(tokens.accessToken)
        let devices = try await live.client.send(API.listDevices, token: tokens.accessToken)
            .decode(DeviceListResponse.self).devices
        #expect(devices.first { $0.deviceID == oldDevice }?.status == .revoked)
        #expect(devices.first { $0.deviceID == newDevice }?.status == .active)
        #expect(
            try await live.client.send(API.createChallenge, ChallengeRequest(deviceID: oldDevice)).status
                == 403)
        _ = oldKey
        // A device of another client of the same user is untouched.
        let laptop = try await live.client.login("alice", clientID: "laptop")
        let (_, laptopDevice) = try await live.client.bindDevice(laptop.accessToken)
        let all = try await live.client.send(API.listDevices, token: laptop.accessToken)
            .decode(DeviceListResponse.self).devices
        #expect(
            all.filter { $0.status == .active }.map(\.deviceID).sorted()
                == [newDevice, laptopDevice].sorted())
    }

    @Test(arguments: Engine.all) func onlyP256SubjectPublicKeyInfoIsAccepted(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        let key = try P256SigningKey()
        for publicKey in [Data(), Data([0x30, 0x03, 0x02, 0x01, 0x00]), key.publicKey.x963Representation] {
            let reply = try await live.client.send(
                API.bindDevice,
                BindDeviceRequest(publicKey: publicKey, name: "Phone", keyProtection: .software),
                token: tokens.accessToken)
            #expect(reply.status == 400)
            #expect(reply.problem?.code == .invalidPublicKey || reply.problem?.code == .invalidRequest)
        }
    }

    /// A device name is 1–64 code points, as the spec's pattern counts them: 65 code points are
    /// refused even when they make fewer than 64 grapheme clusters.
    @Test func deviceNameLengthCountsCodePoints() async throws {
        let live = try TestServer()
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        let name = String(repeating: "e\u{301}", count: 32) + "e"
        #expect(name.count == 33 && name.unicodeScalars.count == 65)
        let reply = try await live.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: try P256SigningKey().publicKey.spkiDER, name: name, keyProtection: .software),
            token: tokens.accessToken)
        #expect(reply.status == 400)
        #expect(reply.problem?.code == .invalidRequest)
    }

    @Test(arguments: Engine.all) func anotherUsersDeviceIsNotFound(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (_, _, aliceDevice) = try await live.client.userWithDevice("alice")
        let (bob, _, _) = try await live.client.userWithDevice("bob")
        #expect(
            try await live.client.send(API.revokeDevice, parameters: [aliceDevice], token: bob.accessToken)
                .status == 404)
        let approval = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: aliceDevice, action: transfer()),
            token: bob.accessToken)
        #expect(approval.status == 404)
    }
}

/// Enumerated values are snake_case on the wire like member names, and in storage, which holds
/// the wire value.
@Suite("snake_case enumerated values")
struct SnakeCaseValueTests {
    @Test(arguments: Engine.all) func keyProtectionIsSnakeCaseOnTheWire(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        let key = Base64URL.encode(try P256SigningKey().publicKey.spkiDER)
        func bind(_ protection: String) async throws -> Reply {
            let body = #"{"public_key":"\#(key)","name":"Phone","key_protection":"\#(protection)"}"#
            return try await live.client.send(
                API.bindDevice, raw: Data(body.utf8), token: tokens.accessToken)
        }
        #expect(try await bind("secureEnclave").problem?.code == .invalidRequest)
        #expect(try await bind("secure_enclave").status == 201)
        let list = try await live.client.send(API.listDevices, token: tokens.accessToken)
        #expect(list.text.contains(#""key_protection":"secure_enclave""#))
        #expect(try list.decode(DeviceListResponse.self).devices.map(\.keyProtection) == [.secureEnclave])
    }

    /// Migration 5 rewrites the camelCase value servers stored before.
    @Test(arguments: Engine.all) func migrationRewritesStoredValues(engine: Engine) async throws {
        let old = try InProcessApplication(engine)
        _ = try old.userWithDevice("alice")
        // The database as an older server left it: the old spelling, migration 5 not applied.
        try old.application.database.write { connection in
            try connection.execute("UPDATE devices SET key_protection = 'secureEnclave'", [])
            try connection.execute("DELETE FROM schema_migrations WHERE version = 5", [])
        }
        let upgraded = try Application(configuration: old.database.configuration)
        let stored = try upgraded.database.read { try $0.query("SELECT key_protection FROM devices", []) }
        #expect(stored.map(\.values) == [[.text("secure_enclave")]])
    }
}
