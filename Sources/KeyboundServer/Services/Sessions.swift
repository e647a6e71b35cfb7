import Foundation
import KeyboundWire

/// A refresh token of a live session, as ``Application/rotateRefreshToken(_:_:of:proof:then:)`` rotates it.
struct RefreshTokenRecord {
    let expiresAt: Date
    let usedAt: Date?
    let sessionID: String
    let userID: String
    let sessionCreatedAt: Date
    let clientID: String
    /// The session's OAuth scope; nil for a /v1 session.
    let scope: String?
    /// The thumbprint of the DPoP key the session is bound to, if it is.
    let dpopJKT: String?
}

extension RefreshTokenRecord: SQLRecord {
    static let columns =
        "t.expires_at, t.used_at, s.id, s.user_id, s.created_at, s.client_id, s.scope, s.dpop_jkt"

    init(row: inout SQLRowReader) throws {
        self.init(
            expiresAt: try row.date(), usedAt: try row.optionalDate(), sessionID: try row.text(),
            userID: try row.text(), sessionCreatedAt: try row.date(), clientID: try row.text(),
            scope: try row.optionalText(), dpopJKT: try row.optionalText())
    }
}

/// Whose refresh tokens a rotation accepts: /v1 sessions', or one OAuth client's.
enum RefreshTokenHolder {
    case api
    case oauthClient(String)

    /// The condition on `sessions s`, and its parameters.
    var condition: (sql: String, parameters: [SQLValue]) {
        switch self {
        case .api: ("s.scope IS NULL", [])
        case .oauthClient(let id): ("s.scope IS NOT NULL AND s.client_id = ?", [.text(id)])
        }
    }
}

extension Application {
    // MARK: Tokens and sessions

    /// Issues a fresh access and refresh token for a session.
    /// - Parameter bound: whether the session is bound to a DPoP key: then `token_type` is `DPoP`.
    func issueTokens(
        _ connection: any SQLConnection, sessionID: String, userID: String, bound: Bool = false, now: Date
    ) throws -> TokenResponse {
        let access = SecureRandomBytes.token()
        let refresh = SecureRandomBytes.token()
        try Rows.insertToken(
            connection, access, kind: .access, sessionID: sessionID,
            expiresAt: now.adding(seconds: configuration.accessTokenLifetime))
        try Rows.insertToken(
            connection, refresh, kind: .refresh, sessionID: sessionID,
            expiresAt: now.adding(seconds: configuration.refreshTokenLifetime))
        return TokenResponse(
            accessToken: access, refreshToken: refresh, tokenType: bound ? DPoP.scheme : "Bearer",
            expiresIn: configuration.accessTokenLifetime, sessionID: sessionID, userID: userID)
    }

    /// Opens a session: ends the user's previous session from the same client (or all of the
    /// user's sessions with `--single-session`), then issues tokens. A locked account opens none,
    /// and on the console's listener only an administrator does (403, the whole login rolled back).
    /// - Parameters:
    ///   - authTime: when the user authenticated, if not now (an OAuth code exchange).
    ///   - scope: an OAuth client's granted scope; nil for a /v1 session.
    ///   - dpopJKT: the DPoP key the session is bound to (RFC 9449), if any.
    ///   - proof: the DPoP proof of a /v1 login: used up here (``useUp(_:_:at:)``; a replay
    ///     throws, and the whole login rolls back), and the session is bound to its key.
    ///   - standing: the user's lock and role, when the caller has read them in this transaction
    ///     already (with its own reads, in one round trip); else they are read here.
    func openSession(
        _ connection: any SQLConnection, _ context: RequestContext, userID: String, clientID: String,
        method: AuthMethod, deviceID: String?, authTime: Date? = nil, scope: String? = nil,
        dpopJKT: String? = nil, proof: DPoPProof? = nil, standing: AccountStanding? = nil
    ) throws -> TokenResponse {
        if let standing {
            try standing.check(context)
        } else {
            try AccountStanding.read(connection, userID: userID).check(context)
        }
        try useUp(proof, connection, at: .login)
        let dpopJKT = dpopJKT ?? proof?.thumbprint
        let sessionID = SecureRandomBytes.timeOrderedIdentifier("ses", milliseconds: context.now.milliseconds)
        try Rows.insertSession(
            connection, id: sessionID, userID: userID, clientID: clientID, deviceID: deviceID, method: method,
            createdAt: context.now, authTime: authTime, scope: scope, dpopJKT: dpopJKT)
        try audit(
            connection, context, .login, method: AuditMethod(method), userID: userID, deviceID: deviceID,
            sessionID: sessionID)
        let tokens = try issueTokens(
            connection, sessionID: sessionID, userID: userID, bound: dpopJKT != nil, now: context.now)
        // An OAuth client's sessions (a scope) replace nothing: a web app's user may sign in from
        // two browsers. A /v1 login replaces the /v1 session of its client, or, with
        // --single-session, every session of the user. Last, so that the statements above, which
        // nobody waits for, go in the round trip of this one (PostgreSQL).
        if scope == nil, configuration.singleSession {
            try revokeSessions(
                connection, where: "user_id = ? AND id <> ?", [.text(userID), .text(sessionID)],
                reason: "replaced", now: context.now)
        } else if scope == nil {
            try revokeSessions(
                connection, where: "user_id = ? AND client_id = ? AND scope IS NULL AND id <> ?",
                [.text(userID), .text(clientID), .text(sessionID)], reason: "replaced", now: context.now)
        }
        metrics.recordLogin(method: method.rawValue, outcome: "success")
        traffic.count(.login(scope == nil ? method.rawValue : "oauth"), at: context.now)
        return tokens
    }

