import Foundation

extension Migrations {
    /// The OAuth 2.0 / OpenID Connect provider (9), approval receipts (10), events (11) and CIBA
    /// (12).
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
        (
            12,
            [
                // CIBA (docs/approvals.md): a client registered with --ciba, polling or pinged at
                // its notification endpoint; an approval a client asked for, with the message the
                // user is shown; and the client's request, found by its auth_req_id's SHA-256:
                // polled no faster than its interval, redeemed once. A ping-mode request's
                // notification is written with it (`waiting`), made due by the decision and
                // delivered like a webhook, until the request can no longer be redeemed.
                "ALTER TABLE oauth_clients ADD COLUMN ciba_mode TEXT",
                "ALTER TABLE oauth_clients ADD COLUMN notification_endpoint TEXT",
                "ALTER TABLE approvals ADD COLUMN client_id TEXT",
                "ALTER TABLE approvals ADD COLUMN binding_message TEXT",
                """
                CREATE TABLE ciba_requests (
                    hash TEXT PRIMARY KEY,
                    approval_id TEXT NOT NULL UNIQUE,
                    client_id TEXT NOT NULL,
                    scope TEXT NOT NULL,
                    authorization_details TEXT NOT NULL,
                    poll_interval BIGINT NOT NULL,
                    polled_at BIGINT,
                    redeem_until BIGINT NOT NULL,
                    redeemed_at BIGINT,
                    session_id TEXT
                )
                """,
                "CREATE INDEX ciba_requests_by_expiry ON ciba_requests (redeem_until)",
                """
                CREATE TABLE ciba_pings (
                    approval_id TEXT PRIMARY KEY,
                    url TEXT NOT NULL,
                    token TEXT NOT NULL,
                    auth_req_id TEXT NOT NULL,
                    status TEXT NOT NULL,
                    attempts BIGINT NOT NULL,
                    give_up_at BIGINT NOT NULL,
                    next_attempt_at BIGINT NOT NULL,
                    lease_owner TEXT,
                    lease_until BIGINT,
                    delivered_at BIGINT,
                    last_result TEXT
                )
                """,
                "CREATE INDEX ciba_pings_due ON ciba_pings (status, next_attempt_at)",
                "CREATE INDEX ciba_pings_by_expiry ON ciba_pings (give_up_at)",
            ]
        ),
    ]

    /// Idempotent retries (13), the group commit's lock (14) and the operator console (15).
    static let retries: [(version: Int64, statements: [String])] = [
        (
            13,
            [
                // The answers of POSTs sent with an Idempotency-Key (IdempotentRequest), kept in
                // the transaction of their change for a day: found by SHA-256 of the caller's
                // credential and the key, the request's fingerprint beside the answer, which is
                // sealed under a key derived from the Idempotency-Key (never stored).
                """
                CREATE TABLE idempotency_keys (
                    id TEXT PRIMARY KEY,
                    fingerprint TEXT NOT NULL,
                    response TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at)",
            ]
        ),
        (
            14,
            [
                // Never holds a row: PostgreSQL's writers lock it (LOCK TABLE, which takes no
                // snapshot) so that the servers' group commits run one after another
                // (PostgresWriter); SQLite's one writer needs no lock.
                "CREATE TABLE group_commit_lock (id BIGINT PRIMARY KEY)"
            ]
        ),
        (
            15,
            [
                // The operator console (docs/console.md): who is an admin, which accounts an admin
                // locked, which admin did what, and the traffic every instance counted, in
                // five-minute buckets (TrafficCounters).
                """
                CREATE TABLE user_roles (
                    user_id TEXT NOT NULL REFERENCES users (id),
                    role TEXT NOT NULL,
                    granted_at BIGINT NOT NULL,
                    PRIMARY KEY (user_id, role)
                )
                """,
                "ALTER TABLE users ADD COLUMN locked_at BIGINT",
                "ALTER TABLE audit_events ADD COLUMN actor_id TEXT",
                "ALTER TABLE audit_events ADD COLUMN detail TEXT",
                "CREATE INDEX audit_by_time ON audit_events (last_at)",
                """
                CREATE TABLE traffic_counts (
                    bucket BIGINT NOT NULL,
                    name TEXT NOT NULL,
                    count BIGINT NOT NULL,
                    PRIMARY KEY (bucket, name)
                )
                """,
            ]
        ),
    ]
}
