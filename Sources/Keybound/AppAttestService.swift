import Foundation

/// Proves to the server that a request comes from a genuine copy of the app on a genuine Apple
/// device (`DCAppAttestService` through `KeyboundApple`; `KeyboundEmulator`'s emulated service,
/// under a test certificate authority, in tests).
///
/// The service keeps its own P-256 keys in secure hardware. One is attested once, over data the
/// server chose; later requests can carry assertions by the same key, whose counter only grows.
/// ``BiometricLogin`` attests the device binding with it when one is given.
///
/// The methods take the client data itself, not its hash: `Keybound` has no hash function of
/// its own (it links no crypto library and no Apple framework), so each service takes SHA-256
/// of `clientData` and passes that to App Attest as `clientDataHash`, as Apple's guide does.
public protocol AppAttestService: Sendable {
    /// Whether this device can attest (false in the Simulator, on Macs without a Secure Enclave,
    /// and in app extensions).
    var isSupported: Bool { get async }

    /// Creates a new App Attest key.
    /// - Returns: the key id, 32 bytes: SHA-256 of the key's public point.
    /// - Throws: ``KeyboundError/notSupported`` where App Attest is not available.
    func generateKey() async throws -> Data

    /// Has Apple attest the key, over SHA-256 of `clientData`. A key can be attested once.
    /// - Returns: the CBOR attestation object (format `apple-appattest`) for the server.
    /// - Throws: ``KeyboundError``: `invalidated` for an unknown or already attested key (make a
    ///   new one), `network` when Apple's service cannot be reached (retry with the same key and
    ///   data), `notSupported`.
    func attestKey(_ keyID: Data, clientData: Data) async throws -> Data

    /// Signs SHA-256 of `clientData` with an attested key; each assertion's counter is above the
    /// last one's.
    /// - Returns: the CBOR assertion `{signature, authenticatorData}` for the server.
    /// - Throws: ``KeyboundError``: `invalidated` for an unknown or unattested key, `notSupported`.
    func generateAssertion(_ keyID: Data, clientData: Data) async throws -> Data
}
