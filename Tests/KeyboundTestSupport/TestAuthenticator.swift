import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire

/// A software passkey authenticator built from KeyboundWebAuthn's encoder: it makes correctly
/// signed registrations and assertions whose every field a test can choose, so each check of the
/// ceremonies is proved on its own with the signature still valid, against the library and
/// against the server's endpoints alike.
package struct TestAuthenticator: Sendable {
    /// The credential's ES256 private key.
    package let key: P256SigningKey
    /// The credential id (random unless a test sets it).
    package var credentialId = SecureRandom.bytes(32)
    /// The RP ID whose hash goes into the authenticator data.
    package var rpId = "example.org"
    /// The origin written into the client data.
    package var origin = "https://example.org"

    /// A new credential with a fresh key.
    package init() throws {
        key = try P256SigningKey()
    }

    /// An existing credential: its key and id (exported from another authenticator).
    package init(key: P256SigningKey, credentialId: Data) {
        self.key = key
        self.credentialId = credentialId
    }

    /// The credential public key.
    package var publicKey: CredentialPublicKey { CredentialPublicKey(key.publicKey) }

    /// UP and UV: a user who was present and verified.
    package static let allFlags: AuthenticatorData.Flags = [.userPresent, .userVerified]

    /// `clientDataJSON` as a browser writes it, with `extra` members appended.
    package func clientDataJSON(type: String, challenge: Data, extra: [JSONMember] = []) -> Data {
        JSON.serialize(
            .object(
                [
                    JSONMember("type", .string(type)),
                    JSONMember("challenge", .string(Base64URL.encode(challenge))),
                    JSONMember("origin", .string(origin)),
                    JSONMember("crossOrigin", .bool(false)),
                ] + extra))
    }

    /// `toJSON()` of a registration with packed self attestation.
    ///
    /// - Parameters:
    ///   - attestedId: the credential id inside the authenticator data, when it should differ
    ///     from the one the JSON names.
    ///   - clientData: client data to sign instead of the correct one.
    package func registration(
        challenge: Data, flags: AuthenticatorData.Flags = allFlags, signCount: UInt32 = 0,
        attestedId: Data? = nil, clientData: Data? = nil
    ) throws -> Data {
        let clientData = clientData ?? clientDataJSON(type: "webauthn.create", challenge: challenge)
        let authData = try AuthenticatorData(
            rpIdHash: Digest.sha256(Data(rpId.utf8)), flags: flags, signCount: signCount,
            attestedCredential: (Data(count: 16), attestedId ?? credentialId, publicKey))
        let signature = try key.signature(for: authData.rawValue + Digest.sha256(clientData))
            .derRepresentation
        let object = AttestationObject(
            format: "packed",
            statement: CBORMap([(.text("alg"), .integer(-7)), (.text("sig"), .bytes(signature))]),
            authenticatorData: authData)
        return credentialJSON(["clientDataJSON": clientData, "attestationObject": object.encoded()])
    }

    /// `toJSON()` of an assertion.
    ///
    /// - Parameter clientData: client data to sign instead of the correct one.
    package func assertion(
        challenge: Data, flags: AuthenticatorData.Flags = allFlags, signCount: UInt32 = 1,
        userHandle: Data? = nil, clientData: Data? = nil
    ) throws -> Data {
        let clientData = clientData ?? clientDataJSON(type: "webauthn.get", challenge: challenge)
        let authData = try AuthenticatorData(
            rpIdHash: Digest.sha256(Data(rpId.utf8)), flags: flags, signCount: signCount)
        let signature = try key.signature(for: authData.rawValue + Digest.sha256(clientData))
            .derRepresentation
        var members = [
            "clientDataJSON": clientData, "authenticatorData": authData.rawValue, "signature": signature,
        ]
        members["userHandle"] = userHandle
        return credentialJSON(members)
    }

    private func credentialJSON(_ response: [String: Data]) -> Data {
        let members = response.sorted { $0.key < $1.key }.map {
            JSONMember($0.key, .string(Base64URL.encode($0.value)))
        }
        return JSON.serialize(
            .object([
                JSONMember("id", .string(Base64URL.encode(credentialId))),
                JSONMember("rawId", .string(Base64URL.encode(credentialId))),
                JSONMember("response", .object(members)),
                JSONMember("authenticatorAttachment", .string("platform")),
                JSONMember("clientExtensionResults", .object([])),
                JSONMember("type", .string("public-key")),
            ]))
    }
}
