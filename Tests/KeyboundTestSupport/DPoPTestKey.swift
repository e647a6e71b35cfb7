import Foundation
import KeyboundCrypto
import KeyboundWire

/// A DPoP key in software, for the tests and the bench: it makes RFC 9449 proofs in the format
/// the SDK sends (KeyboundWire's ``DPoP``), signed with a ``P256SigningKey``.
package struct DPoPTestKey: Sendable {
    /// The private key.
    package let signingKey: P256SigningKey
    /// Its public key as a JWK, as proofs carry it.
    package let jwk: ECPublicJWK

    /// A new random key.
    package init() throws {
        signingKey = try P256SigningKey()
        jwk = try ECPublicJWK(x963: signingKey.publicKey.x963Representation)
    }

    /// The key's RFC 7638 thumbprint: what a session bound to it keeps (`dpop_jkt`).
    package var thumbprint: String { Base64URL.encode(Digest.sha256(jwk.thumbprintInput)) }

    /// A proof for `method` `uri` made at `time`.
    /// - Parameters:
    ///   - nonce: the server's nonce, if any.
    ///   - accessToken: the access token the request carries, if any (`ath`).
    ///   - id: the `jti` (default: 16 random bytes, base64url).
    package func proof(
        _ method: String, _ uri: String, at time: Date, nonce: String?, accessToken: String? = nil,
        id: String? = nil
    ) throws -> String {
        let input = DPoP.signingInput(
            key: jwk, id: id ?? Base64URL.encode(SecureRandom.bytes(16)), method: method, uri: uri,
            issuedAt: Int64(time.timeIntervalSince1970.rounded(.down)), nonce: nonce,
            accessTokenHash: accessToken.map(DPoP.accessTokenHash))
        return DPoP.proof(
            signingInput: input, signature: try signingKey.signature(for: Data(input.utf8)).rawRepresentation)
    }
}
