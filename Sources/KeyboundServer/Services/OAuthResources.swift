import Foundation
import KeyboundVerifier
import KeyboundWire

// What the issued tokens open: UserInfo (OpenID Connect Core §5.3), introspection (RFC 7662)
// and revocation (RFC 7009). All three see a revoked session at once: an access token names its
// session (`sid`), and the session is looked up.

/// A session as introspection reports it.
private struct IntrospectedSession {
    let userID: String
    let username: String
    /// The OAuth client the session was issued to; nil for a /v1 session, whose `client_id` is
    /// whatever the app named itself at login (it could name a registered client's id).
    let oauthClientID: String?
    let scope: String?
    let createdAt: Date
    let revokedAt: Date?
    let dpopJKT: String?
}

extension IntrospectedSession: SQLRecord {
    static let columns = "s.user_id, u.username, s.client_id, s.scope, s.created_at, s.revoked_at, s.dpop_jkt"

    init(row: inout SQLRowReader) throws {
        let userID = try row.text()
        let username = try row.text()
        let clientID = try row.text()
        let scope = try row.optionalText()
        self.init(
            userID: userID, username: username, oauthClientID: scope == nil ? nil : clientID, scope: scope,
            createdAt: try row.date(), revokedAt: try row.optionalDate(), dpopJKT: try row.optionalText())
    }
}

/// A stored (opaque) token with its session.
private struct StoredToken {
    let kind: String
    let expiresAt: Date
    let usedAt: Date?
    let sessionID: String
}

extension StoredToken: SQLRecord {
    static let columns = "t.kind, t.expires_at, t.used_at, t.session_id"

    init(row: inout SQLRowReader) throws {
        self.init(
            kind: try row.text(), expiresAt: try row.date(), usedAt: try row.optionalDate(),
            sessionID: try row.text())
    }
}

extension Application {
    /// An access token longer than this is none of ours (they are about 700 bytes).
    static let longestAccessToken = 4096

    /// The issuer's published keys, as verifiers see them.
    func publishedKeySet(at now: Date) throws -> JWKSet {
        JWKSet(keys: try publishedSigningKeys(at: now).map(\.publicJWK))
    }

    /// Verifies an access token this server issued and finds its live session.
    /// - Returns: the token's claims and its session; nil when the token is not one of ours,
    ///   is expired, or its session has ended.
    private func liveAccessToken(_ token: String, issuer: String, at now: Date) throws
        -> (claims: AccessToken, session: IntrospectedSession)?
    {
        guard
            let claims = try? AccessTokenVerifier(
                issuer: issuer, audience: issuer, keys: JWKS(publishedKeySet(at: now)), leeway: 0
            ).claims(of: token, at: now), let sessionID = claims.sessionID,
            let session = try liveSession(sessionID, at: now)
        else { return nil }
        return (claims, session)
    }

    /// The opaque token stored as `token`'s hash, whatever its kind or state.
    private func storedToken(_ token: String) throws -> StoredToken? {
        try database.read {
            try $0.queryOne(
                StoredToken.self, "SELECT \(StoredToken.columns) FROM tokens t WHERE t.hash = ?",
                [.text(TokenHash.of(token))])
        }
    }

    private func liveSession(_ id: String, at now: Date) throws -> IntrospectedSession? {
        guard Grammar.isIdentifier(id),
            let session = try database.read({
                try $0.queryOne(
                    IntrospectedSession.self,
                    "SELECT \(IntrospectedSession.columns) FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = ?",
                    [.text(id)])
            }), session.revokedAt == nil, now < sessionEnd(createdAt: session.createdAt)
        else { return nil }
        return session
    }

