import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Abuse that costs the server nothing (issue 10, item 5): requests with random or forged
/// tokens and ids change no row and start no write transaction. Tokens and ids are 256 and 128
/// random bits: nobody guesses one, so refusing them proves nothing new, and the design counts no
/// throttle and writes no audit row for them (docs/server.md, "Audit": "A refusal that proves
/// nothing new writes nothing"). Wrong passwords and bad signatures are another matter: they are
/// counted per address and account or device, which is a write by design (see ThrottlingTests).
@Suite("Invalid tokens")
struct InvalidTokenTests {
    /// The real database, counting the write transactions it is asked for.
    private final class CountingDatabase: DatabaseWrapper {
        let base: any Database
        private let count = Locked(0)
        var writes: Int { count.withLock { $0 } }

        init(_ base: any Database) { self.base = base }

        func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
            count.withLock { $0 += 1 }
            return try base.write(body)
        }

        func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }

        var readsInProcess: Bool { base.readsInProcess }
    }

    /// Every row of every table, in a stable order.
    private static func contents(_ app: InProcessApplication) throws -> [String: [[SQLValue]]] {
        let tables = try app.rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        var contents: [String: [[SQLValue]]] = [:]
        for case .text(let table) in tables.map({ $0[0] }) {
            contents[table] = try app.rows("SELECT * FROM \"\(table)\" ORDER BY 1")
        }
        return contents
    }

    /// A token shaped like the server's (32 random bytes, base64url), which the server never issued.
    private static func randomToken() -> String { Base64URL.encode(SecureRandomBytes.bytes(32)) }

    @Test func tenThousandRandomTokensAndForgedIdsWriteNothing() throws {
        var counter: CountingDatabase?
        let app = try InProcessApplication(wrapping: { base in
            let counting = CountingDatabase(base)
            counter = counting
            return counting
        })
        let database = try #require(counter)
        // Alice has a session, a device, a pending approval; Bob has an approval of his own.
        let (aliceKey, aliceDevice) = try app.userWithDevice("alice")
        let alice = try TokenResponse(jsonData: app.login("alice", Client.password).body)
        let (_, bobDevice) = try app.userWithDevice("bob")
        let bob = try TokenResponse(jsonData: app.login("bob", Client.password).body)
        func approval(_ device: String, _ token: String) throws -> ApprovalChallengeResponse {
            let reply = app.send(
                API.createApproval,
                CreateApprovalRequest(deviceID: device, action: try transfer()), token: token)
            return try ApprovalChallengeResponse(jsonData: reply.body)
        }
        let aliceIssued = try approval(aliceDevice, alice.accessToken)
        let (aliceApproval, alicePayload) = (aliceIssued.approvalID, aliceIssued.payload)
        let bobApproval = try approval(bobDevice, bob.accessToken).approvalID
        let challenge = try app.challenge(aliceDevice)
        let signature = try sign(challenge.payload, with: aliceKey)

        let before = try Self.contents(app)
        let writesBefore = database.writes
        // Every bearer operation, with a random token: 401.
        let bearerOperations: [(any EndpointDescription, [String], Data)] = [
            (API.me, [], Data()), (API.logout, [], Data()),
            (
                API.bindDevice, [],
                BindDeviceRequest(
                    publicKey: try P256SigningKey().publicKey.spkiDER, name: "Phone", keyProtection: .emulator
                ).jsonData
            ),
            (API.listDevices, [], Data()), (API.revokeDevice, [aliceDevice], Data()),
            (
                API.createApproval, [],
                CreateApprovalRequest(deviceID: aliceDevice, action: try transfer()).jsonData
            ),
            (API.confirmApproval, [aliceApproval], ConfirmApprovalRequest(signature: signature).jsonData),
            (API.approvalStatus, [aliceApproval], Data()), (API.audit, [], Data()),
            (API.listPasskeys, [], Data()), (API.removePasskey, ["pk_AAAAAAAAAAAAAAAAAAAAAA"], Data()),
            (API.createAppAttestChallenge, [], Data()),
            (API.passkeyRegistrationOptions, [], Data(#"{"username":"alice"}"#.utf8)),
        ]
        var unexpected: [String] = []
        func check(_ reply: HTTPResponse, _ status: Int, _ what: String) {
            if reply.status != status, unexpected.count < 10 { unexpected.append("\(what): \(reply.status)") }
        }
        for index in 0..<2600 {
            let (endpoint, parameters, body) = bearerOperations[index % bearerOperations.count]
            check(
                app.send(endpoint, raw: body, parameters: parameters, token: Self.randomToken()), 401,
                "\(endpoint.method.rawValue) \(endpoint.path(parameters))")
        }
        // Random refresh tokens: 401.
        for _ in 0..<2500 {
            check(app.send(API.refresh, RefreshRequest(refreshToken: Self.randomToken())), 401, "refresh")
        }
        // Forged login challenge ids, with the real challenge's signature: random ones, and the
        // real one with one bit changed: unknown, 404.
        let realID = [UInt8](try #require(Base64URL.decode(String(challenge.challengeID.dropFirst(4)))))
        for index in 0..<2500 {
            var bytes = index.isMultiple(of: 2) ? SecureRandomBytes.bytes(realID.count).map { $0 } : realID
            if !index.isMultiple(of: 2) { bytes[(index / 2) % bytes.count] ^= UInt8(1 << (index % 8)) }
            let forged = "chl_" + Base64URL.encode(Data(bytes))
            check(app.deviceLogin(forged, signature, from: "127.0.0.1"), 404, "device login")
        }
        // Forged approval ids, and Bob's approval, with Alice's valid token: 404.
        for index in 0..<2400 {
            let id =
                index.isMultiple(of: 100)
                ? bobApproval : "apr_" + Base64URL.encode(SecureRandomBytes.bytes(16))
            let confirm = ConfirmApprovalRequest(signature: signature)
            check(
                app.send(API.confirmApproval, confirm, parameters: [id], token: alice.accessToken), 404,
                "confirm")
            check(app.send(API.approvalStatus, parameters: [id], token: alice.accessToken), 404, "status")
        }
        #expect(unexpected.isEmpty, "\(unexpected)")
        #expect(database.writes == writesBefore, "write transactions for invalid tokens")
        #expect(try Self.contents(app) == before)

        // Everything real still works: the refusals changed nothing.
        let approved = ConfirmApprovalRequest(signature: try sign(alicePayload, with: aliceKey))
        let confirmed = app.send(
            API.confirmApproval, approved, parameters: [aliceApproval], token: alice.accessToken)
        #expect(confirmed.status == 200)
        // (Last: a device login replaces Alice's session from the same client.)
        #expect(app.deviceLogin(challenge.challengeID, signature, from: "127.0.0.1").status == 200)
        let refreshed = app.send(
            API.refresh, RefreshRequest(refreshToken: bob.refreshToken))
        #expect(refreshed.status == 200)
    }
}
