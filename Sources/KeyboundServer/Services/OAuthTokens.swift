import Foundation
import KeyboundCrypto
import KeyboundWire

// The token endpoint (RFC 6749 §3.2, §4.1.3, §6) and the tokens it issues: RFC 9068 JWT access
// tokens, OpenID Connect ID tokens, and refresh tokens that rotate like /v1's.

/// An authorization code as stored: found by its SHA-256, used once.
private struct AuthorizationCodeRecord {
    let clientID: String
    let redirectURI: String
    let userID: String
    let authMethod: AuthMethod
    let authTime: Date
    let scope: String
    let nonce: String?
    let codeChallenge: String
    let expiresAt: Date
    let usedAt: Date?
    /// The session its exchange opened.
    let sessionID: String?
}

extension AuthorizationCodeRecord: SQLRecord {
    static let columns = """
        client_id, redirect_uri, user_id, auth_method, auth_time, scope, nonce, code_challenge, expires_at, used_at,
            session_id
        """

    init(row: inout SQLRowReader) throws {
        self.init(
            clientID: try row.text(), redirectURI: try row.text(), userID: try row.text(),
            authMethod: try row.vocabulary(), authTime: try row.date(), scope: try row.text(),
            nonce: try row.optionalText(), codeChallenge: try row.text(), expiresAt: try row.date(),
            usedAt: try row.optionalDate(), sessionID: try row.optionalText())
    }
}

/// What the tokens of a session say about the user and their sign-in.
struct TokenSubject {
    let userID: String
    let sessionID: String
    let clientID: String
    let scopes: [String]
    let authMethod: AuthMethod
    let authTime: Date
    /// The DPoP key the tokens are bound to, if any.
    let dpopJKT: String?
    /// What a CIBA request approved (RFC 9396 §9.1: in the access token and the token response).
    var authorizationDetails: JSONValue? = nil

    /// `amr` (RFC 8176): a password is `pwd`, a device key `hwk` (hardware-secured, used after
    /// the device verified its user), a passkey with user verification `user`.
    var authenticationMethods: [String] {
        switch authMethod {
        case .password: ["pwd"]
        case .device: ["hwk"]
        case .passkey: ["user"]
        }
    }
}

extension Application {
    /// `POST /oauth/token`: `authorization_code` (with PKCE), `refresh_token` and CIBA's grant.
    /// - Returns: what the grant issued; the route answers with its ``tokenAnswer(_:_:on:)``.
    func token(_ context: RequestContext) throws -> OAuthGrant {
        guard configuration.issuer != nil else { throw APIError.notFound }
        let parameters = try OAuthParameters(body: context.request)
        let client = try authenticateClient(parameters, context)
        let proof: DPoPProof?
        do { proof = try dpopProof(context, accessToken: nil) } catch { throw OAuthError(dpop: error) }
        if client.dpopRequired && proof == nil {
            throw OAuthError(dpop: .invalid("this client's tokens must be DPoP-bound: send a DPoP proof"))
        }
        switch parameters["grant_type"] {
        case "authorization_code":
            return try exchangeCode(parameters, client: client, proof: proof, context)
        case "refresh_token":
            return try refreshOAuthTokens(parameters, client: client, proof: proof, context)
        case CIBAGrant.type:
            return try redeemBackchannelRequest(parameters, client: client, proof: proof, context)
        case nil: throw OAuthError.invalidRequest("grant_type is missing")
        case let other?: throw OAuthError.unsupportedGrantType("grant_type \(other) is not supported")
        }
    }

    /// The token endpoint's answer to `grant`: 200 and the ``tokenResponse(_:issuer:at:on:)``.
    /// - Parameter connection: the write's that issued the grant, when the answer is kept for an
    ///   `Idempotency-Key` in its transaction (the signing key is read there).
    func tokenAnswer(_ grant: OAuthGrant, _ context: RequestContext, on connection: (any SQLConnection)?)
        throws -> HTTPResponse
    {
        guard let issuer = configuration.issuer else { throw APIError.notFound }
        return .oauthJSON(200, try tokenResponse(grant, issuer: issuer, at: context.now, on: connection))
    }

