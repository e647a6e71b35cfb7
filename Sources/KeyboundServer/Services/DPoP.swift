import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire

// DPoP (RFC 9449): a session bound to a key the client holds, every use of its tokens
// accompanied by a fresh proof made by that key (docs/server.md, "DPoP").

/// A DPoP proof that passed every check of RFC 9449 §4.3 that needs no storage. Its single use
/// is recorded by ``Application/useUp(_:_:)`` in the transaction that acts on it.
struct DPoPProof: Sendable, Equatable {
    /// The RFC 7638 thumbprint of the key that made it: what a bound session keeps
    /// (`sessions.dpop_jkt`), and an OAuth token's `cnf.jkt`.
    let thumbprint: String
    /// The id its use is recorded under in `used_challenges`: `dpp_` and the base64url of
    /// SHA-256 over the thumbprint, a zero byte and the `jti`. Per key, so that nobody can use up
    /// the `jti` of another key's proof; and short, whatever the `jti`.
    let replayID: String
    /// When the proof stops being accepted (`iat` plus ``Application/dpopProofWindow``): its
    /// record must outlive that.
    let acceptedUntil: Date
}

/// Why a DPoP proof was refused. A login or the token endpoint answers it with 400, a resource
/// with 401 and `WWW-Authenticate: DPoP error="…"` (RFC 9449 §7.1, §8, §9); /v1 in problem+json
/// (``APIError/dpop(_:at:)``), OAuth's endpoints with ``oauthError``.
struct DPoPFailure: Error, Equatable {
    enum Kind: Sendable, Equatable {
        /// Missing where one is needed, malformed, or not for this request, time or key.
        case invalidProof
        /// Without the server's current nonce: the answer carries one in `DPoP-Nonce`.
        case useNonce
    }

    let kind: Kind
    /// What was wrong, for the client's developer; never a secret.
    let detail: String

    static func invalid(_ detail: String) -> DPoPFailure { DPoPFailure(kind: .invalidProof, detail: detail) }

    static let useNonce = DPoPFailure(
        kind: .useNonce, detail: "The DPoP proof needs the server's nonce: use the DPoP-Nonce header's value."
    )

    /// RFC 9449's error code: `invalid_dpop_proof` or `use_dpop_nonce`.
    var oauthError: String {
        switch kind {
        case .invalidProof: "invalid_dpop_proof"
        case .useNonce: "use_dpop_nonce"
        }
    }

    /// The /v1 problem code.
    var problemCode: ProblemCode {
        switch kind {
        case .invalidProof: .dpopProofInvalid
        case .useNonce: .useDPoPNonce
        }
    }
}

/// Server nonces for DPoP (RFC 9449 §8, §9) that need no storage: the nonce of a time slot of
/// ``lifetime`` seconds is the HMAC-SHA-256 of the slot's number under a key derived from the
/// server's challenge key (``ServerSecrets``), so every instance on the database issues and accepts
/// the same ones. The current slot's nonce and the previous one's are accepted: a nonce works for
/// between one and two lifetimes after it is first sent.
struct DPoPNonces: Sendable {
    /// Seconds per slot; 0 turns server nonces off.
    let lifetime: Int
    private let key: Data
    /// The nonces of the latest slot seen and of the one before it, made once per slot.
    private let made = Locked<(slot: Int64, current: String, previous: String)?>(nil)

    /// - Parameters:
    ///   - challengeKey: the server's challenge key; the nonces' own key is an HMAC of it, so a
    ///     nonce is never a login challenge's tag.
    ///   - lifetime: seconds per slot; 0 for no nonces.
    init(challengeKey: Data, lifetime: Int) throws {
        self.lifetime = lifetime
        key = try HMACSHA256.authenticationCode(for: Data("keybound dpop nonce v1".utf8), key: challengeKey)
    }

    /// The nonce to send now; nil when nonces are off.
    func current(at now: Date) -> String? { nonces(at: now)?.current }

    /// Whether `nonce` is the current slot's or the previous one's. A nonce is no secret (any
    /// request with a `DPoP` header gets the current one), so it is compared as it is.
    func accepts(_ nonce: String, at now: Date) -> Bool {
        guard let (current, previous) = nonces(at: now) else { return false }
        return nonce == current || nonce == previous
    }

    /// The current slot's nonce and the previous one's; nil when nonces are off.
    private func nonces(at now: Date) -> (current: String, previous: String)? {
        guard lifetime > 0 else { return nil }
        let slot = Int64(now.timeIntervalSince1970.rounded(.down)) / Int64(lifetime)
        if let made = made.withLock({ $0 }), made.slot == slot { return (made.current, made.previous) }
        guard let current = try? nonce(slot: slot), let previous = try? nonce(slot: slot - 1) else {
            return nil
        }
        made.withLock { $0 = (slot, current, previous) }
        return (current, previous)
    }

