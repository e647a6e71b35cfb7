import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundVerifier

/// The verifier against tokens an independent implementation made: joserfc (PyPI, Authlib's JOSE
/// library) signed `joserfcToken` with the key below on 2026-12-01; RFC 9449 §6.1 gives the
/// thumbprint of its example key.
@Suite("Access token verification")
struct AccessTokenVerifierTests {
    static let issuer = "https://issuer.example"
    static let publicJWK =
        #"{"crv":"P-256","x":"vYMtBDsxJ5TJ-mjm7PGjKDPfRMGi454L8A3_EwZEXuc","y":"w_zewx7ZgUCWSWszTgtrcCf2XvYbFEXMbl0JDRewPqE","kty":"EC","kid":"k1"}"#
    static let privateScalar = "rWZEy9gEPyh3PByMSj_k97wGy3y3IP0K1FsvbWxrOiE"
    static let joserfcToken =
        "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiYXQrand0In0."
        + "eyJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIiwic3ViIjoidXNyXzEiLCJhdWQiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIiwiY2xpZW50X2lkIjoiY2xpXzEiLCJleHAiOjIwMDAwMDAwMDAsImlhdCI6MTcwMDAwMDAwMCwianRpIjoiajEiLCJzY29wZSI6Im9wZW5pZCBwcm9maWxlIiwiYW1yIjpbImh3ayJdLCJzaWQiOiJzZXNfMSIsImNuZiI6eyJqa3QiOiJhYmMifX0."
        + "KzcWxk0yV3WPbwOhLzdVj2894mLEIvNg_GG0EOsSzdkoHEJmb8fcBdTxNGQCIVC9CnixstAPPepgr7_Zyu_yZw"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static var keys: JWKS {
        get throws { try JWKS(json: Data(#"{"keys":[\#(publicJWK)]}"#.utf8)) }
    }

    static func verifier(issuer: String = issuer, audience: String = issuer) throws -> AccessTokenVerifier {
        AccessTokenVerifier(issuer: issuer, audience: audience, keys: try keys)
    }

    /// A token signed here with the same key: `claims` over the joserfc token's, `header` as given.
    static func token(header: String = #"{"alg":"ES256","kid":"k1","typ":"at+jwt"}"#, claims: String) throws
        -> String
    {
        let key = try P256SigningKey(rawRepresentation: try #require(Base64URL.decode(privateScalar)))
        return try ES256.sign(header: JSON.parse(Data(header.utf8)), payload: Data(claims.utf8), with: key)
    }

    @Test("a token joserfc signed verifies, and its claims read as it wrote them")
    func independentTokenVerifies() throws {
        // It is DPoP-bound (cnf.jkt): as a bearer token it is refused, its claims read all the same.
        #expect(throws: VerificationError(.senderConstrained, "")) {
            try Self.verifier().verify(Self.joserfcToken, at: Self.now)
        }
        let token = try Self.verifier().claims(of: Self.joserfcToken, at: Self.now)
        #expect(token.subject == "usr_1" && token.clientID == "cli_1" && token.tokenID == "j1")
        #expect(token.scopes == ["openid", "profile"] && token.authenticationMethods == ["hwk"])
        #expect(token.sessionID == "ses_1" && token.boundKeyThumbprint == "abc")
        #expect(token.expiresAt == Date(timeIntervalSince1970: 2_000_000_000))
        #expect(token.issuedAt == Date(timeIntervalSince1970: 1_700_000_000))
    }

    @Test("the RFC 7638 thumbprint of RFC 9449's example key is the one the RFC gives")
    func thumbprint() throws {
        let key = try ECPublicJWK(
            json: JSON.parse(
                Data(
                    #"{"kty":"EC","x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","y":"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA","crv":"P-256"}"#
                        .utf8)))
        #expect(key.thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        // joserfc's thumbprint of the key above agrees too.
        #expect(try Self.keys.keySet.keys[0].thumbprint == "x56FDHwlCHR-323382ZET6XU-mLu3qAtfx99KTvF-lo")
    }

    @Test("every byte of the signing input or the signature is covered")
    func tamperingIsRefused() throws {
        let verifier = try Self.verifier()
        let parts = Self.joserfcToken.split(separator: ".").map(String.init)
        var payload = [UInt8](try #require(Base64URL.decode(parts[1])))
        payload[payload.count / 2] ^= 0x01
        let changedPayload = [parts[0], Base64URL.encode(Data(payload)), parts[2]].joined(separator: ".")
        #expect(throws: VerificationError(.badSignature, "")) {
            try verifier.verify(changedPayload, at: Self.now)
        }
        var signature = [UInt8](try #require(Base64URL.decode(parts[2])))
        signature[0] ^= 0x80
        let changedSignature = [parts[0], parts[1], Base64URL.encode(Data(signature))].joined(separator: ".")
        #expect(throws: VerificationError(.badSignature, "")) {
            try verifier.verify(changedSignature, at: Self.now)
        }
    }

    @Test("alg none, HS256 keyed with the public key, and other algorithms are refused before the signature")
    func algorithmConfusion() throws {
        let verifier = try Self.verifier()
        let parts = Self.joserfcToken.split(separator: ".").map(String.init)
        let none =
            Base64URL.encode(Data(#"{"alg":"none","kid":"k1","typ":"at+jwt"}"#.utf8)) + "." + parts[1] + "."
        #expect(throws: VerificationError(.unsupportedAlgorithm, "")) {
            try verifier.verify(none, at: Self.now)
        }
        // HS256 whose "secret" is the public JWK, as a naive verifier would key it.
        let header = Base64URL.encode(Data(#"{"alg":"HS256","kid":"k1","typ":"at+jwt"}"#.utf8))
        let mac = try HMACSHA256.authenticationCode(
            for: Data((header + "." + parts[1]).utf8), key: Data(Self.publicJWK.utf8))
        let hs256 = header + "." + parts[1] + "." + Base64URL.encode(mac)
        #expect(throws: VerificationError(.unsupportedAlgorithm, "")) {
            try verifier.verify(hs256, at: Self.now)
        }
        for alg in ["ES384", "RS256", "es256", "ES256 "] {
            let token = try Self.token(
                header: #"{"alg":"ES256","kid":"k1","typ":"at+jwt"}"#,
                claims: String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self))
            let swapped =
                Base64URL.encode(Data(#"{"alg":"\#(alg)","kid":"k1","typ":"at+jwt"}"#.utf8)) + "."
                + token.split(separator: ".").dropFirst().joined(separator: ".")
            #expect(throws: VerificationError(.unsupportedAlgorithm, "")) {
                try verifier.verify(swapped, at: Self.now)
            }
        }
    }

    @Test("type, key, issuer, audience and times are each checked")
    func claimsAreChecked() throws {
        let claims =
            #"{"iss":"https://issuer.example","sub":"usr_1","aud":["other","https://issuer.example"],"client_id":"c","exp":1800000100,"iat":1800000000,"jti":"j"}"#
        let good = try Self.token(claims: claims)
        #expect(try Self.verifier().verify(good, at: Self.now).subject == "usr_1")
        let idToken = try Self.token(header: #"{"alg":"ES256","kid":"k1","typ":"JWT"}"#, claims: claims)
        #expect(throws: VerificationError(.wrongType, "")) {
            try Self.verifier().verify(idToken, at: Self.now)
        }
        let otherKey = try Self.token(header: #"{"alg":"ES256","kid":"k2","typ":"at+jwt"}"#, claims: claims)
        #expect(throws: VerificationError(.unknownKey, "")) {
            try Self.verifier().verify(otherKey, at: Self.now)
        }
        #expect(throws: VerificationError(.wrongIssuer, "")) {
            try Self.verifier(issuer: "https://evil.example").verify(good, at: Self.now)
        }
        #expect(throws: VerificationError(.wrongAudience, "")) {
            try Self.verifier(audience: "https://api.example").verify(good, at: Self.now)
        }
        #expect(throws: VerificationError(.expired, "")) {
            try Self.verifier().verify(good, at: Self.now.addingTimeInterval(100 + 60))
        }
        #expect(
            try Self.verifier().verify(good, at: Self.now.addingTimeInterval(100 + 59)).subject == "usr_1")
        #expect(throws: VerificationError(.notYetValid, "")) {
            try Self.verifier().verify(good, at: Self.now.addingTimeInterval(-61))
        }
        let missing = try Self.token(
            claims:
                #"{"iss":"https://issuer.example","aud":"https://issuer.example","exp":1800000100,"iat":1800000000}"#
        )
        #expect(throws: VerificationError(.missingClaim, "")) {
            try Self.verifier().verify(missing, at: Self.now)
        }
        for garbage in ["", "a.b", "a.b.c.d", "!!.!!.!!", Self.joserfcToken + "x"] {
            #expect(throws: VerificationError.self) { try Self.verifier().verify(garbage, at: Self.now) }
        }
    }