    /// The `authorization_code` grant: the code, single use, 60 s, bound to the client, its
    /// redirect URI and the PKCE verifier. A second use ends what the first opened (RFC 6749
    /// §4.1.2, RFC 9700 §4.5). With a DPoP proof (used up in the exchange's transaction) the
    /// access token is bound to its key, and so is a public client's session: its refresh needs a
    /// proof by the same key (RFC 9449 §5). A confidential client's refresh token is bound to the
    /// client's own authentication instead; each of its token requests binds its access token to
    /// the key of that request's proof.
    private func exchangeCode(
        _ parameters: OAuthParameters, client: OAuthClient, proof: DPoPProof?, _ context: RequestContext
    ) throws -> OAuthGrant {
        guard let code = parameters["code"], (16...128).contains(code.utf8.count) else {
            throw OAuthError.invalidRequest("code is missing")
        }
        guard let verifier = parameters["code_verifier"] else {
            throw OAuthError.invalidRequest("code_verifier is missing")
        }
        // RFC 7636 §4.1: 43 to 128 unreserved characters.
        guard (43...128).contains(verifier.utf8.count),
            verifier.utf8.allSatisfy({ Grammar.isAlphanumeric($0) || Array("-._~".utf8).contains($0) })
        else { throw OAuthError.invalidGrant("the code_verifier is not a PKCE verifier") }
        let hash = TokenHash.of(code)
        let query = "SELECT \(AuthorizationCodeRecord.columns) FROM oauth_codes WHERE hash = ?"
        // Refused from a read when the code was never issued: random codes cost no write.
        guard
            let first = try database.read({
                try $0.queryOne(AuthorizationCodeRecord.self, query, [.text(hash)])
            }),
            first.clientID == client.id
        else { throw OAuthError.invalidGrant("unknown code") }
        return try database.write { connection -> WriteOutcome<OAuthGrant> in
            guard let row = try connection.queryOne(AuthorizationCodeRecord.self, query, [.text(hash)]) else {
                return .refused(OAuthError.invalidGrant("unknown code"))
            }
            if row.usedAt != nil {
                // A second use: the code leaked. End the session its first use opened.
                if let sessionID = row.sessionID {
                    try revokeSessions(
                        connection, where: "id = ?", [.text(sessionID)], reason: "code_reuse",
                        now: context.now)
                }
                try audit(connection, context, .oauthCodeReuse, userID: row.userID, sessionID: row.sessionID)
                return .refused(
                    OAuthError.invalidGrant("this code was used before: what it issued is revoked"))
            }
            guard context.now < row.expiresAt else {
                return .refused(OAuthError.invalidGrant("the code has expired"))
            }
            guard parameters["redirect_uri"] == row.redirectURI else {
                return .refused(
                    OAuthError.invalidGrant("redirect_uri is not the one of the authorization request"))
            }
            guard Base64URL.encode(Digest.sha256(Data(verifier.utf8))) == row.codeChallenge else {
                return .refused(
                    OAuthError.invalidGrant("the code_verifier does not match the code_challenge"))
            }
            // Thrown: a replayed proof rolls the exchange back, and the code stays unused.
            try useUp(proof)(connection)
            try connection.execute(
                "UPDATE oauth_codes SET used_at = ? WHERE hash = ?", [.date(context.now), .text(hash)])
            let tokens: TokenResponse
            do {
                tokens = try openSession(
                    connection, context, userID: row.userID, clientID: client.id, method: row.authMethod,
                    deviceID: nil, authTime: row.authTime, scope: row.scope,
                    dpopJKT: client.isConfidential ? nil : proof?.thumbprint)
            } catch let error as APIError where error.code == .accountLocked {
                return .refused(OAuthError.invalidGrant("the user's account is locked"))
            }
            try connection.execute(
                "UPDATE oauth_codes SET session_id = ? WHERE hash = ?",
                [.text(tokens.sessionID), .text(hash)])
            let subject = TokenSubject(
                userID: row.userID, sessionID: tokens.sessionID, clientID: client.id,
                scopes: row.scope.split(separator: " ").map(String.init), authMethod: row.authMethod,
                authTime: row.authTime, dpopJKT: proof?.thumbprint)
            let refresh = subject.scopes.contains("offline_access") ? tokens.refreshToken : nil
            return .done(
                OAuthGrant(subject: subject, tokens: OAuthTokenSet(refreshToken: refresh, nonce: row.nonce)))
        }.get()
    }