    private func nonce(slot: Int64) throws -> String {
        Base64URL.encode(try HMACSHA256.authenticationCode(for: Data(slot.bigEndianBytes), key: key))
    }
}

/// An http or https URI as RFC 9449 §4.3 step 9 compares `htu` with the request (RFC 3986 §6.2.2
/// and §6.2.3): scheme and host in lower case, the scheme's default port left out, no query and no
/// fragment, the path percent-decoded, `/` for an empty one. Read on the bytes: Foundation's
/// `URLComponents` cost more than the rest of a proof's checks but the signature.
struct TargetURI: Equatable {
    let scheme: String
    let host: String
    let port: Int?
    let path: String

    /// Reads `text`; nil for anything but an absolute http or https URI with a host and no user
    /// information.
    init?(_ text: String) { self.init(text, path: nil) }

    /// The URI of a request for `path` (as the server received it: decoded) on the server whose
    /// public root is `base` (`https://login.example.com`, perhaps with a path of its own).
    init?(base: String, path: String) { self.init(base, path: path) }

    private init?(_ text: String, path requestPath: String?) {
        let bytes = Array(text.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            bytes[colon...].starts(with: "://".utf8)
        else { return nil }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let rest = bytes[(colon + 3)...]
        let isDelimiter = { (byte: UInt8) in
            byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
        }
        let authorityEnd = rest.firstIndex(where: isDelimiter) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { return nil }
        // The port follows the last colon, unless that colon is inside an IPv6 literal's brackets.
        var hostEnd = authority.endIndex
        var port: Int?
        if let portColon = authority.lastIndex(of: UInt8(ascii: ":")),
            !authority[portColon...].contains(UInt8(ascii: "]"))
        {
            let digits = authority[(portColon + 1)...]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ (48...57).contains($0) }),
                let number = Int(String(decoding: digits, as: UTF8.self)), number <= 65_535
            else { return nil }
            (hostEnd, port) = (portColon, number)
        }
        let host = String(decoding: authority[..<hostEnd], as: UTF8.self).lowercased()
        guard !host.isEmpty else { return nil }
        let pathBytes = rest[authorityEnd...].prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        var path = String(decoding: pathBytes, as: UTF8.self)
        if pathBytes.contains(UInt8(ascii: "%")) {
            guard let decoded = path.removingPercentEncoding else { return nil }
            path = decoded
        }
        if let requestPath { path = (path.hasSuffix("/") ? String(path.dropLast()) : path) + requestPath }
        self.scheme = scheme
        self.host = host
        self.port = port == (scheme == "https" ? 443 : 80) ? nil : port
        self.path = path.isEmpty ? "/" : path
    }
}

extension Application {
    /// How far a proof's `iat` may be from the server's clock, either way, in seconds (RFC 9449
    /// §11.1 leaves it to the server; this covers a phone whose clock is a little off, and no more:
    /// a proof lives at most twice this).
    static let dpopProofWindow = 60

    /// The request's DPoP proof, checked (RFC 9449 §4.3): exactly one `DPoP` header; a JWS with
    /// `typ: dpop+jwt`, `alg: ES256`, a public P-256 `jwk` and the claims; `htm` the request's
    /// method; `htu` its URI (on ``Configuration/issuer`` when set, else the request's scheme and
    /// `Host`); `iat` within ``dpopProofWindow`` seconds of now; the current server nonce (when
    /// nonces are on); `ath` the hash of `accessToken` when one is given; the signature by the
    /// `jwk`. Uses nothing up and reads no storage: the caller checks the key against the session
    /// or token, then records the use with ``useUp(_:_:)``.
    ///
    /// The token endpoint and userinfo call this too; every response to a request with a proof
    /// carries a fresh `DPoP-Nonce` (``handle(_:on:)``).
    /// - Parameter accessToken: the access token the request presents (`Authorization: DPoP`),
    ///   nil at a login, a refresh or the token endpoint.
    /// - Returns: nil when the request has no `DPoP` header.
    /// - Throws: ``DPoPFailure`` for a proof that is not acceptable.
    func dpopProof(_ context: RequestContext, accessToken: String?) throws(DPoPFailure) -> DPoPProof? {
        let request = context.request
        guard let header = request.headers["dpop"] else { return nil }
        // Step 1: one header field with one value (a JWS has no comma). The HTTP layer trimmed it.
        guard !request.repeatedHeaderNames.contains("dpop"), !header.utf8.contains(UInt8(ascii: ",")) else {
            throw .invalid("A request carries one DPoP header.")
        }
        // Steps 2 to 5 and 7: a well-formed proof, ES256, a public key.
        let proof: DPoPProofToken
        do {
            proof = try DPoPProofToken(header)
        } catch {
            throw .invalid("The DPoP proof is malformed: \(error.detail).")
        }
        // Step 8.
        guard proof.method == request.method else {
            throw .invalid("The DPoP proof's htm is not \(request.method).")
        }
        // Step 9.
        guard let uri = TargetURI(proof.uri), uri == targetURI(context) else {
            throw .invalid("The DPoP proof's htu is not this request's URI.")
        }
        // Step 11, before the nonce: a proof out of its time is refused whatever its nonce.
        let now = context.now.timeIntervalSince1970
        guard abs(proof.issuedAt - now) <= Double(Self.dpopProofWindow) else {
            throw .invalid(
                "The DPoP proof's iat is more than \(Self.dpopProofWindow) s from the server's time.")
        }
        // Step 10.
        if dpopNonces.lifetime > 0 {
            guard let nonce = proof.nonce, dpopNonces.accepts(nonce, at: context.now) else { throw .useNonce }
        }
        // Step 12, the access token's part: `ath`. (Its key is the caller's to compare.)
        if let accessToken, proof.accessTokenHash != DPoP.accessTokenHash(accessToken) {
            throw .invalid("The DPoP proof's ath is not the hash of this access token.")
        }
        // Step 6 last: the one costly check.
        let thumbprint = proof.key.thumbprint
        guard let key = ParsedKeys.key(proof.key, thumbprint: thumbprint), ES256.isValid(proof.jws, key: key)
        else {
            throw .invalid("The DPoP proof's signature does not verify with its jwk.")
        }
        return DPoPProof(
            thumbprint: thumbprint,
            replayID: "dpp_"
                + Base64URL.encode(Digest.sha256(Data(thumbprint.utf8) + [0] + Data(proof.id.utf8))),
            acceptedUntil: Date(timeIntervalSince1970: proof.issuedAt + Double(Self.dpopProofWindow)))
    }

