import Foundation
import KeyboundCrypto
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// The storage engines the round trips run on: SQLite, and PostgreSQL where it can run.
enum Engine: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    static let all: [Engine] = (try? PostgresCluster.shared.get()) != nil ? [.sqlite, .postgres] : [.sqlite]
}

/// A fresh database for one test, and how the operator commands reach it: `--db`, and the
/// PostgreSQL password in the environment.
final class OperatorDatabase {
    let sandbox: Sandbox
    /// `sqlite:PATH` or `postgres://…`.
    let url: String
    let password: String?
    private let postgresName: String?

    init(_ engine: Engine) throws {
        sandbox = try Sandbox()
        switch engine {
        case .sqlite:
            url = "sqlite:" + sandbox.directory.appendingPathComponent("keybound.sqlite").path
            (password, postgresName) = (nil, nil)
        case .postgres:
            let cluster = try PostgresCluster.shared.get()
            let name = try cluster.createDatabase()
            (url, password, postgresName) = (cluster.url(database: name), cluster.password, name)
        }
    }

    deinit {
        if let postgresName, case .success(let cluster) = PostgresCluster.shared {
            cluster.dropDatabase(postgresName)
        }
    }

    /// `keybound ARGUMENTS --db URL`: no key-encryption key unless `environment` sets one.
    func keybound(_ arguments: [String], input: String = "", environment: [String: String] = [:]) throws
        -> Reply
    {
        var variables = ["KEYBOUND_KEY_ENCRYPTION_KEY": "", "KEYBOUND_DB_PASSWORD": password ?? ""]
        variables.merge(environment) { $1 }
        return try sandbox.run(arguments + ["--db", url], input: Data(input.utf8), environment: variables)
    }

    /// The server, in process, on the same database: the provider on, with `--issuer`.
    func server() throws -> Server {
        var configuration = Configuration.testing(databasePath: "")
        configuration.databaseURL = url
        configuration.databasePassword = password
        configuration.issuer = "http://127.0.0.1:8420"
        return try Server(configuration: configuration)
    }
}

/// `keybound client` and `keybound keys`: what an operator registers and rotates is what the
/// server uses, `--json` prints one object, bad input is refused with a message that says why.
@Suite("operator commands: client and keys")
struct OperatorCommandTests {
    static let password = "correct horse battery staple"