    /// Revokes every live session matching `condition`; their tokens stop working at once.
    /// Each is a `session.revoked` event, with `reason`.
    func revokeSessions(
        _ connection: any SQLConnection, where condition: String, _ parameters: [SQLValue], reason: String,
        now: Date
    ) throws {
        // The endpoints that take the event in the same round trip (PostgreSQL).
        let answers = try connection.queries([
            SQLStatement(
                """
                UPDATE sessions SET revoked_at = ?, revoke_reason = ? WHERE revoked_at IS NULL AND \(condition)
                RETURNING id, user_id, client_id
                """,
                [.date(now), .text(reason)] + parameters),
            Self.subscribers(of: .sessionRevoked),
        ])
        let endpoints = try Self.endpointIDs(answers[1])
        for session in answers[0] {
            try emit(
                connection, now: now, .sessionRevoked,
                [
                    JSONMember("session_id", .string(try session.text(0))),
                    JSONMember("user_id", .string(try session.text(1))),
                    JSONMember("client_id", .string(try session.text(2))),
                    JSONMember("reason", .string(reason)),
                ], endpoints: endpoints)
        }
    }

    /// When a session created at `createdAt` ends for good (``Configuration/sessionMaxAge``),
    /// however often it was refreshed.
    func sessionEnd(createdAt: Date) -> Date { createdAt.adding(seconds: configuration.sessionMaxAge) }

    // MARK: Handlers

    /// `POST /v1/sessions/refresh`: rotates the refresh token. Reuse of a rotated one ends the
    /// whole session (RFC 9700 §4.14.2), and so does the session's maximum age. A session bound to
    /// a DPoP key refreshes only with a proof by that key (``rotateRefreshToken(_:_:of:proof:then:)``).
    func refresh(_ context: RequestContext, _ body: RequestBody<RefreshRequest>) throws -> TokenResponse {
        let request = try body.decode()
        let proof = try loginProof(context)
        return try rotateRefreshToken(request.refreshToken, context, of: .api, proof: proof) {
            connection, row in
            try issueTokens(
                connection, sessionID: row.sessionID, userID: row.userID, bound: row.dpopJKT != nil,
                now: context.now)
        }
    }

