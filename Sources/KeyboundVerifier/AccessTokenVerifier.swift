import Foundation
import KeyboundCrypto
import KeyboundWire

/// Why a token was refused. Each code names the first check that failed; ``detail`` says more,
/// for logs (it never repeats the token).
public struct VerificationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The check that failed.
    public enum Code: String, Sendable, Hashable {
        /// Not a compact JWS with JSON header and claims.
        case malformed
        /// The header's `alg` is not ES256 (`none`, `HS256`, anything else).
        case unsupportedAlgorithm
        /// The header's `typ` is not what the token must say (`at+jwt` for access tokens).
        case wrongType
        /// No key of the JWK Set has the header's `kid`.
        case unknownKey
        /// The signature does not verify with that key.
        case badSignature
        /// `iss` is not the expected issuer.
        case wrongIssuer
        /// `aud` does not name the expected audience.
        case wrongAudience
        /// `exp` has passed.
        case expired
        /// `iat` lies in the future (beyond the leeway).
        case notYetValid
        /// A required claim is missing or has the wrong type.
        case missingClaim
        /// The token is bound to a DPoP key (`cnf.jkt`, RFC 9449) and came without a proof: a
        /// copied token must not pass as a bearer token (§7.1). Or it is not bound and came with
        /// the DPoP scheme.
        case senderConstrained
        /// The DPoP proof is malformed, for another request or time, not by the token's key, or
        /// not over this token (`ath`).
        case invalidProof
    }

    /// The check that failed.
    public let code: Code
    /// What exactly, for logs.
    public let detail: String

    /// - Parameters:
    ///   - code: the check that failed.
    ///   - detail: what exactly.
    public init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// `VerificationError.code: detail`.
    public var description: String { "VerificationError.\(code.rawValue): \(detail)" }

    /// Equal when the codes are.
    public static func == (lhs: VerificationError, rhs: VerificationError) -> Bool { lhs.code == rhs.code }

    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// What a KeyboundWire refusal says: its detail. (`WireFailure` is `any Error` on the SDKs without
/// typed throws, where `error.detail` would not compile.)
func wireDetail(_ error: any Error) -> String { (error as? WireError)?.detail ?? "\(error)" }

/// The public keys an issuer signs with: its JWK Set, as `GET /oauth/jwks` serves it. Only P-256
/// keys (ES256) are kept; others are passed over.
public struct JWKS: Sendable, Hashable {
    /// The set as KeyboundWire reads it.
    package let keySet: JWKSet

    /// Reads a JWK Set (`{"keys": [...]}`).
    /// - Throws: ``VerificationError`` `malformed` when it is not one.
    public init(json: Data) throws {
        do {
            keySet = try JWKSet(json: JSON.parse(json))
        } catch {
            throw VerificationError(.malformed, "not a JWK Set: \(wireDetail(error))")
        }
    }

    /// A set already read, as the issuer itself holds it.
    package init(_ keySet: JWKSet) { self.keySet = keySet }

    /// The key ids of the set, in its order.
    public var keyIDs: [String] { keySet.keys.compactMap(\.kid) }
}

/// An access token that verified: the claims of RFC 9068 and the ones Keybound adds.
public struct AccessToken: Sendable, Hashable {
    /// `sub`: the user's id.
    public let subject: String
    /// `client_id`: the OAuth client the token was issued to.
    public let clientID: String
    /// `scope`, split at spaces.
    public let scopes: [String]
    /// `exp`.
    public let expiresAt: Date
    /// `iat`.
    public let issuedAt: Date
    /// `auth_time`: when the user authenticated.
    public let authTime: Date?
    /// `amr` (RFC 8176): how the user authenticated (`pwd`, `hwk`, `user`, …).
    public let authenticationMethods: [String]
    /// `jti`: the token's id.
    public let tokenID: String
    /// `sid`: the session the token belongs to (revoking it ends the token at introspection).
    public let sessionID: String?
    /// `cnf.jkt` (RFC 9449): the thumbprint of the DPoP key the token is bound to. When it is
    /// set, a request carrying the token must come with a DPoP proof by that key.
    public let boundKeyThumbprint: String?
    /// `authorization_details` (RFC 9396 §9.1): the transfer the user's device approved, for a
    /// token a CIBA request was granted; nil for other tokens. Act on exactly this, not on what
    /// the request that obtained the token said.
    public let approvedAction: ApprovalAction?
}

/// A DPoP-bound access token that verified with its proof.
public struct DPoPUse: Sendable, Hashable {
    /// The token's claims.
    public let token: AccessToken
    /// The proof's `jti`: refuse a second request with it while the proof could still be
    /// accepted (twice the verifier's leeway).
    public let proofID: String
}