    @Test("a JWK Set keeps its P-256 keys, passes over other types, and refuses private or malformed ones")
    func jwkSets() throws {
        let mixed = #"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"},\#(Self.publicJWK)]}"#
        #expect(try JWKS(json: Data(mixed.utf8)).keyIDs == ["k1"])
        let privateKey = Self.publicJWK.replacingOccurrences(
            of: #""kid""#, with: #""d":"\#(Self.privateScalar)","kid""#)
        #expect(throws: VerificationError.self) { try JWKS(json: Data(#"{"keys":[\#(privateKey)]}"#.utf8)) }
        let short = #"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}"#
        #expect(throws: VerificationError.self) { try JWKS(json: Data(short.utf8)) }
        #expect(throws: VerificationError.self) { try JWKS(json: Data("[]".utf8)) }
    }

    // MARK: DPoP-bound tokens (RFC 9449 §7.1)

    /// A token bound to `key` (its `cnf.jkt`), valid at ``now``, signed with the set's key.
    static func boundToken(to key: P256SigningKey) throws -> String {
        let jkt = try ECPublicJWK(spki: key.publicKey.spkiDER).thumbprint
        let claims = """
            {"iss":"\(issuer)","sub":"usr_1","aud":"\(issuer)","client_id":"cli_1","exp":1800000300,\
            "iat":1800000000,"jti":"j2","cnf":{"jkt":"\(jkt)"}}
            """
        return try token(claims: claims)
    }

    /// A proof by `key` for `method` `uri` at `time`, over `accessToken`.
    static func proof(
        by key: P256SigningKey, _ method: String = "GET", _ uri: String = "https://api.example/v1/balance",
        at time: Date = now, over accessToken: String?
    ) throws -> String {
        let input = DPoP.signingInput(
            key: try ECPublicJWK(spki: key.publicKey.spkiDER), id: "proof-1", method: method, uri: uri,
            issuedAt: Int64(time.timeIntervalSince1970), nonce: nil,
            accessTokenHash: accessToken.map(DPoP.accessTokenHash))
        return DPoP.proof(
            signingInput: input, signature: try key.signature(for: Data(input.utf8)).rawRepresentation)
    }

    @Test("a DPoP-bound token passes only with a proof by its key for this request")
    func boundTokensNeedTheirProof() throws {
        let verifier = try Self.verifier()
        let key = try P256SigningKey()
        let token = try Self.boundToken(to: key)
        let uri = "https://api.example/v1/balance"
        // As a bearer token: refused, whatever its signature.
        #expect(throws: VerificationError(.senderConstrained, "")) {
            try verifier.verify(token, at: Self.now)
        }
        // With its proof: accepted, and the proof's jti is the caller's to use once.
        let use = try verifier.verify(
            token, dpopProof: try Self.proof(by: key, over: token), method: "GET", uri: uri, at: Self.now)
        #expect(use.token.subject == "usr_1" && use.proofID == "proof-1")
        #expect(use.token.boundKeyThumbprint == (try ECPublicJWK(spki: key.publicKey.spkiDER).thumbprint))

        let refusals: [(String, String, String, Date)] = [
            ("another key's proof", try Self.proof(by: try P256SigningKey(), over: token), "GET", Self.now),
            ("a proof over another token", try Self.proof(by: key, over: token + "x"), "GET", Self.now),
            ("a proof without ath", try Self.proof(by: key, over: nil), "GET", Self.now),
            ("another method", try Self.proof(by: key, "POST", over: token), "GET", Self.now),
            ("another URI", try Self.proof(by: key, "GET", uri + "/x", over: token), "GET", Self.now),
            (
                "an old proof", try Self.proof(by: key, at: Self.now.addingTimeInterval(-61), over: token),
                "GET", Self.now
            ),
            (
                "a future proof", try Self.proof(by: key, at: Self.now.addingTimeInterval(61), over: token),
                "GET", Self.now
            ),
            ("not a JWS", "proof", "GET", Self.now),
        ]
        for (what, proof, method, time) in refusals {
            #expect(throws: VerificationError(.invalidProof, ""), "\(what)") {
                try verifier.verify(token, dpopProof: proof, method: method, uri: uri, at: time)
            }
        }
        // A proof whose signature was changed.
        let good = try Self.proof(by: key, over: token)
        var parts = good.split(separator: ".").map(String.init)
        var signature = [UInt8](try #require(Base64URL.decode(parts[2])))
        signature[5] ^= 0x01
        parts[2] = Base64URL.encode(Data(signature))
        #expect(throws: VerificationError(.invalidProof, "")) {
            try verifier.verify(
                token, dpopProof: parts.joined(separator: "."), method: "GET", uri: uri, at: Self.now)
        }
        // A token that is not bound does not pass as DPoP.
        let unbound = try Self.token(
            claims:
                #"{"iss":"\#(Self.issuer)","sub":"u","aud":"\#(Self.issuer)","client_id":"c","exp":1800000300,"iat":1800000000,"jti":"j3"}"#
        )
        #expect(throws: VerificationError(.senderConstrained, "")) {
            try verifier.verify(
                unbound, dpopProof: try Self.proof(by: key, over: unbound), method: "GET", uri: uri,
                at: Self.now)
        }
        #expect(try verifier.verify(unbound, at: Self.now).subject == "u")
    }
}
