import Foundation

/// DPoP proofs (RFC 9449) as Keybound writes and reads them: one compact JWS per request, made
/// by the key the session is bound to, header `{"typ":"dpop+jwt","alg":"ES256","jwk":{…}}`, claims
/// `jti`, `htm`, `htu`, `iat`, and `nonce` once the server has sent one (`DPoP-Nonce`), `ath` on a
/// request that carries an access token. The SDK writes them, the server reads them; what a
/// server accepts (the time window, the nonce, the URI, single use) is the server's.
package enum DPoP {
    /// The request header carrying the proof.
    package static let proofHeader = "DPoP"
    /// The response header carrying a server nonce (RFC 9449 §8, §9).
    package static let nonceHeader = "DPoP-Nonce"
    /// The `Authorization` scheme of a bound access token, and the bound tokens' `token_type`.
    package static let scheme = "DPoP"
    /// The header's `typ`.
    package static let type = "dpop+jwt"
    /// The longest `jti` accepted; RFC 9449 asks for at least 96 random bits, the SDK sends 128.
    package static let maximumIDLength = 256

    /// The claims, by name.
    package enum Claim: String, Sendable {
        case id = "jti"
        case method = "htm"
        case uri = "htu"
        case issuedAt = "iat"
        case nonce
        case accessTokenHash = "ath"
    }

    /// `ath` (RFC 9449 §4.2) from SHA-256 of the access token's ASCII, computed by the caller's
    /// crypto (this module hashes nothing): its base64url.
    package static func accessTokenHash(sha256 digest: Data) -> String { Base64URL.encode(digest) }

    /// What a proof's signature covers: its header (naming `key`) and its claims, each base64url,
    /// joined by a dot. Sign it with ES256 and pass the raw signature to ``proof(signingInput:signature:)``.
    /// - Parameters:
    ///   - key: the public key of the signing key.
    ///   - id: `jti`, unique per proof (random, at least 96 bits).
    ///   - method: `htm`, the request's method.
    ///   - uri: `htu`, the request's URI without query and fragment.
    ///   - issuedAt: `iat`, seconds since 1970.
    ///   - nonce: the server's latest `DPoP-Nonce`, if it sent one.
    ///   - accessTokenHash: `ath`, when the request carries an access token
    ///     (``accessTokenHash(sha256:)``).
    package static func signingInput(
        key: ECPublicJWK, id: String, method: String, uri: String, issuedAt: Int64, nonce: String?,
        accessTokenHash: String?
    ) -> String {
        var publicKey = key
        (publicKey.kid, publicKey.alg, publicKey.use) = (nil, nil, nil)
        let header = JSONValue.object([
            JSONMember("typ", .string(type)), JSONMember("alg", .string("ES256")),
            JSONMember("jwk", publicKey.json),
        ])
        var claims = [
            JSONMember(Claim.id.rawValue, .string(id)), JSONMember(Claim.method.rawValue, .string(method)),
            JSONMember(Claim.uri.rawValue, .string(uri)),
            JSONMember(Claim.issuedAt.rawValue, .number(String(issuedAt))),
        ]
        if let nonce { claims.append(JSONMember(Claim.nonce.rawValue, .string(nonce))) }
        if let accessTokenHash {
            claims.append(JSONMember(Claim.accessTokenHash.rawValue, .string(accessTokenHash)))
        }
        return Base64URL.encode(JSON.serialize(header)) + "."
            + Base64URL.encode(JSON.serialize(.object(claims)))
    }

    /// The compact proof: the signing input, a dot, the base64url of the ES256 signature (`r || s`).
    package static func proof(signingInput: String, signature: Data) -> String {
        signingInput + "." + Base64URL.encode(signature)
    }
}

/// A DPoP proof read from its header, well formed (RFC 9449 §4.3 steps 2 to 5 and 7): a compact
/// JWS whose header says `typ: dpop+jwt` and `alg: ES256` and carries a public P-256 `jwk`, and
/// whose claims hold `jti`, `htm`, `htu` and `iat` of the right types. Nothing here is verified:
/// the signature, the method, the URI, the time and the nonce are the server's to check.
package struct DPoPProofToken: Sendable {
    /// The JWS (its signature is over its signing input by ``key``, if the proof is genuine).
    package let jws: CompactJWS
    /// The `jwk` of the header: the key the proof claims to be made by.
    package let key: ECPublicJWK
    /// `jti`.
    package let id: String
    /// `htm`.
    package let method: String
    /// `htu`.
    package let uri: String
    /// `iat`, seconds since 1970 (a NumericDate may have a fraction).
    package let issuedAt: Double
    /// `nonce`, if present.
    package let nonce: String?
    /// `ath`, if present.
    package let accessTokenHash: String?

    /// Reads a proof.
    /// - Throws: ``WireError`` naming what is wrong: not a JWS, another `typ`, another `alg` than
    ///   ES256 (`none` and HS256 included), no `jwk` or a private one, a `crit` header (no extension
    ///   is understood), a claim missing or of the wrong type.
    package init(_ text: String) throws(WireFailure) {
        let jws = try CompactJWS(text)
        guard jws.type?.lowercased() == DPoP.type else {
            throw WireError(.invalidRequest, "the proof's typ is not \(DPoP.type)")
        }
        guard jws.algorithm == "ES256" else {
            throw WireError(.invalidRequest, "the proof's alg is not ES256")
        }
        guard jws.header[member: "crit"] == nil else {
            throw WireError(.invalidRequest, "the proof names critical header parameters")
        }
        guard let jwk = jws.header[member: "jwk"] else {
            throw WireError(.invalidRequest, "the proof's header has no jwk")
        }
        let key = try ECPublicJWK(json: jwk)
        let claims = try jws.claims()
        func string(_ claim: DPoP.Claim) throws(WireFailure) -> String? {
            guard let value = claims[member: claim.rawValue] else { return nil }
            guard let string = value.stringValue else {
                throw WireError(.invalidRequest, "the proof's \(claim.rawValue) is not a string")
            }
            return string
        }
        guard let id = try string(.id), !id.isEmpty, id.utf8.count <= DPoP.maximumIDLength else {
            throw WireError(
                .invalidRequest, "the proof's jti is missing or longer than \(DPoP.maximumIDLength)")
        }
        guard let method = try string(.method), let uri = try string(.uri) else {
            throw WireError(.invalidRequest, "the proof has no htm or no htu")
        }
        guard case .number(let number)? = claims[member: DPoP.Claim.issuedAt.rawValue],
            let issuedAt = Double(number), issuedAt.isFinite
        else { throw WireError(.invalidRequest, "the proof's iat is missing or not a number") }
        self.jws = jws
        self.key = key
        self.id = id
        self.method = method
        self.uri = uri
        self.issuedAt = issuedAt
        nonce = try string(.nonce)
        accessTokenHash = try string(.accessTokenHash)
    }
}
