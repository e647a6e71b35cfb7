import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Passkey challenges are stateless (``PasskeyChallenge``): asking for options writes nothing and
/// tells nothing about the account named, and whatever piles up is purged in small batches.
@Suite("Passkey challenges and housekeeping")
struct PasskeyChallengeTests {
    static let key = Data(repeating: 7, count: 32)

    @Test(
        "a challenge reads back as issued; any changed byte, another server or key, or a cut makes it unknown"
    )
    func challengesAreAuthenticated() throws {
        let challenge = try PasskeyChallenge(
            purpose: .register, expires: Date(timeIntervalSince1970: 1_800_000_000), userID: "usr_1",
            username: "alice",
            sessionID: "ses_2",
            clientID: "web:1", server: "keybound", key: Self.key)
        let read = try #require(PasskeyChallenge(bytes: challenge.bytes, server: "keybound", key: Self.key))
        #expect(read == challenge)
        #expect(read.purpose == .register && read.expiresAt == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(read.userID == "usr_1" && read.username == "alice" && read.sessionID == "ses_2")
        #expect(read.clientID == "web:1")

        let login = try PasskeyChallenge(
            purpose: .login, expires: Date(timeIntervalSince1970: 1), userID: nil, username: nil,
            sessionID: nil, clientID: "c",
            server: "keybound", key: Self.key)
        let readLogin = try #require(PasskeyChallenge(bytes: login.bytes, server: "keybound", key: Self.key))
        #expect(readLogin.userID == nil && readLogin.username == nil && readLogin.sessionID == nil)
        #expect(login.usedID != challenge.usedID && login.usedID.hasPrefix("pkc_"))

        for index in challenge.bytes.indices {
            var changed = challenge.bytes
            changed[index] ^= 0x01
            #expect(
                PasskeyChallenge(bytes: changed, server: "keybound", key: Self.key) == nil, "byte \(index)")
        }
        #expect(PasskeyChallenge(bytes: challenge.bytes, server: "other", key: Self.key) == nil)
        #expect(PasskeyChallenge(bytes: challenge.bytes, server: "keybound", key: Data(count: 32)) == nil)
        for length in [0, 1, 26, 30, challenge.bytes.count - 1] {
            #expect(
                PasskeyChallenge(bytes: challenge.bytes.prefix(length), server: "keybound", key: Self.key)
                    == nil)
        }
        #expect(
            PasskeyChallenge(bytes: challenge.bytes + Data([0]), server: "keybound", key: Self.key) == nil)
        // A device-login challenge's tag under the same key is no passkey challenge.
        let device = try LoginChallenge(
            deviceID: "dev_1", expires: Date(timeIntervalSince1970: 1), server: "keybound", key: Self.key)
        let deviceBytes = try #require(Base64URL.decode(String(device.id.dropFirst(4))))
        #expect(PasskeyChallenge(bytes: deviceBytes, server: "keybound", key: Self.key) == nil)
    }

    @Test(
        "asking for login options, with a username or without, adds no row to the database",
        arguments: Engine.all)
    func loginOptionsWriteNothing(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let alice = try PasskeyTests.authenticator(for: live)
        _ = try await live.client.passkeySignUp("alice", alice)
        // The sign-up's login is counted for the console: written now, not by the timer meanwhile.
        live.server.flushTrafficCounts()
        let before = try live.database.rowCounts()
        for index in 0..<60 {
            let username: Username? = [nil, "alice", try Username("nobody\(index)")][index % 3]
            _ = try await live.client.loginOptions(username: username)
        }
        #expect(try live.database.rowCounts() == before)
        // Those challenges still work, once.
        let options = try await live.client.loginOptions(username: "alice")
        let assertion = try alice.assertion(challenge: options.challenge, signCount: 1)
        #expect(try await live.client.passkeyLogin(assertion).status == 200)
        try await expectProblem(live.client.passkeyLogin(assertion), 409, .challengeUsed)
    }

    @Test(
        "login options for an account with passkeys and for an unknown name are alike but for the challenge")
    func loginOptionsAreNoOracle() async throws {
        let live = try TestServer()
        let alice = try PasskeyTests.authenticator(for: live)
        _ = try await live.client.passkeySignUp("alice", alice)
        let known = try await live.client.send(
            API.passkeyLoginOptions, PasskeyLoginOptionsRequest(username: "alice"))
        let unknown = try await live.client.send(
            API.passkeyLoginOptions, PasskeyLoginOptionsRequest(username: "zelda"))
        #expect(known.status == 200 && unknown.status == 200)
        #expect(
            !known.text.contains("allowCredentials")
                && !known.text.contains(Base64URL.encode(alice.credentialId)))
        func withoutChallenge(_ reply: Reply) throws -> JSONValue {
            guard case .object(var top) = try JSON.parse(reply.body), case .object(var options) = top[0].value
            else { throw TestFailure("not options: \(reply.text)") }
            options.removeAll { $0.name == "challenge" }
            top[0].value = .object(options)
            return .object(top)
        }
        #expect(try withoutChallenge(known) == withoutChallenge(unknown))
        let knownOptions = try known.decode(PasskeyRequestOptions.self)
        let unknownOptions = try unknown.decode(PasskeyRequestOptions.self)
        #expect(knownOptions.challenge.count == unknownOptions.challenge.count)
        // The named user stays the only one whose passkey may answer.
        try await expectProblem(
            live.client.passkeyLogin(alice.assertion(challenge: unknownOptions.challenge)), 401,
            .credentialMismatch)
        #expect(
            try await live.client.passkeyLogin(alice.assertion(challenge: knownOptions.challenge)).status
                == 200)
    }

    @Test(
        "a challenge is refused once expired, for another ceremony, or changed in one byte",
        arguments: Engine.all)
    func challengeRefusals(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let alice = try PasskeyTests.authenticator(for: live)
        _ = try await live.client.passkeySignUp("alice", alice)
        var changed = try await live.client.loginOptions(username: "alice").challenge
        changed[changed.count / 2] ^= 0x20
        try await expectProblem(
            live.client.passkeyLogin(alice.assertion(challenge: changed)), 401, .challengeMismatch)
        let registration = try await live.client.registrationOptions(.init(username: "bob"))
        try await expectProblem(
            live.client.passkeyLogin(alice.assertion(challenge: registration.challenge)), 401,
            .challengeMismatch)
        let login = try await live.client.loginOptions()
        try await expectProblem(
            live.client.send(
                API.passkeyRegistrationVerify,
                raw: try PasskeyTests.authenticator(for: live).registration(challenge: login.challenge)),
            400, .challengeMismatch)
        let late = try await live.client.loginOptions(username: "alice")
        live.clock.advance(by: 301)
        try await expectProblem(
            live.client.passkeyLogin(alice.assertion(challenge: late.challenge)), 410, .challengeExpired)
    }

    @Test("housekeeping deletes what piled up in transactions of at most a batch each", arguments: Engine.all)
    func purgeRunsInBatches(engine: Engine) throws {
        let counter = WriteCounter()
        let app = try InProcessApplication(engine, wrapping: counter.wrap)
        let batch = Application.purgeBatchSize
        let now = Int64(app.clock.now.timeIntervalSince1970 * 1000)
        // 2.5 batches of used challenges that expired over an hour ago, and 3.5 batches of
        // sessions ended long ago, each with six tokens still unexpired (so a batch of sessions
        // has more tokens than a batch), written straight into the tables.
        try app.application.database.write { connection in
            try connection.execute(
                "INSERT INTO users (id, username, password_hash, created_at) VALUES ('usr_1', 'alice', '', 0)",
                [])
            for index in 0..<(batch * 5 / 2) {
                try connection.execute(
                    "INSERT INTO used_challenges (id, expires_at) VALUES (?, ?)",
                    [.text("chl_\(index)"), .integer(now - 4_000_000)])
            }
            for index in 0..<(Application.purgeSessionBatchSize * 7 / 2) {
                try connection.execute(
                    """
                    INSERT INTO sessions (id, user_id, client_id, auth_method, auth_time, created_at, revoked_at)
                    VALUES (?, 'usr_1', 'c', 'password', 0, 0, 1)
                    """, [.text("ses_\(index)")])
                for token in 0..<6 {
                    try connection.execute(
                        "INSERT INTO tokens (hash, session_id, kind, expires_at) VALUES (?, ?, ?, ?)",
                        [
                            .text("tok_\(index)_\(token)"), .text("ses_\(index)"),
                            .text(token % 2 == 0 ? "access" : "refresh"), .integer(now + 86_400_000),
                        ])
                }
            }
        }
        #expect(
            try app.count("SELECT COUNT(*) FROM sessions") == Int64(Application.purgeSessionBatchSize * 7 / 2)
        )
        counter.reset()
        let report = app.application.purgeExpired()
        #expect(try app.count("SELECT COUNT(*) FROM used_challenges") == 0)
        #expect(try app.count("SELECT COUNT(*) FROM sessions") == 0)
        #expect(try app.count("SELECT COUNT(*) FROM tokens") == 0)
        let expected = batch * 5 / 2 + Application.purgeSessionBatchSize * 7 / 2 * 7
        #expect(report.rowsDeleted == expected)
        #expect(counter.changedRows.reduce(0, +) == expected)
        #expect(counter.changedRows.count == report.batches)
        // No transaction deleted more than a batch of rows of one table (a session batch deletes
        // at most a batch of tokens and its sessions beside them).
        #expect(
            counter.changedRows.max() ?? 0 <= batch + Application.purgeSessionBatchSize,
            "\(counter.changedRows)")
        // Used challenges: 3 batches; sessions: 3 batches of 100 (600 tokens) in 2 writes each, and
        // the last 50 (300 tokens) in one.
        #expect(counter.changedRows.filter { $0 > 0 }.count == 3 + 3 * 2 + 1, "\(counter.changedRows)")
    }
}

