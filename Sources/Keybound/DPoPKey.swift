import Foundation
import KeyboundWire

/// The key a ``KeyboundClient`` binds its sessions to with DPoP (RFC 9449): a P-256 key in
/// secure hardware (the Secure Enclave on Apple platforms, the emulated secure element in tests)
/// that signs a fresh proof for every login, refresh and authenticated request.
///
/// A session opened with a proof is bound to the key: its access and refresh tokens work only
/// together with a new proof by it, so tokens copied off the device (a backup, a log, a proxy)
/// are useless anywhere else. The key's policy is ``policy``: `privateKeyUsage` with no user
/// presence, since a prompt per request is out of the question. It protects the *tokens*; who
/// the user is stays the business of the biometric login that opened the session.
///
/// ```swift
/// let key = try await DPoPKey.prepare(in: device.vault, name: "acme.dpop-key")
/// let client = KeyboundClient(baseURL: url, dpopKey: key)
/// try await client.loginWithPassword(username: name, password: password, clientID: installID)
/// // client.currentSession?.isDPoPBound == true when the server supports DPoP
/// ```
public struct DPoPKey: Sendable {
    /// The vault holding the key.
    public let vault: any KeyVault
    /// The key's name in the vault.
    public let name: ItemName

    /// The policy the key is made with: no user verification (every request signs with it), on
    /// this device only, usable after the first unlock since boot (a background refresh proves
    /// possession too). ``AccessPolicy/noVerification``: for a Secure Enclave key that is access
    /// control `privateKeyUsage` alone, `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`.
    public static let policy = AccessPolicy.noVerification

    /// A key that exists in `vault` under `name`.
    public init(vault: any KeyVault, name: ItemName) {
        self.vault = vault
        self.name = name
    }

    /// The key `name` in `vault`, created with ``policy`` when there is none yet. An existing key
    /// is kept: the sessions bound to it stay usable.
    /// - Throws: ``KeyboundError`` from the vault, e.g. `notSupported` without a Secure Enclave.
    public static func prepare(in vault: any KeyVault, name: ItemName) async throws -> DPoPKey {
        if try await !vault.keyExists(name) { _ = try await vault.createKey(name, policy: policy) }
        return DPoPKey(vault: vault, name: name)
    }

    /// The key's public part as a JWK, as proofs carry it.
    func publicJWK() async throws -> ECPublicJWK {
        let spki = try await vault.publicKey(name)
        return try KeyboundError.validating { try ECPublicJWK(spki: spki) }
    }

    /// A proof for `method` `uri` (RFC 9449 §4.2), signed in the vault without a verification.
    /// - Parameters:
    ///   - jwk: the key's public JWK (``publicJWK()``, which the client keeps).
    ///   - issuedAt: the client's time.
    ///   - nonce: the server's latest `DPoP-Nonce`, if it sent one.
    ///   - accessToken: the access token the request carries, if any.
    func proof(
        jwk: ECPublicJWK, method: String, uri: String, issuedAt: Date, nonce: String?, accessToken: String?
    ) async throws -> String {
        let input = DPoP.signingInput(
            key: jwk, id: Base64URL.encode(RandomSource.system.bytes(16)), method: method, uri: uri,
            issuedAt: Int64(issuedAt.timeIntervalSince1970.rounded(.down)), nonce: nonce,
            accessTokenHash: accessToken.map { DPoP.accessTokenHash(sha256: vault.sha256(Data($0.utf8))) })
        let signature = try await vault.sign(Data(input.utf8), with: name, verification: nil)
        guard let raw = ECDSASignatureDER.rawRepresentation(fromDER: signature) else {
            throw KeyboundError(.unexpected, message: "the vault's signature is not a DER ECDSA signature")
        }
        return DPoP.proof(signingInput: input, signature: raw)
    }
}
