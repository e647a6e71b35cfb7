import Foundation
import KeyboundServer
import KeyboundWire

/// `keybound client`: the OAuth 2.0 / OpenID Connect clients registered on the server's
/// database, for operators.
enum ClientCommand {
    static let command = OperatorCommand(
        name: "client", title: "OAuth 2.0 and OpenID Connect clients, on the server's database",
        actions: [
            OperatorCommand.Action(
                name: "add", operands: .one("NAME"),
                options: [
                    .value(
                        "redirect-uri", "URI",
                        "where authorization answers may go; repeatable, at least one but for --ciba",
                        repeatable: true),
                    .flag("confidential", "a server-side client: it gets a secret, shown once"),
                    .value("jwks", "FILE", "the client's public keys (a JWK Set), for private_key_jwt"),
                    .value(
                        "scope", "S", "a scope it may ask for besides the standard ones; repeatable",
                        repeatable: true),
                    .flag("dpop-required", "its tokens must be DPoP-bound (RFC 9449)"),
                    .flag("ciba", "it may ask for approvals through CIBA (POST /oauth/bc-authorize)"),
                    .value(
                        "backchannel-notification-endpoint", "URL",
                        "with --ciba: where it is pinged when a request is decided (ping mode)"),
                ],
                perform: add),
            OperatorCommand.Action(name: "list", operands: .none) { invocation in
                let clients = try ProviderAdministration(configuration: invocation.configuration).clients()
                return OperatorCommand.Outcome(
                    members: [JSONMember("clients", .array(clients.map { .object(json($0)) }))],
                    text: clients.isEmpty ? nil : table(clients), notice: clients.isEmpty ? "no clients" : nil
                )
            },
            OperatorCommand.Action(name: "remove", operands: .one("ID")) { invocation in
                let id = invocation.operand ?? ""
                try ProviderAdministration(configuration: invocation.configuration).removeClient(id: id)
                return OperatorCommand.Outcome(
                    members: [JSONMember("client_id", .string(id))],
                    text: "removed \(id); its sessions are ended")
            },
        ],
        notes: """
            add registers a client and prints its client_id. A public client (a native or browser
            app) sends only its client_id, and PKCE protects its codes. --confidential gives a
            server-side client a secret, for client_secret_basic or client_secret_post: it is
            printed only this once, and the database keeps only its hash. --jwks registers the
            client's public keys instead (a JWK Set of EC P-256 keys), for private_key_jwt.

            Redirect URIs match exactly, except that http://127.0.0.1/… and http://[::1]/… match
            any port (RFC 8252: native apps). Each is https, plain http to 127.0.0.1, [::1] or
            localhost, or a private-use scheme (com.example.app:/callback). Every client may ask for
            openid, profile and offline_access (refresh tokens); --scope adds others. First-party
            clients only: there is no consent screen.

              keybound client add "Example web" --confidential --redirect-uri https://app.example.com/callback
              keybound client add "Example iOS" --redirect-uri com.example.app:/oauth/callback --dpop-required

            --ciba lets a confidential client ask the user's bound device to approve an action
            (OpenID CIBA with a keybound_transfer authorization detail; docs/approvals.md). It
            polls the token endpoint for the outcome, or, with
            --backchannel-notification-endpoint, is pinged there first (https, or http on
            loopback; serve's --allow-private-webhooks lets pings reach private addresses).

              keybound client add "Wallet backend" --confidential --ciba

            list shows each client: its id, name, how it authenticates, whether its tokens must be
            DPoP-bound, the scopes --scope added, its CIBA mode, when it was registered and its
            redirect URIs.

            remove deletes a client and ends its sessions: its refresh tokens stop working at once,
            and introspection and userinfo refuse its access tokens at once. The JWT access tokens
            it holds still verify offline until they expire (--access-token-ttl of serve).

              keybound client remove cli_AbCdEfGhIjKlMnOpQrStUv --db sqlite:/var/lib/keybound/keybound.sqlite

            The server may be running meanwhile: it reads the clients from the database.
            """,
        refusals: "a registration that breaks the rules, no such client")

    static func run(_ raw: [String]) -> Int32 { command.run(raw) }

    /// The largest `--jwks` file read: a JWK Set of a few keys is a few hundred bytes.
    private static let jwksLimit = 65_536

    /// `keybound client add`.
    @Sendable private static func add(_ invocation: OperatorCommand.Invocation) throws
        -> OperatorCommand.Outcome
    {
        let arguments = invocation.arguments
        var registration = OAuthClientRegistration(
            name: invocation.operand ?? "", redirectURIs: arguments.values("redirect-uri"))
        registration.confidential = arguments.isSet("confidential")
        registration.jwks = try arguments.value("jwks").map(readJWKS)
        registration.scopes = arguments.values("scope")
        registration.dpopRequired = arguments.isSet("dpop-required")
        registration.ciba = arguments.isSet("ciba")
        registration.backchannelNotificationEndpoint = arguments.value("backchannel-notification-endpoint")
        let client = try ProviderAdministration(configuration: invocation.configuration).addClient(
            registration)
        var text = "client_id: \(client.clientID)"
        if let secret = client.secret {
            text +=
                "\nclient_secret: \(secret)\nThe secret is shown only now: the database keeps only its hash."
        }
        return OperatorCommand.Outcome(
            members: json(client) + (client.secret.map { [JSONMember("client_secret", .string($0))] } ?? []),
            text: text)
    }

    /// The bytes of the `--jwks` file; whether they are a JWK Set is the server's to judge.
    private static func readJWKS(_ path: String) throws -> Data {
        try readFile(path, label: "--jwks", limit: jwksLimit, what: "a client's JWK Set")
    }

    /// A client's members, as `--json` shows it.
    private static func json(_ client: OAuthClientInfo) -> [JSONMember] {
        [
            JSONMember("client_id", .string(client.clientID)), JSONMember("name", .string(client.name)),
            JSONMember("redirect_uris", .array(client.redirectURIs.map { .string($0) })),
            JSONMember("authentication", .string(client.authentication)),
            JSONMember("scopes", .array(client.scopes.map { .string($0) })),
            JSONMember("dpop_required", .bool(client.dpopRequired)),
            JSONMember("ciba", client.ciba.map { .string($0.rawValue) } ?? .null),
            JSONMember(
                "backchannel_notification_endpoint",
                client.notificationEndpoint.map(JSONValue.string) ?? .null),
            JSONMember("created_at", .string(Timestamp.format(client.createdAt))),
        ]
    }

    /// One line per client under a header, in aligned columns; the redirect URIs last.
    private static func table(_ clients: [OAuthClientInfo]) -> String {
        let header = [
            "CLIENT", "NAME", "AUTHENTICATION", "DPOP", "SCOPES", "CIBA", "REGISTERED", "REDIRECT URIS",
        ]
        let rows = clients.map { client in
            [
                client.clientID, client.name, client.authentication,
                client.dpopRequired ? "required" : "optional",
                client.scopes.isEmpty ? "-" : client.scopes.joined(separator: ","),
                client.ciba.map { mode in
                    mode.rawValue + (client.notificationEndpoint.map { " " + $0 } ?? "")
                } ?? "-",
                Timestamp.format(client.createdAt),
                client.redirectURIs.isEmpty ? "-" : client.redirectURIs.joined(separator: " "),
            ]
        }
        return columns([header] + rows, indent: 0)
    }
}
