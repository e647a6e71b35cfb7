import Foundation
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Sessions and refresh tokens")
struct SessionTests {
    @Test(arguments: Engine.all) func refreshRotatesAndReuseRevokesTheFamily(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let first = try await live.client.login("alice")

        let rotated = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: first.refreshToken))
        #expect(rotated.status == 200)
        let second = try rotated.decode(TokenResponse.self)
        #expect(second.sessionID == first.sessionID)
        #expect(second.refreshToken != first.refreshToken)
        #expect(try await live.client.send(API.me, token: second.accessToken).status == 200)

        // The old refresh token is replayed (an attacker's copy): the whole family dies.
        let replay = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: first.refreshToken))
        #expect(replay.status == 401)
        #expect(replay.problem?.code == .tokenInvalid)
        #expect(try await live.client.send(API.me, token: second.accessToken).status == 401)
        let newest = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: second.refreshToken))
        #expect(newest.status == 401)

        let audit = try await live.client.send(
            API.audit, token: try await live.client.login("alice").accessToken)
        #expect(try audit.decode(AuditListResponse.self).events.contains { $0.type == .refreshReuse })
    }

    @Test(arguments: Engine.all) func accessTokenExpires(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        live.clock.advance(by: 15 * 60 + 1)
        #expect(try await live.client.send(API.me, token: tokens.accessToken).status == 401)
        let refreshed = try await live.client.send(
            API.refresh, RefreshRequest(refreshToken: tokens.refreshToken))
        #expect(refreshed.status == 200)
    }

    @Test(arguments: Engine.all) func newLoginFromSameClientEndsThePreviousSession(engine: Engine)
        async throws
    {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let phone = try await live.client.login("alice", clientID: "phone")
        let laptop = try await live.client.login("alice", clientID: "laptop")
        let phoneAgain = try await live.client.login("alice", clientID: "phone")
        #expect(try await live.client.send(API.me, token: phone.accessToken).status == 401)
        #expect(try await live.client.send(API.me, token: laptop.accessToken).status == 200)
        #expect(try await live.client.send(API.me, token: phoneAgain.accessToken).status == 200)
    }

    @Test(arguments: Engine.all) func singleSessionEndsAllOtherSessions(engine: Engine) async throws {
        let live = try TestServer(engine: engine) { $0.singleSession = true }
        try await live.client.createAccount("alice")
        let phone = try await live.client.login("alice", clientID: "phone")
        let laptop = try await live.client.login("alice", clientID: "laptop")
        #expect(try await live.client.send(API.me, token: phone.accessToken).status == 401)
        #expect(try await live.client.send(API.me, token: laptop.accessToken).status == 200)
    }

    @Test(arguments: Engine.all) func badBearerHeaders(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        for token in [nil, "nonsense", String(repeating: "A", count: 43)] as [String?] {
            let reply = try await live.client.send(API.me, token: token)
            #expect(reply.status == 401)
            #expect(reply.problem?.code == .tokenInvalid)
        }
    }
}
