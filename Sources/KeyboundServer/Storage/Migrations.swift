import Foundation

/// Versioned schema migrations, identical in meaning on every engine. Each runs in one
/// transaction together with the row that records it.
package enum Migrations {
    /// Every migration, oldest first.
    package static let all = accountsAndDevices + providerAndEvents + retries

    /// Accounts, sessions, devices, approvals, passkeys and App Attest (1 to 8).
    static let accountsAndDevices: [(version: Int64, statements: [String])] = [
        (
            1,
            [
                """
                CREATE TABLE users (
                    id TEXT PRIMARY KEY,
                    username TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE throttles (
                    scope TEXT PRIMARY KEY,
                    failures BIGINT NOT NULL,
                    blocked_until BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE devices (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users (id),
                    client_id TEXT NOT NULL,
                    name TEXT NOT NULL,
                    key_protection TEXT NOT NULL,
                    public_key TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    last_used_at BIGINT,
                    failed_signatures BIGINT NOT NULL,
                    suspended_at BIGINT,
                    revoked_at BIGINT
                )
                """,
                "CREATE INDEX devices_by_user ON devices (user_id)",
                """
                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users (id),
                    client_id TEXT NOT NULL,
                    device_id TEXT,
                    auth_method TEXT NOT NULL,
                    auth_time BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    revoked_at BIGINT,
                    revoke_reason TEXT
                )
                """,
                "CREATE INDEX sessions_by_user ON sessions (user_id)",
                "CREATE INDEX sessions_by_device ON sessions (device_id)",
                """
                CREATE TABLE tokens (
                    hash TEXT PRIMARY KEY,
                    session_id TEXT NOT NULL REFERENCES sessions (id),
                    kind TEXT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT
                )
                """,
                "CREATE INDEX tokens_by_session ON tokens (session_id)",
                """
                CREATE TABLE challenges (
                    id TEXT PRIMARY KEY,
                    device_id TEXT NOT NULL REFERENCES devices (id),
                    payload TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT
                )
                """,
                """
                CREATE TABLE approvals (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users (id),
                    device_id TEXT NOT NULL REFERENCES devices (id),
                    action TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    status TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    decided_at BIGINT
                )
                """,
                """
                CREATE TABLE audit_events (
                    id TEXT PRIMARY KEY,
                    time BIGINT NOT NULL,
                    type TEXT NOT NULL,
                    method TEXT,
                    user_id TEXT,
                    device_id TEXT,
                    session_id TEXT,
                    client_address TEXT
                )
                """,
                "CREATE INDEX audit_by_user ON audit_events (user_id, time)",
            ]
        ),
        (
            2,
            [
                // Repeated refusals fold into one audit row: how many, and the latest time.
                "ALTER TABLE audit_events ADD COLUMN count BIGINT NOT NULL DEFAULT 1",
                "ALTER TABLE audit_events ADD COLUMN last_at BIGINT NOT NULL DEFAULT 0",
                "UPDATE audit_events SET last_at = time",
                // The user's list is ordered by latest activity; refusals find their row to fold into.
                "DROP INDEX audit_by_user",
                "CREATE INDEX audit_by_user ON audit_events (user_id, last_at)",
                "CREATE INDEX audit_fold ON audit_events (type, user_id, device_id, client_address, last_at)",
                // Bad signatures no longer suspend devices (the columns stay, unused), and
                // password failures are no longer counted per account alone: lift what the old
                // rules imposed.
                "UPDATE devices SET suspended_at = NULL, failed_signatures = 0",
                "DELETE FROM throttles WHERE scope LIKE 'account:%'",
            ]
        ),
        (
            3,
            [
                // Housekeeping finds ended sessions and expired approvals without a table scan.
                "CREATE INDEX sessions_by_revoked_at ON sessions (revoked_at)",
                "CREATE INDEX sessions_by_created_at ON sessions (created_at)",
                "CREATE INDEX approvals_by_expiry ON approvals (expires_at)",
            ]
        ),
        (
            4,
            [
                // Login challenges are no longer stored when issued (their id carries them, under
                // an HMAC with a key from `server_secrets`); a used one is recorded, once.
                "CREATE TABLE server_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                "CREATE TABLE used_challenges (id TEXT PRIMARY KEY, expires_at BIGINT NOT NULL)",
                "CREATE INDEX used_challenges_by_expiry ON used_challenges (expires_at)",
                "DROP TABLE challenges",
                // A login ends the client's live sessions: found without reading the ended ones,
                // which pile up for the retention period.
                "CREATE INDEX sessions_live_by_user ON sessions (user_id, client_id) WHERE revoked_at IS NULL",
            ]
        ),
        (
            5,
            [
                // Enumerated values became snake_case on the wire, and the devices table stores
                // the wire value.
                "UPDATE devices SET key_protection = 'secure_enclave' WHERE key_protection = 'secureEnclave'"
            ]
        ),
        (
            6,
            [
                // Passkeys: a credential id belongs to one user only (WebAuthn §7.1 step 26); the
                // unique index decides between concurrent registrations of the same one.
                """
                CREATE TABLE passkeys (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users (id),
                    credential_id TEXT NOT NULL UNIQUE,
                    public_key TEXT NOT NULL,
                    algorithm BIGINT NOT NULL,
                    sign_count BIGINT NOT NULL,
                    backup_eligible BIGINT NOT NULL,
                    backed_up BIGINT NOT NULL,
                    attestation_format TEXT NOT NULL,
                    attested BIGINT NOT NULL,
                    aaguid TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    last_used_at BIGINT
                )
                """,
                "CREATE INDEX passkeys_by_user ON passkeys (user_id)",
                // Passkey ceremonies in progress, keyed by their challenge (base64url): single use
                // through `used_at`, found again through the challenge the client data carries.
                """
                CREATE TABLE webauthn_challenges (
                    challenge TEXT PRIMARY KEY,
                    purpose TEXT NOT NULL,
                    user_id TEXT,
                    username TEXT,
                    named_user BIGINT NOT NULL,
                    session_id TEXT,
                    client_id TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT
                )
                """,
                "CREATE INDEX webauthn_challenges_by_expiry ON webauthn_challenges (expires_at)",
                // The passkey that opened a session: removing the passkey ends its sessions.
                "ALTER TABLE sessions ADD COLUMN passkey_id TEXT",
                "CREATE INDEX sessions_by_passkey ON sessions (passkey_id)",
                // App Attest: one outstanding challenge per session, and the attested key of a
                // device with the counter of its last accepted assertion.
                """
                CREATE TABLE app_attest_challenges (
                    session_id TEXT PRIMARY KEY,
                    challenge TEXT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT
                )
                """,
                """
                CREATE TABLE app_attest_keys (
                    device_id TEXT PRIMARY KEY REFERENCES devices (id),
                    key_id TEXT NOT NULL,
                    public_key TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    counter BIGINT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
            ]
        ),
        (
            7,
            [
                // Passkey challenges are no longer stored when issued (they carry their ceremony,
                // under an HMAC: `PasskeyChallenge`); a used one goes to `used_challenges`.
                "DROP TABLE webauthn_challenges",
                // A passkey whose sign count did not rise is suspended until its user signs in
                // another way.
                "ALTER TABLE passkeys ADD COLUMN clone_detected_at BIGINT",
                // Housekeeping deletes in small batches, each found through an index: expired
                // tokens, quiet throttle entries, expired App Attest challenges.
                "CREATE INDEX tokens_by_expiry ON tokens (expires_at)",
                "CREATE INDEX throttles_by_update ON throttles (updated_at)",
                "CREATE INDEX app_attest_challenges_by_expiry ON app_attest_challenges (expires_at)",
            ]
        ),
        (
            8,
            [
                // A folded audit row keeps its first client address in `client_address` and its
                // latest here. Rows folded before this kept only the latest, in `client_address`.
                "ALTER TABLE audit_events ADD COLUMN last_client_address TEXT",
                "UPDATE audit_events SET last_client_address = client_address",
            ]
        ),
    ]

    /// The newest version: the highest, wherever it stands in ``all``.
    package static var newest: Int64 { all.map(\.version).max() ?? 0 }

    /// What a migration writes besides its statements, in the same transaction, when SQL cannot
    /// say it portably (random secrets).
    static let rows: [Int64: @Sendable (any SQLConnection) throws -> Void] = [
        4: { try ServerSecrets.create(in: $0) }
    ]

    /// Applies every migration newer than the recorded version, each in its own transaction.
    package static func apply(to database: any Database) throws {
        try database.migrate { connection in
            try connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
                [])
        }
        for migration in all {
            try database.migrate { connection in
                let current =
                    try connection.queryOne("SELECT MAX(version) FROM schema_migrations", [])?
                    .optionalInteger(0) ?? 0
                guard current <= newest else { throw DatabaseError.schemaTooNew(current) }
                // Each version once, whether or not a later one is applied: a migration that
                // arrives in a merge with a lower number than one a database has still runs.
                guard
                    try connection.queryOne(
                        "SELECT version FROM schema_migrations WHERE version = ?",
                        [.integer(migration.version)])
                        == nil
                else { return }
                for statement in migration.statements { try connection.execute(statement, []) }
                try rows[migration.version]?(connection)
                try connection.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    [.integer(migration.version), .integer(Int64(Date().timeIntervalSince1970))])
            }
        }
    }
}
