import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Races over real HTTP against a live server, each ending in exactly the outcome
/// docs/design.md promises ("Server security requirements", "Storage and the write path"). No
/// test depends on which request wins; each asserts what must hold whichever does.
///
/// Each race runs on every engine: on SQLite against its one server, on PostgreSQL across two
/// instances on one database, the concurrent requests alternating between them, so that the
/// outcome rests on the database's isolation and not on one process's locks.
@Suite("Races")
struct RaceTests {
    static let contenders = 32

    /// The servers of a race: one on SQLite, two on one PostgreSQL database.
    private static func servers(
        _ engine: Engine, _ adjust: (inout Configuration) -> Void = { _ in }
    ) throws -> TestServer {
        try TestServer(engine: engine, instances: engine == .postgres ? 2 : 1, adjust)
    }

    /// Runs `body` for `0..<count` at once, request `index` sent to instance `index` modulo their
    /// number, and collects the replies, in index order.
    ///
    /// A request answered 503 "busy" is sent again, as the API tells clients to (`Retry-After`):
    /// on PostgreSQL a transaction that keeps losing to concurrent ones on the same rows runs out
    /// of retries (or a request waits too long for a pooled connection) when the machine is
    /// loaded, and it committed nothing. The outcome asserted is the one after the retries; how
    /// many there were is printed.
    private static func together(
        _ count: Int, over live: TestServer, _ body: @escaping @Sendable (Client, Int) async throws -> Reply
    ) async throws -> [Reply] {
        let clients = live.clients
        let retried = Locked(0)
        let replies = try await withThrowingTaskGroup(of: (Int, Reply).self) { group in
            for index in 0..<count {
                group.addTask {
                    let client = clients[index % clients.count]
                    var reply = try await body(client, index)
                    for _ in 0..<20 where reply.status == 503 && reply.problem?.code == .unavailable {
                        retried.withLock { $0 += 1 }
                        try await Task.sleep(nanoseconds: 100_000_000)
                        reply = try await body(client, index)
                    }
                    return (index, reply)
                }
            }
            return try await group.reduce(into: [(Int, Reply)]()) { $0.append($1) }
                .sorted { $0.0 < $1.0 }.map(\.1)
        }
        if retried.withLock({ $0 }) > 0 {
            print(
                "races on \(live.database.engine): \(retried.withLock { $0 }) busy replies (503) sent again")
        }
        return replies
    }

