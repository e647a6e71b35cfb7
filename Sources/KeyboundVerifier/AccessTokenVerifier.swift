import Foundation
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
/// - Important: Offline verification cannot see a revocation: a token stays valid until `exp`
///   (Keybound issues them for minutes). A service that must see a logout at once asks the
///   issuer's introspection endpoint instead. A token with ``AccessToken/boundKeyThumbprint``
///   also needs its DPoP proof checked.
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

    /// Verifies `token` at `now`.
    /// - Returns: its claims.
    /// - Throws: ``VerificationError`` naming the first check that failed.
    public func verify(_ token: String, at now: Date = Date()) throws -> AccessToken {
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
        return AccessToken(
            subject: subject, clientID: clientID,
            scopes: (claims[member: "scope"]?.stringValue ?? "").split(separator: " ").map(String.init),
            expiresAt: Date(timeIntervalSince1970: TimeInterval(exp)),
            issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)),
            authTime: claims[member: "auth_time"]?.integerValue.map {
                Date(timeIntervalSince1970: TimeInterval($0))
            },
            authenticationMethods: amr, tokenID: jti, sessionID: claims[member: "sid"]?.stringValue,
            boundKeyThumbprint: claims[member: "cnf"]?[member: "jkt"]?.stringValue)
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

    /// Checks `iss`, `aud` (a string or an array of them), `exp` and `iat` at `now`.
    /// - Throws: ``VerificationError``.
    package static func check(
        _ claims: JSONValue, issuer: String, audience: String, at now: Date, leeway: TimeInterval
    ) throws {
        guard claims[member: "iss"]?.stringValue == issuer else {
            throw VerificationError(.wrongIssuer, "iss is not \(issuer)")
        }
        let audiences: [String]
        switch claims[member: "aud"] {
        case .string(let one)?: audiences = [one]
        case .array(let many)?: audiences = many.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(audience) else {
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
