import Foundation
import KeyboundWire

// Who a bearer request is: the access token it presents (`Bearer`, or `DPoP` with a proof by the
// session's key), checked against its session, its device and its proof (docs/server.md).

/// The authenticated caller of a bearer request.
struct Caller {
    let sessionID: String
    let userID: String
    let username: String
    let clientID: String
    let deviceID: String?
    let authMethod: AuthMethod
    let authTime: Date
    /// The proof of a request that presented a DPoP-bound token, checked against the session's key.
    var proof: DPoPProof?

    /// The same caller, with the proof its request carried.
    func with(_ proof: DPoPProof) -> Caller {
        var caller = self
        caller.proof = proof
        return caller
    }
}

/// An access token with its session, as ``Application/authenticate(_:)`` checks it.
private struct AccessTokenRecord {
    let expiresAt: Date
    let sessionRevokedAt: Date?
    let sessionCreatedAt: Date
    let deviceRevokedAt: Date?
    /// The thumbprint of the DPoP key the session is bound to, if it is.
    let dpopJKT: String?
    let caller: Caller
}

extension AccessTokenRecord: SQLRecord {
    static let columns = """
        t.expires_at, s.revoked_at, s.created_at, d.revoked_at, s.dpop_jkt,
            s.id, s.user_id, u.username, s.client_id, s.device_id, s.auth_method, s.auth_time
        """

    init(row: inout SQLRowReader) throws {
        let (expiresAt, revokedAt, createdAt, deviceRevokedAt, dpopJKT) =
            (
                try row.date(), try row.optionalDate(), try row.date(), try row.optionalDate(),
                try row.optionalText()
            )
        let caller = Caller(
            sessionID: try row.text(), userID: try row.text(), username: try row.text(),
            clientID: try row.text(),
            deviceID: try row.optionalText(), authMethod: try row.vocabulary(), authTime: try row.date())
        self.init(
            expiresAt: expiresAt, sessionRevokedAt: revokedAt, sessionCreatedAt: createdAt,
            deviceRevokedAt: deviceRevokedAt, dpopJKT: dpopJKT, caller: caller)
    }
}

/// The access token a request presents: `Authorization: Bearer <token>`, or `Authorization: DPoP
/// <token>` for a token bound to a DPoP key, with the proof in the `DPoP` header (RFC 9449 §7.1).
struct PresentedToken {
    enum Scheme: Sendable, Equatable {
        case bearer
        case dpop
    }

    let scheme: Scheme
    /// The token as it came: 16 to 128 bytes, a /v1 token's size, unless told otherwise.
    let token: String

    /// SHA-256 of the token, the key it is stored under.
    var hash: String { TokenHash.of(token) }

    /// Reads the `Authorization` header: the scheme in any case, then one or more spaces as
    /// RFC 7235 says, then the token (blanks after it ignored). Read byte by byte: Foundation's
    /// trimming and splitting cost more than the database lookup that follows.
    /// - Parameter sizes: the token's length in bytes (an OAuth access token, a JWT, is longer).
    /// - Throws: ``APIError/tokenInvalid`` when the header is missing or malformed.
    init(_ request: HTTPRequest, sizes: ClosedRange<Int> = 16...128) throws {
        guard let header = request.headers["authorization"], let scheme = Self.scheme(of: request) else {
            throw APIError.tokenInvalid
        }
        let bytes = Array(header.utf8)
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var start = scheme == .bearer ? 6 : 4
        var end = bytes.count
        while start < end, isBlank(bytes[start]) { start += 1 }
        while end > start, isBlank(bytes[end - 1]) { end -= 1 }
        guard sizes.contains(end - start) else { throw APIError.tokenInvalid }
        self.scheme = scheme
        token = String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// The scheme of the request's `Authorization` header, if it is `Bearer` or `DPoP` (in any
    /// case) followed by a space.
    static func scheme(of request: HTTPRequest) -> Scheme? {
        guard let header = request.headers["authorization"] else { return nil }
        let bytes = header.utf8
        for (name, scheme) in [("bearer", Scheme.bearer), ("dpop", Scheme.dpop)]
        where bytes.count > name.utf8.count
            && bytes[bytes.index(bytes.startIndex, offsetBy: name.utf8.count)] == UInt8(ascii: " ")
            && zip(bytes, name.utf8).allSatisfy({ $0 | 0x20 == $1 })
        {
            return scheme
        }
        return nil
    }
}

extension Application {
    /// Authenticates the access token of a request that only reads: `Authorization: Bearer`, or
    /// `Authorization: DPoP` with a proof by the session's key, which is then used up in a write of
    /// its own (the request has no other). A handler that writes does so through
    /// ``authenticatedWrite(_:_:)``, which checks again, and uses the proof up with its write.
    /// - Throws: ``APIError/tokenInvalid`` for a missing, unknown, expired or revoked token, or one
    ///   presented with the wrong scheme; `dpop_proof_invalid` or `use_dpop_nonce` (401) for a
    ///   proof that is not acceptable, not by the session's key, or used before.
    func authenticate(_ context: RequestContext) throws -> Caller {
        let caller = try checkCaller(context)
        if let proof = caller.proof { try database.write { try useUp(proof, $0, at: .resource) } }
        return caller
    }