/// A database wrapper that counts the rows each write transaction changed.
final class WriteCounter: Sendable {
    private let counts = Locked<[Int]>([])

    var changedRows: [Int] { counts.withLock { $0 } }
    func reset() { counts.withLock { $0 = [] } }

    func wrap(_ database: any Database) -> any Database { Counted(base: database, counter: self) }

    fileprivate func record(_ rows: Int) { counts.withLock { $0.append(rows) } }

    private struct Counted: DatabaseWrapper {
        let base: any Database
        let counter: WriteCounter

        func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
            var changed = 0
            let result = try base.write { connection in
                try body(CountingConnection(base: connection) { changed += $0 })
            }
            counter.record(changed)
            return result
        }
        func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }
        func migrate<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.migrate(body) }
        var readsInProcess: Bool { base.readsInProcess }
    }

    private final class CountingConnection: SQLConnection {
        let base: any SQLConnection
        let changed: (Int) -> Void

        init(base: any SQLConnection, changed: @escaping (Int) -> Void) {
            self.base = base
            self.changed = changed
        }

        func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
            try base.query(sql, parameters)
        }
        func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
            let rows = try base.execute(sql, parameters)
            changed(rows)
            return rows
        }
    }
}

extension TestDatabase {
    /// The number of rows in every table of the server's schema, by table name.
    func rowCounts() throws -> [String: Int64] {
        let listing =
            engine == .sqlite
            ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            : "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        return try open().read { connection in
            var counts: [String: Int64] = [:]
            for row in try connection.query(listing, []) {
                let table = try row.text(0)
                counts[table] = try connection.queryOne("SELECT COUNT(*) FROM \(table)", [])?.integer(0)
            }
            return counts
        }
    }
}
