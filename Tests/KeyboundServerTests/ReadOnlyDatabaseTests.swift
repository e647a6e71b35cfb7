import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

/// What a server that takes no writes does to Keybound (issue 25): the database turned read-only
/// under the server, as a primary is demoted or a proxy switches to a standby before it was
/// promoted. Every request is a 503 with Retry-After, never a 500; `/healthz` is 503 while it
/// lasts; once the database takes writes again the same server serves, without a restart.
@Suite("A database that takes no writes", PostgresRequirement())
struct ReadOnlyDatabaseTests {
    /// A live server on a database of its own, whose writability the test switches.
    struct Switchable {
        let live: TestServer
        let name: String
        let cluster: PostgresCluster

        /// - Parameter sessionAttributes: the URL's `target_session_attrs` (nil: the server's
        ///   default, read-write).
        init(sessionAttributes: String?) throws {
            cluster = try PostgresCluster.shared.get()
            var databaseName = ""
            live = try TestServer(.live, engine: .postgres) { configuration in
                if let sessionAttributes {
                    configuration.databaseURL += "?target_session_attrs=\(sessionAttributes)"
                }
                databaseName = (try? PostgresURL(configuration.databaseURL).database) ?? ""
            }
            name = databaseName
        }

        /// New sessions of the database are read-only (`default_transaction_read_only`), and the
        /// server's open connections are cut, as a demotion restarts the server.
        func makeReadOnly(_ readOnly: Bool) throws {
            _ = try cluster.sql(
                readOnly
                    ? "ALTER DATABASE \(name) SET default_transaction_read_only = on"
                    : "ALTER DATABASE \(name) RESET default_transaction_read_only")
            _ = try cluster.sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)'")
        }
    }

    @Test(
        "read-write connections pass the read-only server over; a server reached anyway answers 503 in either case",
        arguments: [nil, "any"])
    func readOnlyIs503AndRecovers(sessionAttributes: String?) async throws {
        let database = try Switchable(sessionAttributes: sessionAttributes)
        let client = database.live.client
        try await client.createAccount("alice")
        #expect(try await client.send(API.health).status == 200)

        try database.makeReadOnly(true)
        let health = try await client.send(API.health)
        #expect(health.status == 503, "\(health.text)")
        #expect(health.header("Retry-After") != nil)
        let signUp = try await client.send(
            API.createAccount, CreateAccountRequest(username: "bob", password: Client.password))
        #expect(signUp.status == 503, "\(signUp.text)")
        #expect(signUp.problem?.code == .unavailable)
        #expect(signUp.header("Retry-After") != nil)
        let login = try await client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: Client.password, clientID: "app-1"))
        #expect(login.status == 503, "\(login.text)")
        #expect(!database.live.logs.all.contains { $0.contains(#""status":500"#) }, "no 500 while read-only")

        // Writable again: the same server serves, nothing was half-done.
        try database.makeReadOnly(false)
        #expect(try await client.send(API.health).status == 200)
        try await client.createAccount("bob")
        _ = try await client.login("alice")
        let accounts = try database.cluster.sql("SELECT COUNT(*) FROM users", database: database.name)
        #expect(accounts == "2")
    }
}
