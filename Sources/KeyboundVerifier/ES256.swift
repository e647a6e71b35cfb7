import Foundation
import KeyboundCrypto
import KeyboundWire

/// ES256 (ECDSA P-256 with SHA-256, RFC 7518 §3.4), the one JWS algorithm Keybound signs with and
/// accepts. Any other `alg` in a header — `none`, `HS256` (with a public key as its "secret"),
/// `RS256`, `ES384`, a misspelling — is refused before anything else is looked at.
package enum ES256 {
    /// The `alg` value.
    package static let name = "ES256"

    /// Whether `jws` says `alg: ES256` and its signature (`r || s`, 64 bytes) verifies over its
    /// signing input with `key`.
    package static func isValid(_ jws: CompactJWS, key: ECPublicJWK) -> Bool {
        guard let publicKey = try? P256PublicKey(x963Representation: key.x963) else { return false }
        return isValid(jws, key: publicKey)
    }

    /// Whether `jws` says `alg: ES256` and its signature verifies with `key`, parsed already (a
    /// caller that sees one key often keeps it parsed).
    package static func isValid(_ jws: CompactJWS, key: P256PublicKey) -> Bool {
        guard jws.algorithm == name, let signature = try? P256Signature(rawRepresentation: jws.signature)
        else { return false }
        return key.isValidSignature(signature, for: jws.signingInput)
    }

    /// Signs `payload` under `header` (whose `alg` must be ES256) with `key`.
    /// - Returns: the compact JWS.
    /// - Throws: ``CryptoError`` when signing fails.
    package static func sign(header: JSONValue, payload: Data, with key: P256SigningKey) throws -> String {
        precondition(header[member: "alg"]?.stringValue == name, "an ES256 JWS says alg ES256")
        return try CompactJWS.serialize(header: header, payload: payload) { input in
            try key.signature(for: input).rawRepresentation
        }
    }
}

extension ECPublicJWK {
    /// The key's RFC 7638 thumbprint: base64url of SHA-256 over its required members. Keybound's
    /// `kid`s and DPoP's `jkt` are this.
    package var thumbprint: String { Base64URL.encode(Digest.sha256(thumbprintInput)) }
}