    /// A client's secret is printed by `add` and never again; the server authenticates the
    /// client with it; `remove` ends the client's sessions at once.
    @Test(arguments: Engine.all) func clientAddListRemoveRoundTrip(engine: Engine) async throws {
        let database = try OperatorDatabase(engine)
        #expect(try database.keybound(["user", "add", "alice"], input: Self.password + "\n").status == 0)

        let web = try expectSuccess(
            try database.keybound([
                "client", "add", "Example web", "--confidential", "--redirect-uri",
                "https://app.example.com/cb",
                "--json",
            ]))
        let webID = try #require(web["client_id"] as? String)
        let secret = try #require(web["client_secret"] as? String, "a confidential client gets a secret")
        #expect(webID.hasPrefix("cli_") && secret.count >= 32)
        #expect(web["authentication"] as? String == "client_secret")
        #expect(web["redirect_uris"] as? [String] == ["https://app.example.com/cb"])

        let app = try expectSuccess(
            try database.keybound([
                "client", "add", "Example iOS", "--redirect-uri", "com.example.app:/cb", "--redirect-uri",
                "http://127.0.0.1/cb", "--scope", "payments", "--json",
            ]))
        let appID = try #require(app["client_id"] as? String)
        #expect(app["client_secret"] == nil, "a public client has no secret")
        #expect(app["authentication"] as? String == "none")
        #expect(app["scopes"] as? [String] == ["payments"])
        #expect(app["dpop_required"] as? Bool == false)

        let jwks = database.sandbox.directory.appendingPathComponent("keys.json")
        try Self.jwkSet().write(to: jwks)
        let signed = try expectSuccess(
            try database.keybound([
                "client", "add", "Example API", "--jwks", jwks.path, "--redirect-uri",
                "https://api.example.com/cb",
                "--dpop-required", "--json",
            ]))
        #expect(signed["client_secret"] == nil, "a client with keys needs no secret")
        #expect(signed["authentication"] as? String == "private_key_jwt")
        #expect(signed["dpop_required"] as? Bool == true)

        // The text output names the secret once, and says it is shown only now.
        let plain = try database.keybound([
            "client", "add", "Another web", "--confidential", "--redirect-uri", "https://b.example.com/cb",
        ])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(
            plain.text.contains("client_id: cli_") && plain.text.contains("client_secret: "), "\(plain.text)")
        #expect(plain.text.contains("shown only now"), "\(plain.text)")

        // CIBA clients need no redirect URI; a notification endpoint makes one a ping-mode client.
        let poller = try expectSuccess(
            try database.keybound(["client", "add", "Wallet backend", "--confidential", "--ciba", "--json"]))
        #expect(poller["ciba"] as? String == "poll" && poller["client_secret"] is String, "\(poller)")
        #expect((poller["redirect_uris"] as? [Any])?.isEmpty == true)
        let pinged = try expectSuccess(
            try database.keybound([
                "client", "add", "Bank backend", "--confidential", "--ciba",
                "--backchannel-notification-endpoint",
                "https://bank.example/ciba", "--json",
            ]))
        #expect(pinged["ciba"] as? String == "ping", "\(pinged)")
        #expect(pinged["backchannel_notification_endpoint"] as? String == "https://bank.example/ciba")

        let listed = try expectSuccess(try database.keybound(["client", "list", "--json"]))
        let clients = try #require(listed["clients"] as? [JSONObject])
        #expect(
            clients.compactMap { $0["name"] as? String } == [
                "Example web", "Example iOS", "Example API", "Another web", "Wallet backend", "Bank backend",
            ])
        #expect(clients.compactMap { $0["ciba"] as? String } == ["poll", "ping"])
        #expect(clients.allSatisfy { $0["client_secret"] == nil })
        let table = try database.keybound(["client", "list"])
        #expect(table.status == 0)
        #expect(
            table.text.hasPrefix("CLIENT ") && table.text.contains(appID) && table.text.contains("payments")
                && table.text.contains("ping https://bank.example/ciba"), "\(table.text)")
        for reply in [table, try database.keybound(["client", "list", "--json"])] {
            #expect(!reply.text.contains(secret), "the secret is shown once, by add")
        }

        // The public client signs alice in; the confidential one introspects with its secret.
        let server = try database.server()
        let provider = Provider(server: server, introspector: (webID, secret))
        let tokens = try await provider.signIn(clientID: appID, redirectURI: "com.example.app:/cb")
        let refreshed = try await provider.token([
            ("grant_type", "refresh_token"), ("refresh_token", tokens.refresh), ("client_id", appID),
        ])
        #expect(refreshed.status == 200, "\(refreshed.object)")
        let refreshToken = try #require(refreshed.object["refresh_token"] as? String)
        #expect(try await provider.isActive(refreshToken))
        #expect(try await provider.userinfo(tokens.access) == 200)

        let removed = try expectSuccess(try database.keybound(["client", "remove", appID, "--json"]))
        #expect(removed["client_id"] as? String == appID)
        let refusedRefresh = try await provider.token([
            ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", appID),
        ])
        #expect(refusedRefresh.status == 401 && refusedRefresh.object["error"] as? String == "invalid_client")
        #expect(try await provider.isActive(refreshToken) == false, "the removed client's session lives on")
        #expect(try await provider.isActive(tokens.access) == false)
        #expect(try await provider.userinfo(tokens.access) == 401)

        let after = try expectSuccess(try database.keybound(["client", "list", "--json"]))
        #expect(
            (after["clients"] as? [JSONObject])?.contains { $0["client_id"] as? String == appID } == false)
        let again = try database.keybound(["client", "remove", appID, "--json"])
        #expect(again.status == 1)
        let error = try #require(try again.object()["error"] as? JSONObject)
        #expect(error["code"] as? String == "clientNotFound")
        #expect((error["message"] as? String)?.contains(appID) == true)
    }

    @Test func clientAddRefusesBadInput() throws {
        let database = try OperatorDatabase(.sqlite)
        expectUsageError(
            try database.keybound(["client", "add", "--redirect-uri", "https://a.example/cb"]),
            mentioning: "give exactly one NAME", command: "keybound client add:")
        expectUsageError(
            try database.keybound(["client", "list", "--confidential"]),
            mentioning: "unknown option --confidential",
            command: "keybound client list:")
        expectUsageError(
            try database.keybound(["client", "list", "extra"]), mentioning: "unexpected argument 'extra'",
            command: "keybound client list:")
        expectUsageError(
            try database.keybound(["client", "enable", "web"]),
            mentioning: "unknown command 'enable': the commands are 'add', 'list' and 'remove'",
            command: "keybound client:")
        expectUsageError(
            try database.keybound(["client"]), mentioning: "give a command", command: "keybound client:")
        expectUsageError(
            try database.keybound([
                "client", "add", "web", "--redirect-uri", "https://a.example/cb", "--jwks",
                "/nonexistent/keys.json",
            ]), mentioning: "--jwks /nonexistent/keys.json: cannot read it", command: "keybound client add:")

        // What the server refuses: exit 1, the rule in the message, in text and in JSON.
        let notAJWKSet = database.sandbox.directory.appendingPathComponent("not-a-jwks.json")
        try Data(#"{"kty":"EC"}"#.utf8).write(to: notAJWKSet)
        for (arguments, fragment) in [
            (
                ["--redirect-uri", "http://example.com/cb"],
                "plain http only to 127.0.0.1, [::1] or localhost"
            ),
            (["--redirect-uri", "https://a.example/cb#x"], "without a fragment"),
            (["--redirect-uri", "myapp:/cb"], "a private-use scheme is a reverse domain name"),
            (
                ["--redirect-uri", "https://a.example/cb", "--jwks", notAJWKSet.path],
                "--jwks must be a JWK Set"
            ),
            (["--redirect-uri", "https://a.example/cb", "--scope", "openid"], "--scope openid"),
            ([], "a client needs at least one --redirect-uri (or --ciba)"),
            (["--ciba"], "a --ciba client authenticates: add --confidential or --jwks"),
            (
                [
                    "--redirect-uri", "https://a.example/cb", "--backchannel-notification-endpoint",
                    "https://a.example/p",
                ],
                "--backchannel-notification-endpoint is for a --ciba client"
            ),
            (
                [
                    "--confidential", "--ciba", "--backchannel-notification-endpoint",
                    "http://pay.example/ping",
                ],
                "http:// on 127.0.0.1, [::1] or localhost"
            ),
        ] {
            let text = try database.keybound(["client", "add", "web"] + arguments)
            #expect(text.status == 1 && text.text.isEmpty, "\(arguments): \(text.text) \(text.stderr)")
            #expect(
                text.stderr.contains("keybound client add: ") && text.stderr.contains(fragment),
                "\(text.stderr)")
            let json = try database.keybound(["client", "add", "web", "--json"] + arguments)
            #expect(json.status == 1)
            let object = try json.object()
            #expect(object["ok"] as? Bool == false)
            let error = try #require(object["error"] as? JSONObject)
            #expect(error["code"] as? String == "clientRefused", "\(error)")
            #expect((error["message"] as? String)?.contains(fragment) == true, "\(error)")
        }
        #expect(
            (try database.keybound(["client", "list", "--json"]).object()["clients"] as? [Any])?.isEmpty
                == true)
        let removed = try database.keybound(["client", "remove", "cli_nobody"])
        #expect(
            removed.status == 1 && removed.stderr.contains("no client has the id 'cli_nobody'"),
            "\(removed.stderr)")
    }

    /// A rotated key is published at once and signs after the delay; the one before signs until then.
    @Test func keysRotateThenList() throws {
        let database = try OperatorDatabase(.sqlite)
        let rotated = try expectSuccess(
            try database.keybound(["keys", "rotate", "--key-publish-delay", "600", "--json"]))
        let kid = try #require(rotated["kid"] as? String)
        #expect(rotated["published"] as? Bool == true && rotated["signing"] as? Bool == false)
        let created = try #require((rotated["created_at"] as? String).flatMap(Timestamp.parse))
        let signsFrom = try #require((rotated["signs_from"] as? String).flatMap(Timestamp.parse))
        #expect(signsFrom.timeIntervalSince(created) == 600)

        let keys = try #require(
            try expectSuccess(try database.keybound(["keys", "list", "--json"]))["keys"] as? [JSONObject])
        #expect(keys.count == 2, "the key made with the schema, and the new one")
        #expect(keys.first?["kid"] as? String == kid, "newest first")
        #expect(keys.map { $0["published"] as? Bool } == [true, true])
        #expect(keys.map { $0["signing"] as? Bool } == [false, true])
        #expect(keys.map { $0["sealed"] as? Bool } == [false, false])
        #expect(
            keys.allSatisfy { $0["superseded_at"] is NSNull }, "the old key signs until the new one starts")

        let table = try database.keybound(["keys", "list"])
        #expect(table.status == 0)
        let lines = table.text.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("KID ") == true && lines.count == 3, "\(table.text)")
        #expect(
            lines.dropFirst().first?.hasPrefix(kid) == true && lines[1].hasSuffix("yes         no        no"))
        let text = try database.keybound(["keys", "rotate", "--key-publish-delay", "0"])
        #expect(text.status == 0 && text.text.contains(": published now, signs from "), "\(text.text)")

        expectUsageError(
            try database.keybound(["keys", "rotate", "--key-publish-delay", "-1"]),
            mentioning: "--key-publish-delay must be an integer from 0 to 604800",
            command: "keybound keys rotate:")
        expectUsageError(
            try database.keybound(["keys", "list", "--key-publish-delay", "5"]), mentioning: "unknown option",
            command: "keybound keys list:")
        expectUsageError(
            try database.keybound(["keys", "remove"]), mentioning: "unknown command",
            command: "keybound keys:")
    }

    /// With `KEYBOUND_KEY_ENCRYPTION_KEY`, as `serve` reads it, the private keys are sealed; a
    /// wrong key is refused with a message naming the variable; every operator command reads it.
    @Test func keysAreSealedUnderTheEncryptionKey() throws {
        let database = try OperatorDatabase(.sqlite)
        let key = [
            "KEYBOUND_KEY_ENCRYPTION_KEY": Data((0..<32).map { _ in UInt8.random(in: 0...255) })
                .base64EncodedString()
        ]
        try expectSuccess(try database.keybound(["keys", "rotate", "--json"], environment: key))
        let keys = try #require(
            try expectSuccess(try database.keybound(["keys", "list", "--json"], environment: key))["keys"]
                as? [JSONObject])
        #expect(keys.count == 2 && keys.allSatisfy { $0["sealed"] as? Bool == true }, "\(keys)")

        let wrong = ["KEYBOUND_KEY_ENCRYPTION_KEY": Base64URL.encode(Data(repeating: 7, count: 32))]
        let text = try database.keybound(["keys", "list"], environment: wrong)
        #expect(text.status == 1 && text.text.isEmpty)
        #expect(text.stderr.contains("does not open with KEYBOUND_KEY_ENCRYPTION_KEY"), "\(text.stderr)")
        let json = try database.keybound(["keys", "rotate", "--json"], environment: wrong)
        #expect(json.status == 1)
        let error = try #require(try json.object()["error"] as? JSONObject)
        #expect(error["code"] as? String == "invalidConfiguration")
        #expect((error["message"] as? String)?.contains("KEYBOUND_KEY_ENCRYPTION_KEY") == true, "\(error)")
        let missing = try database.keybound(["keys", "list"])
        #expect(missing.status == 1 && missing.stderr.contains("is sealed: set KEYBOUND_KEY_ENCRYPTION_KEY"))
        expectUsageError(
            try database.keybound(
                ["keys", "list"], environment: ["KEYBOUND_KEY_ENCRYPTION_KEY": "c2hvcnQ="]),
            mentioning: "KEYBOUND_KEY_ENCRYPTION_KEY must be 32 bytes", command: "keybound keys list:")
        let afterRefusals = try #require(
            try expectSuccess(try database.keybound(["keys", "list", "--json"], environment: key))["keys"]
                as? [JSONObject])
        #expect(afterRefusals.count == 2, "a refused command changed the keys")

        // The other operator commands open the same database, so they need the key too.
        let user = try database.keybound(
            ["user", "add", "alice", "--json"], input: Self.password, environment: key)
        #expect(user.status == 0, "\(user.text) \(user.stderr)")
        #expect(try database.keybound(["client", "list", "--json"], environment: key).status == 0)
    }

    @Test func helpListsTheOperatorCommands() throws {
        let sandbox = try Sandbox()
        let root = try sandbox.run(["--help"])
        #expect(root.text.contains("\n  client ") && root.text.contains("\n  keys "), "\(root.text)")
        let client = try sandbox.run(["client", "--help"])
        #expect(client.status == 0)
        #expect(
            client.text.contains(
                "usage: keybound client add NAME [--redirect-uri URI…] [--confidential] [--jwks FILE] [--scope S…]"
            ),
            "\(client.text)")
        #expect(client.text.contains("keybound client remove ID [--db URL] [--json]"))
        #expect(client.text.contains("[--ciba] [--backchannel-notification-endpoint URL]"), "\(client.text)")
        let keys = try sandbox.run(["keys", "rotate", "--help"])
        #expect(
            keys.status == 0
                && keys.text.contains("keybound keys rotate [--key-publish-delay SEC] [--db URL] [--json]"))
        #expect(keys.text.contains("0-604800, default 600"))
    }

    /// `{"keys": [one EC P-256 public key]}`.
    static func jwkSet() throws -> Data {
        let point = try P256SigningKey().publicKey.x963Representation
        let key = [
            "kty": "EC", "crv": "P-256", "x": Base64URL.encode(point[1..<33]),
            "y": Base64URL.encode(point[33..<65]),
        ]
        return try JSONSerialization.data(withJSONObject: ["keys": [key]])
    }
}