    /// ``authenticate(_:)`` without using the proof up: for a handler that checks the caller
    /// before anything else and then writes through ``authenticatedWrite(_:_:)``, which uses it up.
    func checkCaller(_ context: RequestContext) throws -> Caller {
        let (presented, proof) = try presentedCredentials(context)
        return try database.read { try bearerCaller(presented, proof, context, $0) }
    }

    /// Runs `body` in one write transaction for the caller the bearer token names, checked inside
    /// that transaction. A check in an earlier transaction is not enough: a session that ended in
    /// between (logout, revocation, its device revoked) would still write. Every write a bearer
    /// token authorizes goes through here.
    /// A token that authorizes nothing is refused after a read, before the write starts: random
    /// tokens cost no write transaction (they would queue at the one writer).
    /// - Throws: ``APIError/tokenInvalid`` when the token no longer authorizes anything; nothing
    ///   is written then.
    func authenticatedWrite<T>(_ context: RequestContext, _ body: (any SQLConnection, Caller) throws -> T)
        throws -> T
    {
        let (presented, proof) = try presentedCredentials(context)
        _ = try database.read { try bearerCaller(presented, proof, context, $0) }
        return try database.write { connection in
            let caller = try bearerCaller(presented, proof, context, connection)
            // In the request's own transaction: of several uses of one proof, one commits. (One
            // that rolls back, refused by a thrown error, changed nothing and leaves the proof
            // unused, as if it had never arrived.)
            try useUp(proof, connection, at: .resource)
            return try body(connection, caller)
        }
    }

    /// The token the request presents and, for the DPoP scheme, its proof, checked without
    /// storage (``dpopProof(_:accessToken:)``, with `ath`).
    private func presentedCredentials(_ context: RequestContext) throws -> (PresentedToken, DPoPProof?) {
        let presented = try PresentedToken(context.request)
        guard presented.scheme == .dpop else { return (presented, nil) }
        do throws(DPoPFailure) {
            guard let proof = try dpopProof(context, accessToken: presented.token) else {
                throw DPoPFailure.invalid("Authorization: DPoP needs a proof in the DPoP header.")
            }
            return (presented, proof)
        } catch {
            throw APIError.dpop(error, at: .resource)
        }
    }

    /// Looks the presented token up on `connection`: its access token unexpired, its session a
    /// /v1 one (an OAuth client's session has its own JWT access tokens, for OAuth's routes),
    /// neither revoked nor past its maximum age, and the session's device (if any) not revoked.
    /// (Revoking a device also ends its sessions; the device is checked too so that this stays
    /// the one rule.) A session bound to a DPoP key takes its token only with the DPoP scheme and
    /// a proof by that key; an unbound one only as a bearer token.
    private func bearerCaller(
        _ presented: PresentedToken, _ proof: DPoPProof?, _ context: RequestContext,
        _ connection: any SQLConnection
    ) throws -> Caller {
        // Looked up by SHA-256(token), a preimage-resistant index key: the lookup's timing can at
        // most leak a prefix of a stored hash, which does not help to find a token for it. That is
        // what makes the check timing-safe; a comparison after `WHERE t.hash = ?` would add nothing.
        let row = try connection.queryOne(
            AccessTokenRecord.self,
            """
            SELECT \(AccessTokenRecord.columns)
            FROM tokens t JOIN sessions s ON s.id = t.session_id JOIN users u ON u.id = s.user_id
                LEFT JOIN devices d ON d.id = s.device_id
            WHERE t.hash = ? AND t.kind = 'access' AND s.scope IS NULL
            """, [.text(presented.hash)])
        guard let row, row.expiresAt > context.now, row.sessionRevokedAt == nil, row.deviceRevokedAt == nil,
            context.now < sessionEnd(createdAt: row.sessionCreatedAt)
        else { throw APIError.tokenInvalid }
        switch (row.dpopJKT, proof) {
        case (nil, nil): return row.caller
        case (nil, _?): throw APIError.unboundTokenAsDPoP
        case (_?, nil): throw APIError.boundTokenAsBearer
        case (let jkt?, let proof?):
            guard proof.thumbprint == jkt else {
                throw APIError.dpop(
                    .invalid("The DPoP proof is not by the key this token is bound to."), at: .resource)
            }
            return row.caller.with(proof)
        }
    }
}