/// Verifies Keybound's RFC 9068 access tokens offline, against the issuer's published keys:
/// the header (`typ: at+jwt`, `alg: ES256`, a `kid` of the set), the signature, `iss`, `aud`,
/// `exp` and `iat`.
///
/// ```swift
/// let keys = try JWKS(json: jwksData)                      // GET https://login.example.com/oauth/jwks
/// let verifier = AccessTokenVerifier(issuer: "https://login.example.com", audience: "https://login.example.com", keys: keys)
/// let token = try verifier.verify(bearerToken)             // throws VerificationError
/// ```
///
/// A token bound to a DPoP key (`cnf.jkt`: an app's Secure Enclave key) is refused by
/// ``verify(_:at:)``: it comes as `Authorization: DPoP` with a `DPoP` header, and
/// ``verify(_:dpopProof:method:uri:at:)`` checks both.
///
/// - Important: Offline verification cannot see a revocation: a token stays valid until `exp`
///   (Keybound issues them for minutes). A service that must see a logout at once asks the
///   issuer's introspection endpoint instead.
public struct AccessTokenVerifier: Sendable {
    /// The `iss` the tokens must carry.
    public let issuer: String
    /// The audience the tokens must name in `aud`.
    public let audience: String
    /// How far clocks may disagree, in seconds.
    public let leeway: TimeInterval
    private let keys: JWKS

    /// - Parameters:
    ///   - issuer: the issuer's URL, exactly as in its discovery document.
    ///   - audience: the audience the tokens must name (Keybound's default: the issuer).
    ///   - keys: the issuer's JWK Set.
    ///   - leeway: how far clocks may disagree (default 60 s).
    public init(issuer: String, audience: String, keys: JWKS, leeway: TimeInterval = 60) {
        self.issuer = issuer
        self.audience = audience
        self.keys = keys
        self.leeway = leeway
    }

    /// Verifies a bearer `token` (`Authorization: Bearer`) at `now`.
    /// - Returns: its claims.
    /// - Throws: ``VerificationError`` naming the first check that failed;
    ///   `senderConstrained` for a DPoP-bound token.
    public func verify(_ token: String, at now: Date = Date()) throws -> AccessToken {
        let verified = try claims(of: token, at: now)
        guard verified.boundKeyThumbprint == nil else {
            throw VerificationError(
                .senderConstrained, "the token is DPoP-bound (cnf.jkt): it needs its proof (RFC 9449 §7.1)")
        }
        return verified
    }

    /// Verifies a DPoP-bound `token` sent as `Authorization: DPoP` with `proof`, the request's
    /// `DPoP` header (RFC 9449 §4.3, §7.1): the token as ``verify(_:at:)`` does; the proof a JWS
    /// with `typ: dpop+jwt`, ES256 and a public `jwk`, signed by that key; the key the one the
    /// token is bound to (`cnf.jkt`); `htm` the request's method; `htu` the request's URI;
    /// `iat` within ``leeway`` of `now`; `ath` the token's hash.
    ///
    /// Two checks are the caller's: a proof is used once (keep its ``DPoPUse/proofID`` for twice
    /// the leeway and refuse a repeat, RFC 9449 §11.1), and server nonces, if the service sends
    /// any.
    /// - Parameters:
    ///   - token: the access token of the `Authorization: DPoP` header.
    ///   - proof: the request's `DPoP` header.
    ///   - method: the request's method (`GET`).
    ///   - uri: the request's URI as the client addressed it, without query and fragment
    ///     (`https://api.example.com/v1/balance`); compared with `htu` exactly.
    ///   - now: the time to check `exp`, `iat` and the proof's `iat` at.
    /// - Throws: ``VerificationError``: the token's checks, then `senderConstrained` for a token
    ///   that is not bound, `invalidProof` for a proof that is not acceptable.
    public func verify(
        _ token: String, dpopProof proof: String, method: String, uri: String, at now: Date = Date()
    )
        throws -> DPoPUse
    {
        let verified = try claims(of: token, at: now)
        guard let jkt = verified.boundKeyThumbprint else {
            throw VerificationError(.senderConstrained, "the token is not DPoP-bound: it is sent as Bearer")
        }
        let parsed: DPoPProofToken
        do {
            parsed = try DPoPProofToken(proof)
        } catch {
            throw VerificationError(.invalidProof, "malformed DPoP proof: \(wireDetail(error))")
        }
        guard parsed.method == method else { throw VerificationError(.invalidProof, "htm is not \(method)") }
        guard parsed.uri == uri else { throw VerificationError(.invalidProof, "htu is not \(uri)") }
        guard abs(parsed.issuedAt - now.timeIntervalSince1970) <= leeway else {
            throw VerificationError(.invalidProof, "iat is more than \(Int(leeway)) s from now")
        }
        guard parsed.accessTokenHash == DPoP.accessTokenHash(token) else {
            throw VerificationError(.invalidProof, "ath is not the hash of this token")
        }
        guard parsed.key.thumbprint == jkt else {
            throw VerificationError(.invalidProof, "the proof is not by the key the token is bound to")
        }
        guard ES256.isValid(parsed.jws, key: parsed.key) else {
            throw VerificationError(.invalidProof, "the proof's signature does not verify with its jwk")
        }
        return DPoPUse(token: verified, proofID: parsed.id)
    }