/// The provider's endpoints, in process: alice's sign-in through a client, its tokens, and
/// what the server says of them.
struct Provider {
    let server: Server
    /// A confidential client that introspects: its id and secret.
    let introspector: (id: String, secret: String)

    /// A password login, `POST /v1/oauth/authorize` with PKCE, and the code's exchange, with
    /// `openid offline_access`.
    func signIn(clientID: String, redirectURI: String) async throws -> (access: String, refresh: String) {
        let login = try await send(
            "POST", "/v1/sessions/password",
            json: ["username": "alice", "password": OperatorCommandTests.password, "client_id": "cli-tests"])
        #expect(login.status == 200, "\(login.object)")
        let session = try #require(login.object["access_token"] as? String)
        let verifier = Base64URL.encode(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
        let authorized = try await send(
            "POST", "/v1/oauth/authorize",
            json: [
                "client_id": clientID, "redirect_uri": redirectURI, "response_type": "code",
                "scope": "openid offline_access", "state": "s1",
                "code_challenge": Base64URL.encode(Digest.sha256(Data(verifier.utf8))),
                "code_challenge_method": "S256",
            ], headers: ["Authorization": "Bearer \(session)"])
        #expect(authorized.status == 200, "\(authorized.object)")
        let location = try #require(authorized.object["redirect_to"] as? String)
        let code = try #require(
            URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
        let exchanged = try await token([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
            ("client_id", clientID), ("code_verifier", verifier),
        ])
        #expect(exchanged.status == 200, "\(exchanged.object)")
        return (
            try #require(exchanged.object["access_token"] as? String),
            try #require(exchanged.object["refresh_token"] as? String)
        )
    }

    /// `POST /oauth/token`.
    func token(_ form: [(String, String)]) async throws -> (status: Int, object: JSONObject) {
        try await send("POST", "/oauth/token", form: form)
    }

    /// Whether introspection (RFC 7662), by the confidential client, says the token is active.
    func isActive(_ token: String) async throws -> Bool {
        let basic = Data("\(introspector.id):\(introspector.secret)".utf8).base64EncodedString()
        let answer = try await send(
            "POST", "/oauth/introspect", form: [("token", token)],
            headers: ["Authorization": "Basic \(basic)"])
        #expect(answer.status == 200, "\(answer.object)")
        return try #require(answer.object["active"] as? Bool)
    }

    /// The status of `GET /oauth/userinfo` with the access token.
    func userinfo(_ accessToken: String) async throws -> Int {
        try await send("GET", "/oauth/userinfo", headers: ["Authorization": "Bearer \(accessToken)"]).status
    }

    private func send(
        _ method: String, _ path: String, json: [String: String]? = nil, form: [(String, String)]? = nil,
        headers: [String: String] = [:]
    ) async throws -> (status: Int, object: JSONObject) {
        var headers = headers
        var body = Data()
        if let json {
            headers["Content-Type"] = "application/json"
            body = try JSONSerialization.data(withJSONObject: json)
        } else if let form {
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            body = Data(
                form.map { name, value in
                    "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
                }.joined(separator: "&").utf8)
        }
        let response = await server.handle(
            HTTPRequest(method: method, path: path, headers: headers, body: body))
        let object =
            response.body.isEmpty ? [:] : try JSONSerialization.jsonObject(with: response.body) as? JSONObject
        return (response.status, object ?? [:])
    }
}
