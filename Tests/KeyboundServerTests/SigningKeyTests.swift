import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The issuer's signing keys: shared by every instance through the database, rotated with a
/// publish delay, retired once their tokens have expired, sealed at rest when a key is set.
@Suite("OAuth signing keys")
struct SigningKeyTests {
    @Test func rotationPublishesFirstSignsLaterAndRetiresAfterTheTokensExpire() async throws {
        let oauth = try OAuthFixture()
        let app = try oauth.addClient()
        let before = try #require(
            try await oauth.tokens(app.clientID, username: "alice")[string: "access_token"])
        let oldKID = try #require(try CompactJWS(before).keyID)

        let rotated = try oauth.administration.rotateKey()
        #expect(!rotated.signing)
        #expect(rotated.published)
        // Published at once, beside the key that still signs.
        #expect(Set(try await oauth.keys().keyIDs) == [oldKID, rotated.kid])
        let meanwhile = try #require(
            try await oauth.tokens(app.clientID, username: "bob")[string: "access_token"])
        #expect(try CompactJWS(meanwhile).keyID == oldKID)

        // After the publish delay (10 minutes) the new key signs; tokens of both verify.
        oauth.test.clock.advance(by: 601)
        let after = try #require(
            try await oauth.tokens(app.clientID, username: "carol")[string: "access_token"])
        #expect(try CompactJWS(after).keyID == rotated.kid)
        let infos = try oauth.administration.keys()
        #expect(infos.map(\.kid) == [rotated.kid, oldKID])
        #expect(infos.map(\.signing) == [true, false])
        #expect(try await oauth.verify(after).subject != "")
        // `meanwhile` was signed 601 s ago: still alive (900 s), still verifiable.
        #expect(try await oauth.verify(meanwhile).subject != "")

        // Once every token the old key signed has expired, it leaves the set.
        oauth.test.clock.advance(by: 900 + 60)
        #expect(try await oauth.keys().keyIDs == [rotated.kid])
        #expect(try oauth.administration.keys().last?.published == false)
    }

    @Test func everyInstanceSignsWithAndPublishesTheSameKeys() async throws {
        guard PostgresCluster.isAvailable else { return }
        let oauth = try OAuthFixture(.live, engine: .postgres, instances: 2)
        let app = try oauth.addClient()
        let (first, second) = (oauth.test.clients[0], oauth.test.clients[1])
        let sets = try await [first, second].asyncMap { try await $0.send("GET", OAuthPaths.jwks).body }
        #expect(sets[0] == sets[1])
        // Issued by one instance, the token verifies with the other's keys and is accepted there.
        let access = try #require(
            try await oauth.tokens(app.clientID, username: "dana")[string: "access_token"])
        let keys = try JWKS(json: sets[1])
        let claims = try AccessTokenVerifier(issuer: testIssuer, audience: testIssuer, keys: keys, leeway: 0)
            .verify(access, at: oauth.test.clock.now)
        #expect(claims.clientID == app.clientID)
        let userinfo = try await second.send(
            "GET", OAuthPaths.userinfo, headers: ["Authorization": "Bearer \(access)"])
        #expect(userinfo.status == 200, "\(userinfo.text)")
    }

    @Test func privateKeysAreSealedWhenAKeyIsSetAndNeedIt() throws {
        let directory = try TemporaryDirectory()
        var configuration = Configuration.testing(databasePath: directory.path("keys.sqlite"))
        configuration.issuer = testIssuer
        // Made without a key: stored as they are.
        _ = try ProviderAdministration(configuration: configuration)
        configuration.keyEncryptionKey = SecureRandom.bytes(32)
        let sealed = try ProviderAdministration(configuration: configuration)
        // With the key set, the existing key is sealed, and so is a new one.
        _ = try sealed.rotateKey()
        #expect(try sealed.keys().allSatisfy(\.sealed))
        let database = try openDatabase(
            url: configuration.databaseURL, connections: 1, synchronous: .normal, password: nil)
        let stored = try database.read { try $0.query("SELECT private_key FROM signing_keys", []) }
        #expect(stored.count == 2)
        #expect(try stored.allSatisfy { try $0.text(0).hasPrefix("aesgcm:") })

        // Without the key, or with another one, the server refuses to start, and says why.
        for key in [nil, SecureRandom.bytes(32)] {
            configuration.keyEncryptionKey = key
            do {
                _ = try Server(configuration: configuration)
                Issue.record("started with the wrong key")
            } catch let error as ServerError {
                #expect(error.kind == .invalidConfiguration)
                #expect(error.description.contains("KEYBOUND_KEY_ENCRYPTION_KEY"), "\(error)")
            }
        }
    }
}
