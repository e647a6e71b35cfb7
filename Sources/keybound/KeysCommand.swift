import Foundation
import KeyboundServer
import KeyboundWire

/// `keybound keys`: the issuer's signing keys on the server's database, for operators.
enum KeysCommand {
    static let command = OperatorCommand(
        name: "keys", title: "the OAuth 2.0 and OpenID Connect signing keys, on the server's database",
        actions: [
            OperatorCommand.Action(
                name: "rotate", operands: .none, settings: [ServeCommand.keyPublishDelay]
            ) { invocation in
                let key = try ProviderAdministration(configuration: invocation.configuration).rotateKey()
                return OperatorCommand.Outcome(
                    members: json(key),
                    text: "\(key.kid): published now, signs from \(Timestamp.format(key.signsFrom))")
            },
            OperatorCommand.Action(
                name: "list", operands: .none, settings: [ServeCommand.accessTokenTTL]
            ) { invocation in
                let keys = try ProviderAdministration(configuration: invocation.configuration).keys()
                return OperatorCommand.Outcome(
                    members: [JSONMember("keys", .array(keys.map { .object(json($0)) }))], text: table(keys))
            },
        ],
        notes: """
            Access and ID tokens are signed with ES256 keys kept in the database, so every instance
            signs with the same key and publishes the same JWK Set (GET /oauth/jwks); the first key
            is made with the schema.

            rotate adds a key that is published at once and signs only once --key-publish-delay has
            passed, so that clients caching the JWK Set learn it before they see a token it signed.
            The key it replaces stays published until every token it signed has expired. Prints the
            new key's id (its RFC 7638 thumbprint) and when it starts signing:

              keybound keys rotate --db sqlite:/var/lib/keybound/keybound.sqlite

            list shows every stored key, newest first: its kid, when it was made, when it signs
            from, when a newer key took over, whether the JWK Set publishes it, whether it signs
            now, and whether its private key is sealed. A retired key is published until the
            tokens it signed have expired: give list the servers' --access-token-ttl.

            Private keys are sealed (AES-256-GCM) when KEYBOUND_KEY_ENCRYPTION_KEY is set (32 bytes
            in base64: openssl rand -base64 32); give these commands the same one as the servers.
            A key stored before it was set is sealed the first time the database is opened with it.
            """,
        refusals: "a sealed key that does not open")

    static func run(_ raw: [String]) -> Int32 { command.run(raw) }

    /// A key's members, as `--json` shows it.
    private static func json(_ key: SigningKeyInfo) -> [JSONMember] {
        [
            JSONMember("kid", .string(key.kid)),
            JSONMember("created_at", .string(Timestamp.format(key.createdAt))),
            JSONMember("signs_from", .string(Timestamp.format(key.signsFrom))),
            JSONMember("superseded_at", key.supersededAt.map { .string(Timestamp.format($0)) } ?? .null),
            JSONMember("published", .bool(key.published)), JSONMember("signing", .bool(key.signing)),
            JSONMember("sealed", .bool(key.sealed)),
        ]
    }

    /// One line per key under a header, in aligned columns.
    private static func table(_ keys: [SigningKeyInfo]) -> String {
        func yesNo(_ flag: Bool) -> String { flag ? "yes" : "no" }
        let header = ["KID", "CREATED", "SIGNS FROM", "SUPERSEDED", "PUBLISHED", "SIGNING", "SEALED"]
        let rows = keys.map { key in
            [
                key.kid, Timestamp.format(key.createdAt), Timestamp.format(key.signsFrom),
                key.supersededAt.map(Timestamp.format) ?? "-", yesNo(key.published), yesNo(key.signing),
                yesNo(key.sealed),
            ]
        }
        return columns([header] + rows, indent: 0)
    }
}
