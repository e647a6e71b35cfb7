import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Operations")
struct OperationsTests {
    @Test(arguments: Engine.all) func healthMetricsAndOpenAPI(engine: Engine) async throws {
        let live = try TestServer(engine: engine) {
            $0.metricsListen = ListenAddress(host: "127.0.0.1", port: 0)
        }
        let health = try await live.client.send(API.health)
        #expect(health.status == 200)
        #expect(health.text == #"{"status":"ok"}"#)
        try await live.client.createAccount("alice")
        _ = try await live.client.login("alice")
        _ = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: "wrong password", clientID: "c"))
        let metricsURL = try #require(live.server.metricsURL)
        let scraper = Client(baseURL: try #require(URL(string: "/", relativeTo: metricsURL)?.absoluteURL))
        let metrics = try await scraper.send("GET", "metrics", checkSpec: false)
        #expect(metrics.status == 200)
        #expect(
            metrics.text.contains(
                #"keybound_http_requests_total{route="\#(API.health.template)",status="200"} 1"#))
        #expect(
            metrics.text.contains(
                #"keybound_http_request_duration_seconds_bucket{route="\#(API.createAccount.template)",le="+Inf"} 1"#
            ))
        #expect(metrics.text.contains(#"keybound_logins_total{method="password",outcome="success"} 1"#))
        #expect(metrics.text.contains(#"keybound_logins_total{method="password",outcome="failure"} 1"#))
        let spec = try await live.client.send("GET", "/openapi.yaml")
        #expect(spec.status == 200)
        #expect(spec.text == OpenAPIDocument.yaml)
    }

    /// PostgreSQL runs a write transaction again after a serialization failure (40001); the
    /// logins it counted and the audit lines it logged before the rollback must not stay. Here
    /// every write runs once and is rolled back, then runs for real, on either engine.
    @Test(arguments: Engine.all) func aWriteRunAgainCountsAndLogsItsLoginOnce(engine: Engine) throws {
        let log = LogCollector()
        let app = try InProcessApplication(
            engine, { $0.log = log.sink }, wrapping: { RetriedWrites(base: $0) })
        try app.createAccount("alice")
        let login = app.login("alice", Client.password)
        #expect(login.status == 200)
        let tokens = try TokenResponse(jsonData: login.body)
        let refresh = app.send(
            API.refresh, RefreshRequest(refreshToken: tokens.refreshToken))
        #expect(refresh.status == 200)
        #expect(try app.count("SELECT COUNT(*) FROM tokens WHERE kind = 'refresh'") == 2)
        let metrics = app.application.metrics.render()
        #expect(metrics.contains(#"keybound_logins_total{method="password",outcome="success"} 1"#))
        #expect(metrics.contains(#"keybound_logins_total{method="refresh",outcome="success"} 1"#))
        let audited = log.all.filter { $0.contains(#""msg":"audit""#) }
        #expect(audited.filter { $0.contains(#""event":"account_created""#) }.count == 1)
        #expect(audited.filter { $0.contains(#""event":"login""#) }.count == 1)
    }

    /// A write that is undone after its work ran (here: its work throws after the audit row was
    /// inserted, as when a group's COMMIT fails) leaves neither the row nor its log line.
    @Test func anUndoneWriteLogsNoAuditLine() throws {
        let log = LogCollector()
        let app = try InProcessApplication(.sqlite, { $0.log = log.sink })
        try app.createAccount("alice")
        let before = log.all.count
        struct Undone: Error {}
        #expect(throws: Undone.self) {
            try app.application.database.write { connection in
                try app.application.insertAuditEvent(
                    connection, now: Date(milliseconds: 0), clientAddress: nil, .logout, method: nil,
                    userID: nil, deviceID: nil,
                    sessionID: nil)
                throw Undone()
            }
        }
        #expect(log.all.count == before)
        #expect(try app.count("SELECT COUNT(*) FROM audit_events WHERE type = 'logout'") == 0)
    }

    /// Runs each write's body in a transaction that is then rolled back, and once more for real:
    /// what ``PostgresDatabase`` does after a serialization failure.
    private struct RetriedWrites: DatabaseWrapper {
        struct RolledBack: Error {}
        let base: any Database

        func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
            do {
                try base.write { connection in
                    _ = try body(connection)
                    throw RolledBack()
                }
            } catch is RolledBack {}
            return try base.write(body)
        }

        func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try base.read(body) }

        var readsInProcess: Bool { base.readsInProcess }
    }

    @Test func servedDocumentIsDocsOpenAPIYAML() throws {
        let file = try String(contentsOf: OpenAPISpec.documentURL, encoding: .utf8)
        #expect(file == OpenAPIDocument.yaml, "the EmbedFiles plugin compiles docs/openapi.yaml in")
        #expect(OpenAPISpec.shared.loadError == nil)
        // Every route of the server is documented, and nothing else.
        let routes = Set(Application.routes.map(\.pattern))
        #expect(Set(OpenAPISpec.shared.pathTemplates) == routes)
        for route in Application.routes {
            #expect(
                OpenAPISpec.shared.operation(method: route.method, path: route.pattern) != nil,
                "\(route.pattern)")
        }
    }

    @Test(arguments: Engine.all) func auditRecordsEverythingButSecretsAndLogsAreRedacted(engine: Engine)
        async throws
    {
        let live = try TestServer(engine: engine)
        let (first, key, deviceID) = try await live.client.userWithDevice("alice")
        let challenge = try await live.client.challenge(deviceID)
        let signature = try sign(challenge.payload, with: key)
        let session = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: signature
        )
        .decode(TokenResponse.self)
        let tokens = try await live.client.login("alice", clientID: "web")
        let approval = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let approvalSignature = try sign(approval.payload, with: key)
        _ = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(signature: approvalSignature), parameters: [approval.approvalID],
            token: tokens.accessToken)
        _ = try await live.client.send(
            API.passwordLogin,
            PasswordLoginRequest(username: "alice", password: "wrong password", clientID: "c"))
        _ = try await live.client.send(API.revokeDevice, parameters: [deviceID], token: tokens.accessToken)

        let audit = try await live.client.send(API.audit, token: tokens.accessToken)
        let events = try audit.decode(AuditListResponse.self).events
        let types = Set(events.map(\.type))
        for expected: AuditEventType in [
            .accountCreated, .login, .loginFailed, .deviceBound, .approvalCreated, .approvalConfirmed,
            .deviceRevoked,
        ] {
            #expect(types.contains(expected), "\(expected)")
        }
        #expect(events.allSatisfy { $0.clientAddress == "127.0.0.1" })
        #expect(events.contains { $0.type == .login && $0.method == .device && $0.deviceID == deviceID })

        let secrets = [
            Client.password, "wrong password", first.accessToken, first.refreshToken, tokens.accessToken,
            tokens.refreshToken, session.accessToken,
            session.refreshToken, Base64URL.encode(signature), Base64URL.encode(approvalSignature),
            Base64URL.encode(challenge.payload),
        ]
        let logs = live.logs.all.joined(separator: "\n")
        #expect(logs.contains(#""event":"approval_confirmed""#))
        for secret in secrets {
            #expect(!audit.text.contains(secret))
            #expect(!logs.contains(secret))
        }
        // Every log line is one JSON object.
        for line in live.logs.all { #expect((try? JSON.parse(Data(line.utf8))) != nil) }
    }

    @Test func loggerRedactsSecretFields() {
        let collector = LogCollector()
        let logger = Logger(sink: collector.sink, clock: .system)
        logger.log(.info, "x", [("password", "hunter2"), ("Authorization", "Bearer abc"), ("user", "alice")])
        let line = collector.all.joined()
        #expect(!line.contains("hunter2"))
        #expect(!line.contains("Bearer abc"))
        #expect(line.contains(#""user":"alice""#))
    }

    /// One story through both transports: the in-process one reaches the same router, services
    /// and storage as the socket, and answers alike (the Client checks every reply against the
    /// spec on either).
    @Test(arguments: Transport.allCases)
    func bothTransportsServeTheSameAPI(_ transport: Transport) async throws {
        let test = try TestServer(transport)
        #expect((test.server.port == nil) == (transport == .inProcess))
        try await test.client.createAccount("alice")
        let tokens = try await test.client.login("alice")
        let me = try await test.client.send(API.me, token: tokens.accessToken)
        #expect(me.status == 200)
        #expect(me.header("Cache-Control") == "no-store")
        #expect(try me.decode(MeResponse.self).username == "alice")
        let big = try await test.client.send(API.createAccount, raw: Data(count: 70_000))
        #expect(big.status == 413)
        #expect(big.problem?.code == .bodyTooLarge)
        let audit = try await test.client.send(API.audit, query: "limit=2", token: tokens.accessToken)
        #expect(
            Set(try audit.decode(AuditListResponse.self).events.map(\.type)) == [.accountCreated, .login])
        let unknown = try await test.client.send("GET", "/v1/nothing", checkSpec: false)
        #expect(unknown.status == 404)
        #expect(unknown.header("Content-Type") == Problem.mediaType)
    }

    @Test(arguments: Engine.all) func databaseSurvivesARestartInProcess(engine: Engine) async throws {
        let directory = try TemporaryDirectory()
        let database = try TestDatabase(engine, in: directory)
        var configuration = database.configuration
        configuration.serverID = "restart"
        do {
            let server = try Server(configuration: configuration)
            try server.start()
            let client = try Client(baseURL: #require(server.baseURL))
            try await client.createAccount("alice")
            server.stop()
        }
        let server = try Server(configuration: configuration)
        try server.start()
        let client = try Client(baseURL: #require(server.baseURL))
        _ = try await client.login("alice")
        server.stop()
    }

    @Test func portInUseIsAClearError() throws {
        let live = try TestServer()
        var configuration = live.server.configuration
        configuration.port = try #require(live.server.port)
        let second = try Server(configuration: configuration)
        let error = #expect(throws: ServerError.self) { try second.start() }
        #expect(error?.kind == .addressInUse, "\(String(describing: error))")
        #expect(throws: ServerError.self) { try live.server.start() }
    }

    /// Each start failure says which one it is, so an operator (or a supervisor) can act on it.
    @Test func startFailuresAreTyped() throws {
        let directory = try TemporaryDirectory()
        func kind(_ adjust: (inout Configuration) -> Void) -> ServerError.Kind? {
            var configuration = Configuration.testing(databasePath: directory.path("typed.sqlite"))
            adjust(&configuration)
            do {
                try Server(configuration: configuration).start()
                return nil
            } catch let error as ServerError {
                return error.kind
            } catch {
                return nil
            }
        }
        #expect(kind { $0.databaseURL = "mysql://db" } == .invalidConfiguration)
        #expect(
            kind { $0.databaseURL = "sqlite:" + directory.path("missing/folder/db.sqlite") }
                == .databaseUnreachable)
        #expect(kind { $0.host = "not-an-address" } == .cannotListen)
        #expect(kind { $0.tlsKeyPath = directory.path("absent.pem") } == .tls)

        // A database that a newer server migrated.
        let path = directory.path("newer.sqlite")
        _ = try Server(configuration: .testing(databasePath: path))
        try openDatabase(url: "sqlite:" + path, connections: 1, synchronous: .normal).write { connection in
            try connection.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)", [])
        }
        let error = #expect(throws: ServerError.self) {
            try Server(configuration: .testing(databasePath: path))
        }
        #expect(error?.kind == .schemaTooNew)
        #expect(error?.description.contains("999") == true)
    }

    @Test func listensOnIPv6Loopback() throws {
        let live = try TestServer { $0.host = "::1" }
        let baseURL = try #require(live.server.baseURL)
        #expect(baseURL.absoluteString.hasPrefix("http://[::1]:"))
        // URLSession on Linux rejects bracketed hosts; curl -g does not.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else { return }
        let curl = try runTool(
            "/usr/bin/curl", ["-sg", "--max-time", "10", baseURL.absoluteString + API.health.path()])
        #expect(curl.1 == #"{"status":"ok"}"#)
    }
}

@Suite("YAML subset reader")
struct YAMLSubsetTests {
    @Test func readsTheSubset() throws {
        let text = """
            # comment
            a: 1
            b:
              - x
              - 'it''s'
              - key: "q\\"uote"
                other: []
            c:
            - {}
            '200':
              d: plain text: with colon
            """
        let value = try YAMLSubset.parse(text)
        let expected =
            #"{"a":1,"b":["x","it's",{"key":"q\"uote","other":[]}],"c":[{}],"200":{"d":"plain text: with colon"}}"#
        #expect(String(decoding: JSON.serialize(value), as: UTF8.self) == expected)
        #expect(throws: YAMLSubset.Failure.self) { try YAMLSubset.parse("a: 1\na: 2") }
        #expect(throws: YAMLSubset.Failure.self) { try YAMLSubset.parse("a: [1, 2]") }
    }
}