    /// Rotates a refresh token of a live session of `holder`: marks it used and runs `issue` in the
    /// same transaction. A rotated token presented again is a copy in someone else's hands: the
    /// whole session ends (RFC 9700 §4.14.2), and so it does past its maximum age.
    ///
    /// A session bound to a DPoP key refreshes only with a proof by that key (RFC 9449 §5),
    /// checked before anything is written: a copy of its refresh token without the key can
    /// neither rotate it nor, presenting a used one, end the session. The proof is used up in the
    /// rotation's transaction. A session opened without a proof stays a bearer session, proof or
    /// not: a key is bound when a session opens, so whoever copied a bearer refresh token cannot
    /// bind the session to a key of their own.
    /// - Parameter proof: the request's DPoP proof (``dpopProof(_:accessToken:)``), if any.
    /// - Throws: ``APIError/tokenInvalid`` for a token that rotates nothing (unknown, expired,
    ///   used, another holder's, its session ended); what ends a session is committed first.
    ///   400 `dpop_proof_invalid` (``APIError/dpop(_:at:)``) for a bound session's refresh without
    ///   a proof by its key, or with a used one.
    func rotateRefreshToken<T>(
        _ token: String, _ context: RequestContext, of holder: RefreshTokenHolder, proof: DPoPProof?,
        then issue: (any SQLConnection, RefreshTokenRecord) throws -> T
    ) throws -> T {
        guard (16...128).contains(token.utf8.count) else { throw APIError.tokenInvalid }
        // Looked up by SHA-256(token), which keeps the lookup timing-safe (see `authenticate`).
        let hash = TokenHash.of(token)
        let (holderCondition, holderParameters) = holder.condition
        let query = """
            SELECT \(RefreshTokenRecord.columns) FROM tokens t JOIN sessions s ON s.id = t.session_id
            WHERE t.hash = ? AND t.kind = 'refresh' AND s.revoked_at IS NULL AND \(holderCondition)
            """
        // A token that is not stored, or whose session has ended, changes nothing: refused after
        // a read, so random tokens cost no write transaction. The write checks everything again.
        guard
            let known = try database.read({
                try $0.queryOne(RefreshTokenRecord.self, query, [.text(hash)] + holderParameters)
            })
        else { throw APIError.tokenInvalid }
        if let jkt = known.dpopJKT, proof?.thumbprint != jkt {
            throw APIError.dpop(
                .invalid(
                    proof == nil
                        ? "This session is bound to a DPoP key: its refresh needs a proof by that key."
                        : "The DPoP proof is not by the key this session is bound to."), at: .login)
        }
        return try database.write { connection -> WriteOutcome<T> in
            guard
                let row = try connection.queryOne(
                    RefreshTokenRecord.self, query, [.text(hash)] + holderParameters)
            else { return .refused(.tokenInvalid) }
            // First: a replayed proof rolls back before anything else is written.
            if row.dpopJKT != nil { try useUp(proof, connection, at: .login) }
            if row.usedAt != nil {
                // Reuse of a rotated refresh token: someone else has a copy. End the whole family.
                try revokeSessions(
                    connection, where: "id = ?", [.text(row.sessionID)], reason: "refresh_reuse",
                    now: context.now)
                try audit(connection, context, .refreshReuse, userID: row.userID, sessionID: row.sessionID)
                metrics.recordLogin(method: "refresh", outcome: "reuse")
                return .refused(.tokenInvalid)
            }
            guard context.now < sessionEnd(createdAt: row.sessionCreatedAt) else {
                // The absolute lifetime is over: end the family (committed with the refusal).
                try revokeSessions(
                    connection, where: "id = ?", [.text(row.sessionID)], reason: "max_age", now: context.now)
                return .refused(.tokenInvalid)
            }
            guard row.expiresAt > context.now else { return .refused(.tokenInvalid) }
            let changed = try connection.execute(
                "UPDATE tokens SET used_at = ? WHERE hash = ? AND used_at IS NULL",
                [.date(context.now), .text(hash)])
            guard changed == 1 else { return .refused(.tokenInvalid) }
            metrics.recordLogin(method: "refresh", outcome: "success")
            return .done(try issue(connection, row))
        }.get()
    }

    /// `DELETE /v1/sessions/current`.
    func logout(_ context: RequestContext) throws -> NoBody {
        try authenticatedWrite(context) { connection, caller in
            try revokeSessions(
                connection, where: "id = ?", [.text(caller.sessionID)], reason: "logout", now: context.now)
            try audit(
                connection, context, .logout, userID: caller.userID, deviceID: caller.deviceID,
                sessionID: caller.sessionID)
        }
        return NoBody()
    }

    /// `GET /v1/me`.
    func me(_ context: RequestContext) throws -> MeResponse {
        let caller = try authenticate(context)
        return MeResponse(
            userID: caller.userID, username: caller.username, sessionID: caller.sessionID,
            authMethod: caller.authMethod, authTime: caller.authTime, stepUpExpiresAt: stepUpEnd(caller))
    }

    /// The time from which the caller's session may no longer do what needs a recent password or
    /// passkey login (binding a device, adding a passkey): that login plus
    /// ``Configuration/stepUpWindow``. Nil for a device session, which never may.
    func stepUpEnd(_ caller: Caller) -> Date? {
        guard caller.authMethod == .password || caller.authMethod == .passkey else { return nil }
        return caller.authTime.adding(seconds: configuration.stepUpWindow)
    }

    /// Refuses a caller who has not authenticated with a password or a passkey within the
    /// step-up window (whose end `GET /v1/me` states).
    func requireStepUp(_ caller: Caller, _ context: RequestContext, for operation: String) throws {
        guard let end = stepUpEnd(caller), context.now < end else {
            throw APIError(
                403, .stepUpRequired,
                "\(operation) needs a password or passkey login within the last \(configuration.stepUpWindow) seconds."
            )
        }
    }
}
