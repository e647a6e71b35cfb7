import Foundation

extension Migrations {
    /// The OAuth 2.0 / OpenID Connect provider (9), approval receipts (10) and events (11).
    static let providerAndEvents: [(version: Int64, statements: [String])] = [
        (
            9,
            [
                // OAuth 2.0 and OpenID Connect (docs/oauth.md): the clients operators register,
                // the keys tokens are signed with (shared by every instance; the private key
                // sealed when KEYBOUND_KEY_ENCRYPTION_KEY is set), and authorization codes, each
                // single use, found by its SHA-256.
                """
                CREATE TABLE oauth_clients (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    secret_hash TEXT,
                    jwks TEXT,
                    redirect_uris TEXT NOT NULL,
                    scopes TEXT NOT NULL,
                    dpop_required BIGINT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE signing_keys (
                    kid TEXT PRIMARY KEY,
                    public_jwk TEXT NOT NULL,
                    private_key TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    signs_from BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE oauth_codes (
                    hash TEXT PRIMARY KEY,
                    client_id TEXT NOT NULL,
                    redirect_uri TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    auth_method TEXT NOT NULL,
                    auth_time BIGINT NOT NULL,
                    scope TEXT NOT NULL,
                    nonce TEXT,
                    code_challenge TEXT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT,
                    session_id TEXT
                )
                """,
                "CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at)",
                // A session an OAuth client holds has its granted scope (NULL: a /v1 session);
                // a session bound to a DPoP key (RFC 9449) has the key's thumbprint.
                "ALTER TABLE sessions ADD COLUMN scope TEXT",
                "ALTER TABLE sessions ADD COLUMN dpop_jkt TEXT",
            ]
        ),
        (
            10,
            [
                // An approved approval's receipt (docs/approvals.md): the compact JWS made when it
                // was confirmed, kept so that every read returns the same bytes.
                "ALTER TABLE approvals ADD COLUMN receipt TEXT"
            ]
        ),
        (
            11,
            [
                // Events (docs/webhooks.md): the endpoints operators register and the event
                // types each takes; the outbox, one message per event, written in the
                // transaction of the change it reports, and one delivery of it per endpoint,
                // leased by the instance sending it; and every attempt, for
                // `keybound webhook deliveries`.
                """
                CREATE TABLE webhook_endpoints (
                    id TEXT PRIMARY KEY,
                    url TEXT NOT NULL UNIQUE,
                    secret TEXT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE webhook_subscriptions (
                    event_type TEXT NOT NULL,
                    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id),
                    PRIMARY KEY (event_type, endpoint_id)
                )
                """,
                """
                CREATE TABLE webhook_messages (
                    id TEXT PRIMARY KEY,
                    type TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    body TEXT NOT NULL
                )
                """,
                "CREATE INDEX webhook_messages_by_time ON webhook_messages (created_at)",
                """
                CREATE TABLE webhook_deliveries (
                    id TEXT PRIMARY KEY,
                    message_id TEXT NOT NULL REFERENCES webhook_messages (id),
                    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id),
                    status TEXT NOT NULL,
                    attempts BIGINT NOT NULL,
                    window_start BIGINT NOT NULL,
                    next_attempt_at BIGINT NOT NULL,
                    lease_owner TEXT,
                    lease_until BIGINT,
                    delivered_at BIGINT
                )
                """,
                "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at)",
                "CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id)",
                "CREATE INDEX webhook_deliveries_by_message ON webhook_deliveries (message_id)",
                """
                CREATE TABLE webhook_attempts (
                    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id),
                    number BIGINT NOT NULL,
                    attempted_at BIGINT NOT NULL,
                    result TEXT NOT NULL,
                    PRIMARY KEY (delivery_id, number)
                )
                """,
            ]
        ),
    ]
}