    /// The `refresh_token` grant: rotates the client's refresh token like /v1 does, reuse
    /// included; the new access token has the session's scope, or the narrower one asked for. A
    /// request that widens the scope is refused before the token is used up.
    private func refreshOAuthTokens(
        _ parameters: OAuthParameters, client: OAuthClient, proof: DPoPProof?, _ context: RequestContext
    ) throws -> OAuthGrant {
        guard let token = parameters["refresh_token"] else {
            throw OAuthError.invalidRequest("refresh_token is missing")
        }
        let asked = parameters["scope"].map { $0.split(separator: " ").map(String.init) }
        do {
            // A public client's bound session: the proof must be by its key (checked and used up
            // by the rotation). A confidential client's: the proof, if any, binds the new access
            // token, and is used up here.
            return try rotateRefreshToken(
                token, context, of: .oauthClient(client.id), proof: client.isConfidential ? nil : proof
            ) { connection, row in
                guard
                    let session = try connection.queryOne(
                        OAuthSessionRecord.self,
                        "SELECT \(OAuthSessionRecord.columns) FROM sessions s WHERE s.id = ?",
                        [.text(row.sessionID)])
                else { throw APIError.tokenInvalid }
                // Thrown inside the transaction: rolled back, the refresh token stays usable.
                if let asked, !Set(asked).isSubset(of: session.scopes) {
                    throw OAuthError.invalidScope("a refresh may narrow the scope, not widen it")
                }
                if client.isConfidential { try useUp(proof)(connection) }
                let tokens = try issueTokens(
                    connection, sessionID: row.sessionID, userID: row.userID, now: context.now)
                let subject = TokenSubject(
                    userID: row.userID, sessionID: row.sessionID, clientID: client.id,
                    scopes: asked ?? session.scopes, authMethod: session.authMethod,
                    authTime: session.authTime,
                    dpopJKT: client.isConfidential ? proof?.thumbprint : session.dpopJKT)
                // The refresh token keeps the session's scope, whatever the access token's (RFC 6749 §6).
                let refresh = session.scopes.contains("offline_access") ? tokens.refreshToken : nil
                return OAuthGrant(subject: subject, tokens: OAuthTokenSet(refreshToken: refresh, nonce: nil))
            }
        } catch let error as APIError where error.code == .tokenInvalid {
            throw OAuthError.invalidGrant("the refresh token is unknown, expired, used or revoked")
        } catch let error as APIError where [.dpopProofInvalid, .useDPoPNonce].contains(error.code) {
            throw OAuthError(
                status: 400, error: error.code == .useDPoPNonce ? "use_dpop_nonce" : "invalid_dpop_proof",
                description: error.detail)
        }
    }

    /// The token response (RFC 6749 §5.1, OpenID Connect Core §3.1.3.3): a JWT access token, the
    /// refresh token when the session has `offline_access`, an ID token when `openid` was granted;
    /// for a CIBA grant the approved `authorization_details` (RFC 9396 §7) and the receipt.
    /// - Parameter connection: where to read the signing key (a transaction's), else a reader.
    func tokenResponse(
        _ grant: OAuthGrant, issuer: String, at now: Date, on connection: (any SQLConnection)? = nil
    ) throws -> JSONValue {
        let (subject, tokens) = (grant.subject, grant.tokens)
        let accessToken = try accessToken(subject, issuer: issuer, at: now, on: connection)
        var members = [
            JSONMember("access_token", .string(accessToken)),
            JSONMember("token_type", .string(subject.dpopJKT == nil ? "Bearer" : "DPoP")),
            JSONMember("expires_in", .integer(configuration.accessTokenLifetime)),
        ]
        if let refresh = tokens.refreshToken {
            members.append(JSONMember("refresh_token", .string(refresh)))
        }
        if subject.scopes.contains("openid") {
            members.append(
                JSONMember(
                    "id_token",
                    .string(
                        try idToken(
                            subject, accessToken: accessToken, nonce: tokens.nonce, issuer: issuer, at: now,
                            on: connection)))
            )
        }
        members.append(JSONMember("scope", .string(subject.scopes.joined(separator: " "))))
        if let details = subject.authorizationDetails {
            members.append(JSONMember("authorization_details", details))
        }
        if let receipt = tokens.receipt { members.append(JSONMember("keybound_receipt", .string(receipt))) }
        return .object(members)
    }