    /// `GET` or `POST /oauth/userinfo`: `sub` and `preferred_username` for an access token with
    /// the `openid` scope.
    func userinfo(_ context: RequestContext) throws -> HTTPResponse {
        guard let issuer = configuration.issuer else { throw APIError.notFound }
        guard context.request.headers["authorization"] != nil else {
            // No credentials at all: the challenge names no error (RFC 6750 §3.1).
            throw OAuthError(
                status: 401, error: "invalid_token", description: "an access token is required",
                headers: ["WWW-Authenticate": #"Bearer realm="keybound", DPoP algs="ES256""#])
        }
        guard let presented = try? PresentedToken(context.request, sizes: 16...Self.longestAccessToken),
            let found = try liveAccessToken(presented.token, issuer: issuer, at: context.now)
        else { throw OAuthError.invalidToken("the access token is missing, unknown, expired or revoked") }
        try checkSenderConstraint(found.claims, presented, context)
        guard found.claims.scopes.contains("openid") else { throw OAuthError.insufficientScope("openid") }
        return .oauthJSON(
            200,
            .object([
                JSONMember("sub", .string(found.claims.subject)),
                JSONMember("preferred_username", .string(found.session.username)),
            ]))
    }

    /// A DPoP-bound token (`cnf.jkt`) must come as `Authorization: DPoP` with a fresh proof by
    /// its key over this request and the token (`ath`), used up here; a bearer token as `Bearer`
    /// (RFC 9449 §7).
    /// - Throws: ``OAuthError`` 401 with a `DPoP` challenge.
    private func checkSenderConstraint(
        _ claims: AccessToken, _ presented: PresentedToken, _ context: RequestContext
    )
        throws
    {
        func refuse(_ error: String, _ description: String) -> OAuthError {
            OAuthError(
                status: 401, error: error, description: description,
                headers: ["WWW-Authenticate": #"DPoP algs="ES256", error="\#(error)""#])
        }
        guard let jkt = claims.boundKeyThumbprint else {
            guard presented.scheme == .bearer else {
                throw OAuthError.invalidToken(
                    "this token is not DPoP-bound: send it as Authorization: Bearer")
            }
            return
        }
        guard presented.scheme == .dpop else {
            throw refuse(
                "invalid_token", "this token is DPoP-bound: send it as Authorization: DPoP, with a proof")
        }
        let proof: DPoPProof?
        do { proof = try dpopProof(context, accessToken: presented.token) } catch {
            throw refuse(error.oauthError, error.detail)
        }
        guard let proof, proof.thumbprint == jkt else {
            throw refuse("invalid_dpop_proof", "a DPoP proof by the key this token is bound to is required")
        }
        guard try database.write({ try useUp(proof, $0) }) else {
            throw refuse("invalid_dpop_proof", "this DPoP proof was used before")
        }
    }

    /// `POST /oauth/introspect` (RFC 7662), for confidential clients: any token Keybound issued —
    /// an OAuth access token (JWT), an OAuth refresh token, a /v1 access or refresh token — is
    /// `active` with its claims while it is unexpired and its session lives; anything else is
    /// just `{"active": false}`.
    func introspect(_ context: RequestContext) throws -> HTTPResponse {
        guard let issuer = configuration.issuer else { throw APIError.notFound }
        let parameters = try OAuthParameters(body: context.request)
        let client = try authenticateClient(parameters, context)
        guard client.isConfidential else {
            throw OAuthError.unauthorizedClient("introspection is for confidential clients")
        }
        guard let token = parameters["token"] else { throw OAuthError.invalidRequest("token is missing") }
        let inactive = JSONValue.object([JSONMember("active", .bool(false))])
        if let (claims, session) = try liveAccessToken(token, issuer: issuer, at: context.now) {
            return .oauthJSON(
                200,
                activeToken(
                    session, boundTo: claims.boundKeyThumbprint, scope: claims.scopes.joined(separator: " "),
                    issuedAt: claims.issuedAt, expiresAt: claims.expiresAt, issuer: issuer,
                    approved: claims.approvedAction))
        }
        guard (16...128).contains(token.utf8.count),
            let stored = try storedToken(token), stored.usedAt == nil, context.now < stored.expiresAt,
            let session = try liveSession(stored.sessionID, at: context.now)
        else { return .oauthJSON(200, inactive) }
        return .oauthJSON(
            200,
            activeToken(
                session, boundTo: session.dpopJKT, isRefreshToken: stored.kind == TokenKind.refresh.rawValue,
                scope: session.scope, issuedAt: nil, expiresAt: stored.expiresAt, issuer: issuer))
    }

    /// An active introspection answer. `boundTo` is the thumbprint the token itself is bound to: a
    /// JWT's own `cnf.jkt` (a confidential client's access token is bound per request, its session
    /// is not), an opaque token's session's key. `approved` is what a CIBA grant's access token
    /// carries as `authorization_details`: a gateway that introspects sees it too (RFC 9396 §9.2).
    private func activeToken(
        _ session: IntrospectedSession, boundTo jkt: String?, isRefreshToken: Bool = false, scope: String?,
        issuedAt: Date?, expiresAt: Date, issuer: String, approved: ApprovalAction? = nil
    ) -> JSONValue {
        var members = [
            JSONMember("active", .bool(true)), JSONMember("sub", .string(session.userID)),
            JSONMember("username", .string(session.username)),
        ]
        // RFC 7662 §2.2: the OAuth client the token was issued to; a /v1 token has none.
        if let clientID = session.oauthClientID { members.append(JSONMember("client_id", .string(clientID))) }
        if let scope { members.append(JSONMember("scope", .string(scope))) }
        members.append(JSONMember("exp", .integer(Int(expiresAt.milliseconds / 1000))))
        if let issuedAt { members.append(JSONMember("iat", .integer(Int(issuedAt.milliseconds / 1000)))) }
        members.append(JSONMember("iss", .string(issuer)))
        // token_type is an access token's type (RFC 7662 §2.2, RFC 6749 §7.1): none for a refresh token.
        if !isRefreshToken {
            members.append(JSONMember("token_type", .string(jkt == nil ? "Bearer" : "DPoP")))
        }
        if let jkt {
            members.append(JSONMember("cnf", .object([JSONMember("jkt", .string(jkt))])))
        }
        if let approved {
            members.append(JSONMember("authorization_details", TransferAuthorizationDetails.json(approved)))
        }
        return .object(members)
    }

    /// `POST /oauth/revoke` (RFC 7009): a refresh token ends its session (the whole family), an
    /// access token its session. A token that is unknown, or the requesting client's not, changes
    /// nothing and is answered 200 all the same (§2.2: the client need not know).
    func revoke(_ context: RequestContext) throws -> HTTPResponse {
        guard let issuer = configuration.issuer else { throw APIError.notFound }
        let parameters = try OAuthParameters(body: context.request)
        let client = try authenticateClient(parameters, context)
        guard let token = parameters["token"] else { throw OAuthError.invalidRequest("token is missing") }
        var sessionID: String?
        if let (claims, _) = try liveAccessToken(token, issuer: issuer, at: context.now),
            claims.clientID == client.id
        {
            sessionID = claims.sessionID
        } else if (16...128).contains(token.utf8.count),
            let stored = try storedToken(token),
            try liveSession(stored.sessionID, at: context.now)?.oauthClientID == client.id
        {
            sessionID = stored.sessionID
        }
        if let sessionID {
            try database.write { connection in
                try revokeSessions(
                    connection, where: "id = ?", [.text(sessionID)], reason: "revoked", now: context.now)
            }
        }
        return HTTPResponse(status: 200, headers: ["Cache-Control": "no-store"])
    }
}