    /// The token's own checks, which both `verify` share: the JWS, `iss`, `aud`, `exp`, `iat`
    /// and the claims, bound or not. For the issuer itself, which checks a binding against the
    /// request's proof on its own (and for tests that read a bound token's claims).
    package func claims(of token: String, at now: Date) throws -> AccessToken {
        let claims = try JWTVerification.verify(token, type: "at+jwt", keys: keys.keySet)
        try JWTVerification.check(claims, issuer: issuer, audience: audience, at: now, leeway: leeway)
        guard let subject = claims[member: "sub"]?.stringValue,
            let clientID = claims[member: "client_id"]?.stringValue,
            let jti = claims[member: "jti"]?.stringValue, let exp = claims[member: "exp"]?.integerValue,
            let iat = claims[member: "iat"]?.integerValue
        else { throw VerificationError(.missingClaim, "sub, client_id, jti, exp and iat are required") }
        let amr: [String]
        if case .array(let values)? = claims[member: "amr"] {
            amr = values.compactMap(\.stringValue)
        } else {
            amr = []
        }
        var approvedAction: ApprovalAction?
        if let details = claims[member: "authorization_details"] {
            do {
                approvedAction = try TransferAuthorizationDetails.action(from: details)
            } catch {
                throw VerificationError(.missingClaim, "authorization_details: \(wireDetail(error))")
            }
        }
        return AccessToken(
            subject: subject, clientID: clientID,
            scopes: (claims[member: "scope"]?.stringValue ?? "").split(separator: " ").map(String.init),
            expiresAt: Date(timeIntervalSince1970: TimeInterval(exp)),
            issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)),
            authTime: claims[member: "auth_time"]?.integerValue.map {
                Date(timeIntervalSince1970: TimeInterval($0))
            },
            authenticationMethods: amr, tokenID: jti, sessionID: claims[member: "sid"]?.stringValue,
            boundKeyThumbprint: claims[member: "cnf"]?[member: "jkt"]?.stringValue,
            approvedAction: approvedAction)
    }
}

/// The checks every Keybound JWT goes through, in order.
package enum JWTVerification {
    /// Parses `token`, checks its header (`alg: ES256`, `typ`, a `kid` of `keys`) and signature.
    /// - Returns: its claims (a JSON object).
    /// - Throws: ``VerificationError``.
    package static func verify(_ token: String, type: String, keys: JWKSet) throws -> JSONValue {
        let jws: CompactJWS
        let claims: JSONValue
        do {
            jws = try CompactJWS(token)
            claims = try jws.claims()
        } catch {
            throw VerificationError(.malformed, wireDetail(error))
        }
        guard jws.algorithm == ES256.name else {
            throw VerificationError(
                .unsupportedAlgorithm, "alg \(jws.algorithm ?? "missing"), expected ES256")
        }
        guard jws.type == type || jws.type == "application/" + type else {
            throw VerificationError(.wrongType, "typ \(jws.type ?? "missing"), expected \(type)")
        }
        guard let kid = jws.keyID, let key = keys.key(id: kid) else {
            throw VerificationError(.unknownKey, "no key of the set has kid \(jws.keyID ?? "missing")")
        }
        guard ES256.isValid(jws, key: key) else {
            throw VerificationError(.badSignature, "the signature does not verify with key \(kid)")
        }
        return claims
    }

    /// A JWT's `aud` (RFC 7519 §4.1.3): one string or an array of them; none when missing.
    package static func audiences(of claims: JSONValue) -> [String] {
        switch claims[member: "aud"] {
        case .string(let one)?: [one]
        case .array(let many)?: many.compactMap(\.stringValue)
        default: []
        }
    }

    /// Checks `iss`, `aud` (a string or an array of them), `exp` and `iat` at `now`.
    /// - Throws: ``VerificationError``.
    package static func check(
        _ claims: JSONValue, issuer: String, audience: String, at now: Date, leeway: TimeInterval
    ) throws {
        guard claims[member: "iss"]?.stringValue == issuer else {
            throw VerificationError(.wrongIssuer, "iss is not \(issuer)")
        }
        guard audiences(of: claims).contains(audience) else {
            throw VerificationError(.wrongAudience, "aud does not name \(audience)")
        }
        guard let exp = claims[member: "exp"]?.integerValue, let iat = claims[member: "iat"]?.integerValue
        else {
            throw VerificationError(.missingClaim, "exp and iat are numbers")
        }
        let seconds = now.timeIntervalSince1970
        guard seconds < TimeInterval(exp) + leeway else {
            throw VerificationError(.expired, "exp has passed")
        }
        guard TimeInterval(iat) <= seconds + leeway else {
            throw VerificationError(.notYetValid, "iat is in the future")
        }
    }
}