    /// Unexpected replies, with the servers' warnings and errors (an internal error is logged,
    /// never sent).
    private static func explain(_ replies: [Reply], _ live: TestServer) -> String {
        let logged = live.logs.all.filter {
            $0.contains(#""level":"warning""#) || $0.contains(#""level":"error""#)
        }
        return "\(replies.map { "\($0.status) \($0.text)" }); logged: \(logged.suffix(10))"
    }

    /// The rows `sql` counts in the live servers' database (read beside them).
    private static func count(_ live: TestServer, _ sql: String) throws -> Int64 {
        let database = try live.database.open()
        return try database.read { try $0.queryOne(sql, [])?.integer(0) } ?? -1
    }

    /// RFC 9700 §4.14.2 as the design states it: a refresh token rotates on use, and presenting a
    /// used one revokes the whole session. N simultaneous uses of one token: the first rotates it
    /// (the one new pair), every other one presents a used token, is refused, and ends the family
    /// — the winner's new pair included, since the server cannot tell the thief from the owner.
    @Test(arguments: Engine.all)
    func concurrentRefreshesOfOneTokenRotateOnceAndEndTheFamily(engine: Engine) async throws {
        let live = try Self.servers(engine)
        try await live.client.createAccount("alice")
        let tokens = try await live.client.login("alice")
        let client = live.client
        let replies = try await Self.together(Self.contenders, over: live) { client, _ in
            try await client.send(API.refresh, RefreshRequest(refreshToken: tokens.refreshToken))
        }
        let winners = replies.filter { $0.status == 200 }
        #expect(winners.count == 1)
        #expect(
            replies.filter { $0.status == 401 && $0.problem?.code == .tokenInvalid }.count
                == Self.contenders - 1)
        let pair = try #require(try winners.first?.decode(TokenResponse.self))
        #expect(pair.sessionID == tokens.sessionID)
        // The family is over: the new pair, the old access token, the new refresh token.
        #expect(try await client.send(API.me, token: pair.accessToken).status == 401)
        #expect(try await client.send(API.me, token: tokens.accessToken).status == 401)
        let again = try await client.send(
            API.refresh, RefreshRequest(refreshToken: pair.refreshToken))
        #expect(again.status == 401)
        // One rotation: the session holds the login's pair and exactly one more.
        #expect(
            try Self.count(live, "SELECT COUNT(*) FROM tokens WHERE kind = 'refresh'") == 2)
        #expect(
            try Self.count(
                live,
                "SELECT COUNT(*) FROM sessions WHERE revoked_at IS NOT NULL AND revoke_reason = 'refresh_reuse'"
            )
                == 1)
        // The reuse is in the user's history (folded into one event or not, at least one).
        let fresh = try await client.login("alice", clientID: "web")
        let audit = try await client.send(API.audit, token: fresh.accessToken).decode(AuditListResponse.self)
        #expect(audit.events.contains { $0.type == .refreshReuse })
    }

    /// An approval is single-use: of N simultaneous confirmations exactly one decides it.
    @Test(arguments: Engine.all)
    func concurrentConfirmationsOfOneApprovalDecideOnce(engine: Engine) async throws {
        let live = try Self.servers(engine)
        let (_, key, deviceID) = try await live.client.userWithDevice("alice")
        // The device's client is the one that asks; manage from the web session.
        let tokens = try await live.client.login("alice", clientID: "web")
        let approval = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let confirmation = ConfirmApprovalRequest(signature: try sign(approval.payload, with: key))
        let replies = try await Self.together(Self.contenders, over: live) { client, _ in
            try await client.send(
                API.confirmApproval, confirmation, parameters: [approval.approvalID],
                token: tokens.accessToken)
        }
        #expect(replies.filter { $0.status == 200 }.count == 1)
        #expect(
            replies.filter { $0.status == 409 && $0.problem?.code == .challengeUsed }.count
                == Self.contenders - 1)
        let status = try await live.client.send(
            API.approvalStatus, parameters: [approval.approvalID], token: tokens.accessToken
        )
        .decode(ApprovalResponse.self)
        #expect(status.status == .approved)
        #expect(
            try Self.count(live, "SELECT COUNT(*) FROM audit_events WHERE type = 'approval_confirmed'") == 1)
    }

    /// Revoking a device while it logs in: once the revocation is acknowledged no login with the
    /// device succeeds, and every session it opened before is ended (docs/design.md: "revoke
    /// (ends the sessions it opened)"). Several rounds, so that logins land on both sides.
    @Test(arguments: Engine.all)
    func deviceRevocationRacingLoginsLeavesNoLiveSessionOfTheDevice(engine: Engine) async throws {
        let live = try Self.servers(engine)
        let client = live.client
        var wonBefore = 0
        for round in 0..<6 {
            let (_, key, deviceID) = try await client.userWithDevice("alice\(round)")
            let manager = try await client.login("alice\(round)", clientID: "web")
            var signed: [(String, Data)] = []
            for _ in 0..<Self.contenders {
                let challenge = try await client.challenge(deviceID)
                signed.append((challenge.challengeID, try sign(challenge.payload, with: key)))
            }
            let logins = signed
            let replies = try await Self.together(Self.contenders + 1, over: live) { client, index in
                // The revocation starts in the middle of the logins.
                if index == Self.contenders / 2 {
                    return try await client.send(
                        API.revokeDevice, parameters: [deviceID], token: manager.accessToken)
                }
                let (challengeID, signature) = logins[index < Self.contenders / 2 ? index : index - 1]
                return try await client.deviceLogin(challengeID: challengeID, signature: signature)
            }
            let revocation = replies[Self.contenders / 2]
            #expect(revocation.status == 204)
            let loginReplies = replies.enumerated().filter { $0.offset != Self.contenders / 2 }.map(\.element)
            let won = loginReplies.filter { $0.status == 200 }
            wonBefore += won.count
            // Every login either opened a session before the revocation or was refused for it.
            let neither = loginReplies.filter {
                $0.status != 200 && !($0.status == 403 && $0.problem?.code == .deviceRevoked)
            }
            #expect(neither.isEmpty, "\(Self.explain(neither, live))")
            // Acknowledged: every session the device opened is over, none of them still works…
            for reply in won {
                let session = try reply.decode(TokenResponse.self)
                #expect(try await client.send(API.me, token: session.accessToken).status == 401)
                let refresh = try await client.send(
                    API.refresh, RefreshRequest(refreshToken: session.refreshToken))
                #expect(refresh.status == 401)
            }
            #expect(
                try Self.count(
                    live,
                    "SELECT COUNT(*) FROM sessions WHERE device_id = '\(deviceID)' AND revoked_at IS NULL")
                    == 0)
            // …and no login after it succeeds.
            let late = try await client.deviceLogin(challengeID: signed[0].0, signature: signed[0].1)
            #expect(late.status != 200)
            #expect(
                try await client.send(API.createChallenge, ChallengeRequest(deviceID: deviceID)).status == 403
            )
        }
        print(
            "device revocation races on \(engine), \(live.servers.count) instance(s): \(wonBefore) of \(6 * Self.contenders) logins won before the revocation"
        )
    }

    /// A /v1 login replaces its client's session: N simultaneous logins of one device, each with
    /// a challenge of its own, all succeed, and exactly one of their sessions is left, every other
    /// one ended as `replaced` with a `session.revoked` event (a login writes its session before
    /// it ends the others, so no two of them may end each other or both survive).
    @Test(arguments: Engine.all)
    func concurrentLoginsOfOneDeviceLeaveExactlyOneLiveSession(engine: Engine) async throws {
        let live = try Self.servers(engine)
        let client = live.client
        let (_, key, deviceID) = try await client.userWithDevice("alice")
        // An endpoint that takes session.revoked (its deliveries fail: nothing listens there).
        _ = try WebhookAdministration(configuration: live.server.configuration).add(
            url: "https://93.184.215.14/hook", events: ["session.revoked"])
        let replacedOfClient = """
            SELECT COUNT(*) FROM sessions s JOIN devices d ON d.id = '\(deviceID)'
            WHERE s.user_id = d.user_id AND s.client_id = d.client_id AND s.revoke_reason = 'replaced'
            """
        let replacedBefore = try Self.count(live, replacedOfClient)
        var signed: [(String, Data)] = []
        for _ in 0..<Self.contenders {
            let challenge = try await client.challenge(deviceID)
            signed.append((challenge.challengeID, try sign(challenge.payload, with: key)))
        }
        let logins = signed
        let replies = try await Self.together(Self.contenders, over: live) { client, index in
            try await client.deviceLogin(challengeID: logins[index].0, signature: logins[index].1)
        }
        #expect(replies.allSatisfy { $0.status == 200 }, "\(Self.explain(replies, live))")
        let sessions = try replies.map { try $0.decode(TokenResponse.self) }
        var working: [String] = []
        for session in sessions where try await client.send(API.me, token: session.accessToken).status == 200
        {
            working.append(session.sessionID)
        }
        #expect(working.count == 1)
        let liveOfDevice = try Self.count(
            live, "SELECT COUNT(*) FROM sessions WHERE device_id = '\(deviceID)' AND revoked_at IS NULL")
        #expect(liveOfDevice == 1)
        // Every login but one was replaced, and each replacement is an event: those and the
        // session of the client's login before them.
        let replaced = try Self.count(
            live,
            "SELECT COUNT(*) FROM sessions WHERE device_id = '\(deviceID)' AND revoke_reason = 'replaced'")
        #expect(replaced == Int64(Self.contenders - 1))
        let events = try Self.count(
            live, "SELECT COUNT(*) FROM webhook_messages WHERE type = 'session.revoked'")
        #expect(events == (try Self.count(live, replacedOfClient)) - replacedBefore)
        #expect(events >= Int64(Self.contenders - 1))
    }

    /// A revocation wins (docs/server.md, "Several hosts, standbys and failover"): sent once,
    /// never resent, it succeeds while 64 clients keep logging in with the same device (each a
    /// new challenge, signed, then the login, over and over), however many of those logins the
    /// database must order against it; once it is answered no login succeeds.
    @Test(arguments: Engine.all)
    func aRevocationSentOnceWinsAgainst64ConcurrentLogins(engine: Engine) async throws {
        let live = try Self.servers(engine)
        let client = live.client
        for round in 0..<3 {
            let (_, key, deviceID) = try await client.userWithDevice("bob\(round)")
            let manager = try await client.login("bob\(round)", clientID: "web")
            let clients = live.clients
            let revoked = Locked(false)
            let replies = try await withThrowingTaskGroup(of: (Bool, [Reply]).self) { group in
                for index in 0..<64 {
                    group.addTask {
                        let client = clients[index % clients.count]
                        var replies: [Reply] = []
                        // Until the revocation is answered, and one more after it.
                        while replies.count < 200 {
                            let after = revoked.withLock { $0 }
                            let challenge = try await client.send(
                                API.createChallenge, ChallengeRequest(deviceID: deviceID))
                            guard challenge.status == 201 else {
                                replies.append(challenge)
                                if after { break } else { continue }
                            }
                            let issued = try challenge.decode(ChallengeResponse.self)
                            replies.append(
                                try await client.deviceLogin(
                                    challengeID: issued.challengeID,
                                    signature: try sign(issued.payload, with: key)))
                            if after { break }
                        }
                        return (false, replies)
                    }
                }
                group.addTask {
                    try await Task.sleep(nanoseconds: 300_000_000)
                    let revoke = try await clients[clients.count - 1].send(
                        API.revokeDevice, parameters: [deviceID], token: manager.accessToken)
                    revoked.withLock { $0 = true }
                    return (true, [revoke])
                }
                return try await group.reduce(into: [(Bool, [Reply])]()) { $0.append($1) }
            }
            let reply = try #require(replies.first { $0.0 }?.1.first)
            #expect(reply.status == 204, "round \(round): \(Self.explain([reply], live))")
            let logins = replies.filter { !$0.0 }.map(\.1)
            // What each client sent after the revocation was answered was refused.
            for sent in logins {
                #expect(sent.last?.status == 403, "\(sent.last.map { "\($0.status) \($0.text)" } ?? "none")")
            }
            let won = logins.flatMap { $0 }.filter { $0.status == 200 }.count
            let busy = logins.flatMap { $0 }.filter { $0.status == 503 }.count
            print(
                "revocation race on \(engine), round \(round): \(won) logins before it, \(busy) answered 503")
            #expect(
                try Self.count(
                    live,
                    "SELECT COUNT(*) FROM sessions WHERE device_id = '\(deviceID)' AND revoked_at IS NULL")
                    == 0)
        }
    }

    /// Removing a passkey while it signs in: once the removal is acknowledged no login with it
    /// succeeds, and every session it opened is ended (docs/openapi.yaml, DELETE /v1/passkeys/{id}).
    @Test(arguments: Engine.all)
    func passkeyRemovalRacingLoginsLeavesNoLiveSessionOfThePasskey(engine: Engine) async throws {
        // One origin for every instance (each would otherwise allow only its own port's).
        let live = try Self.servers(engine) { $0.origins = ["http://localhost"] }
        let client = live.client
        var wonBefore = 0
        for round in 0..<6 {
            let first = try PasskeyTests.authenticator(for: live)
            let signUp = try #require(try await client.passkeySignUp("bob\(round)", first).tokens)
            // A second passkey, so that the first is not the account's last way in.
            let second = try PasskeyTests.authenticator(for: live)
            let creation = try await client.registrationOptions(
                PasskeyRegistrationOptionsRequest(username: nil), token: signUp.accessToken)
            let added = try await client.send(
                API.passkeyRegistrationVerify,
                raw: second.registration(challenge: creation.challenge),
                token: signUp.accessToken)
            #expect(added.status == 200, "\(added.text)")
            let manager = try await client.passkeyLogin(
                second.assertion(
                    challenge: try await client.loginOptions(username: Username("bob\(round)")).challenge,
                    signCount: 0)
            ).decode(PasskeyLoginResult.self).tokens
            let passkeys = try await client.send(API.listPasskeys, token: manager.accessToken)
                .decode(PasskeyListResponse.self).passkeys
            let passkeyID = try #require(passkeys.first { $0.credentialID == first.credentialId }).passkeyID

            var bodies: [Data] = []
            for _ in 0..<Self.contenders {
                let options = try await client.loginOptions(username: Username("bob\(round)"))
                // Counter 0 throughout: an authenticator without a counter, so concurrent logins
                // never look like a clone to each other.
                bodies.append(try first.assertion(challenge: options.challenge, signCount: 0))
            }
            let logins = bodies
            let replies = try await Self.together(Self.contenders + 1, over: live) { client, index in
                if index == Self.contenders / 2 {
                    return try await client.send(
                        API.removePasskey, parameters: [passkeyID], token: manager.accessToken)
                }
                return try await client.passkeyLogin(logins[index < Self.contenders / 2 ? index : index - 1])
            }
            #expect(replies[Self.contenders / 2].status == 204)
            let loginReplies = replies.enumerated().filter { $0.offset != Self.contenders / 2 }.map(\.element)
            let won = loginReplies.filter { $0.status == 200 }
            wonBefore += won.count
            // Every login either opened a session before the removal or was refused for it.
            let neither = loginReplies.filter {
                $0.status != 200 && !($0.status == 401 && $0.problem?.code == .unknownCredential)
            }
            #expect(neither.isEmpty, "\(Self.explain(neither, live))")
            for reply in won {
                let session = try reply.decode(PasskeyLoginResult.self).tokens
                #expect(try await client.send(API.me, token: session.accessToken).status == 401)
            }
            #expect(
                try Self.count(
                    live,
                    "SELECT COUNT(*) FROM sessions WHERE passkey_id = '\(passkeyID)' AND revoked_at IS NULL")
                    == 0)
            let late = try await client.passkeyLogin(
                first.assertion(
                    challenge: try await client.loginOptions(username: Username("bob\(round)")).challenge,
                    signCount: 0))
            #expect(late.status == 401)
            // The other passkey's session is untouched.
            #expect(try await client.send(API.me, token: manager.accessToken).status == 200)
        }
        print(
            "passkey removal races on \(engine), \(live.servers.count) instance(s): \(wonBefore) of "
                + "\(6 * Self.contenders) logins won before the removal")
    }
}