    /// Records the use of `proof`, if any, in a transaction: a replay throws (and rolls back).
    func useUp(_ proof: DPoPProof?) -> (any SQLConnection) throws -> Void {
        { connection in
            if let proof, try !self.useUp(proof, connection) {
                throw OAuthError(dpop: .invalid("this DPoP proof was used before"))
            }
        }
    }

    /// An RFC 9068 access token: `typ: at+jwt`; `aud` the issuer (the resource Keybound
    /// guards); `sid` the session, so introspection sees its revocation; `cnf.jkt` when bound.
    func accessToken(
        _ subject: TokenSubject, issuer: String, at now: Date, on connection: (any SQLConnection)? = nil
    ) throws -> String {
        let issued = now.milliseconds / 1000
        var claims = [
            JSONMember("iss", .string(issuer)), JSONMember("sub", .string(subject.userID)),
            JSONMember("aud", .string(issuer)), JSONMember("client_id", .string(subject.clientID)),
            JSONMember("scope", .string(subject.scopes.joined(separator: " "))),
            JSONMember("exp", .integer(Int(issued) + configuration.accessTokenLifetime)),
            JSONMember("iat", .integer(Int(issued))),
            JSONMember("jti", .string(SecureRandomBytes.identifier("at"))),
            JSONMember("auth_time", .integer(Int(subject.authTime.milliseconds / 1000))),
            JSONMember("amr", .array(subject.authenticationMethods.map { .string($0) })),
            JSONMember("sid", .string(subject.sessionID)),
        ]
        if let jkt = subject.dpopJKT {
            claims.append(JSONMember("cnf", .object([JSONMember("jkt", .string(jkt))])))
        }
        if let details = subject.authorizationDetails {
            claims.append(JSONMember("authorization_details", details))
        }
        return try signJWT(type: "at+jwt", claims: .object(claims), at: now, on: connection)
    }

    /// An OpenID Connect ID token (Core §2, §3.1.3.6): `aud` the client, `at_hash` the left
    /// half of SHA-256 of the access token.
    private func idToken(
        _ subject: TokenSubject, accessToken: String, nonce: String?, issuer: String, at now: Date,
        on connection: (any SQLConnection)?
    ) throws -> String {
        let issued = Int(now.milliseconds / 1000)
        var claims = [
            JSONMember("iss", .string(issuer)), JSONMember("sub", .string(subject.userID)),
            JSONMember("aud", .string(subject.clientID)),
            JSONMember("exp", .integer(issued + configuration.accessTokenLifetime)),
            JSONMember("iat", .integer(issued)),
            JSONMember("auth_time", .integer(Int(subject.authTime.milliseconds / 1000))),
            JSONMember("amr", .array(subject.authenticationMethods.map { .string($0) })),
            JSONMember(
                "at_hash", .string(Base64URL.encode(Digest.sha256(Data(accessToken.utf8)).prefix(16)))),
            JSONMember("sid", .string(subject.sessionID)),
        ]
        if let nonce { claims.append(JSONMember("nonce", .string(nonce))) }
        return try signJWT(type: "JWT", claims: .object(claims), at: now, on: connection)
    }
}

/// What a grant of the token endpoint issued, which ``Application/tokenResponse(_:issuer:at:on:)``
/// answers with.
struct OAuthGrant {
    let subject: TokenSubject
    let tokens: OAuthTokenSet
}

/// The refresh token, nonce and receipt that go with a token response.
struct OAuthTokenSet {
    var refreshToken: String?
    let nonce: String?
    /// The approval's receipt, for a CIBA grant.
    var receipt: String? = nil
}

/// What the tokens of an OAuth session say, read from the session.
struct OAuthSessionRecord {
    let scopes: [String]
    let authMethod: AuthMethod
    let authTime: Date
    let dpopJKT: String?
}

extension OAuthSessionRecord: SQLRecord {
    static let columns = "s.scope, s.auth_method, s.auth_time, s.dpop_jkt"

    init(row: inout SQLRowReader) throws {
        self.init(
            scopes: (try row.optionalText() ?? "").split(separator: " ").map(String.init),
            authMethod: try row.vocabulary(), authTime: try row.date(), dpopJKT: try row.optionalText())
    }
}