    /// Records the proof's use in `connection`'s transaction, in the shared store of used
    /// challenges (unique key): of any number of uses of one proof, on any instance, one commits.
    /// - Returns: false when the proof was used before: a replay, to be refused.
    func useUp(_ proof: DPoPProof, _ connection: any SQLConnection) throws -> Bool {
        try Rows.insertUsedChallenge(connection, id: proof.replayID, expiresAt: proof.acceptedUntil)
    }

    /// The URI a proof's `htu` must name for this request: ``Configuration/issuer`` and the path
    /// when the issuer is set; otherwise the scheme the server listens with and the request's
    /// `Host` (so behind a proxy that changes either, set `--issuer`).
    private func targetURI(_ context: RequestContext) -> TargetURI? {
        if let issuer = configuration.issuer { return TargetURI(base: issuer, path: context.request.path) }
        guard let host = context.request.headers["host"], !host.contains("/"), !host.contains("@") else {
            return nil
        }
        let scheme = configuration.tlsCertificatePath == nil ? "http" : "https"
        return TargetURI(base: "\(scheme)://\(host)", path: context.request.path)
    }

    // MARK: /v1

    /// The proof of a /v1 login or refresh (no access token): nil when the request has none.
    /// - Throws: ``APIError`` 400 `dpop_proof_invalid` or `use_dpop_nonce`.
    func loginProof(_ context: RequestContext) throws -> DPoPProof? {
        do {
            return try dpopProof(context, accessToken: nil)
        } catch {
            throw APIError.dpop(error, at: .login)
        }
    }

    /// ``useUp(_:_:)`` for a /v1 request, in the transaction that acts on the proof.
    /// - Throws: ``APIError`` `dpop_proof_invalid` for a replay, which rolls the transaction back.
    func useUp(_ proof: DPoPProof?, _ connection: any SQLConnection, at place: APIError.DPoPPlace) throws {
        guard let proof else { return }
        guard try useUp(proof, connection) else {
            throw APIError.dpop(
                .invalid("This DPoP proof was used before: make a new one for every request."), at: place)
        }
    }

    /// The `DPoP-Nonce` a response carries: for every request with a proof, or that presents a
    /// token with the DPoP scheme, the current nonce (nil when nonces are off).
    func dpopNonceHeader(for request: HTTPRequest) -> String? {
        guard request.headers["dpop"] != nil || PresentedToken.scheme(of: request) == .dpop else {
            return nil
        }
        return dpopNonces.current(at: clock.now)
    }
}

extension APIError {
    /// Where a /v1 request met a DPoP refusal, which decides the status (RFC 9449 §8, §9).
    enum DPoPPlace {
        /// A login or a refresh, as the token endpoint: 400.
        case login
        /// A bearer route: 401 with `WWW-Authenticate: DPoP error="…"`.
        case resource
    }

    /// The problem for a refused DPoP proof.
    static func dpop(_ failure: DPoPFailure, at place: DPoPPlace) -> APIError {
        switch place {
        case .login: APIError(400, failure.problemCode, failure.detail)
        case .resource:
            APIError(
                401, failure.problemCode, failure.detail,
                headers: ["WWW-Authenticate": #"DPoP algs="ES256", error="\#(failure.oauthError)""#])
        }
    }
}
