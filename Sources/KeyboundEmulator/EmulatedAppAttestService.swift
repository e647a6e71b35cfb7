import Foundation
import Keybound
import KeyboundCrypto
import KeyboundWebAuthn

/// App Attest (`DCAppAttestService`) on an emulated device, under a test CA: real
/// `apple-appattest` attestation objects and assertions that a server verifies exactly as it
/// verifies Apple's, once it trusts ``EmulatedAppAttestAuthority/rootCertificate``.
///
/// Each key is a P-256 key in the device's emulated secure element, needing no user
/// verification (App Attest keys have none). An attestation carries authenticator data with
/// flags `0x40`, counter 0, the environment's AAGUID and the key id (SHA-256 of the key's
/// point) as credential id, and a leaf certificate that holds SHA-256(authData ‖ clientDataHash)
/// in Apple's nonce extension; assertions sign that nonce with a counter that only grows.
///
/// The keys live in the device's secure element and their records (which are attested, their
/// counters) in an item of the device, one set per App ID, as DCAppAttestService keeps each
/// app's keys across launches: a service made again for the same app on the same device (the
/// app relaunched) asserts with the key attested before, its counter going on; a service of
/// another app on that device knows none of them.
///
/// ```swift
/// let appAttest = try EmulatedAppAttestService(device: phone, appID: "TEAMID1234.com.acme.bank",
///                                              authority: authority)
/// let keyID = try await appAttest.generateKey()
/// let attestation = try await appAttest.attestKey(keyID, clientData: challenge)
/// ```
public actor EmulatedAppAttestService: AppAttestService {
    /// One key's record, kept in the device.
    private struct AttestKey: Codable {
        let name: ItemName
        var isAttested = false
        var counter: UInt32 = 0
    }

    /// The App ID the attestations are for, `TEAMID.bundle.id`: its SHA-256 is their RP ID hash.
    public nonisolated let appID: String
    /// Development (AAGUID `appattestdevelop`) or production (`appattest` and seven zero bytes).
    public nonisolated let environment: AppAttest.Environment
    /// The CA that certifies the keys.
    public nonisolated let authority: EmulatedAppAttestAuthority
    private let device: EmulatedDevice
    private let random: RandomSource
    /// This app's prefix for its keys and its records in the device.
    private let namespace: String
    private let indexName: ItemName
    /// The records, read from the device on first use and written back after every change.
    private var keys: [Data: AttestKey] = [:]
    private var isLoaded = false
    /// The last write of the records; each write waits for the one before, so they reach the
    /// device in order and the last one holds every change.
    private var lastWrite: Task<Void, any Error>?

    /// An App Attest service for the app `appID` on `device`.
    ///
    /// - Parameters:
    ///   - device: holds the keys in its emulated secure element.
    ///   - appID: `TEAMID.bundle.id`; an app of another id on the same device makes
    ///     attestations that a server expecting this one refuses.
    ///   - environment: the AAGUID the attestations carry.
    ///   - authority: the test CA (one per test, shared by every service in it).
    ///   - isSupported: false stands for where App Attest is not available (the Simulator, an app
    ///     extension): ``isSupported`` says so and every other call throws `notSupported`.
    ///   - random: names of the keys in the device.
    /// - Throws: ``KeyboundError/invalidInput`` for an empty App ID.
    public init(
        device: EmulatedDevice, appID: String, environment: AppAttest.Environment = .development,
        authority: EmulatedAppAttestAuthority, isSupported: Bool = true, random: RandomSource = .system
    ) throws {
        guard !appID.isEmpty else { throw KeyboundError.invalidInput("an App ID is TEAMID.bundle.id") }
        self.device = device
        self.appID = appID
        self.environment = environment
        self.authority = authority
        self.isSupported = isSupported
        self.random = random
        // The App ID's hash names this app's part of the device: any App ID fits an item name.
        namespace = "appattest.\(Hex.encode(Digest.sha256(Data(appID.utf8)).prefix(8)))"
        indexName = try ItemName("\(namespace).index")
    }

    /// Whether the service can attest (false: it stands for the Simulator or an app extension).
    public nonisolated let isSupported: Bool

    /// Creates a P-256 key in the device's secure element.
    /// - Returns: its key id, SHA-256 of its uncompressed point.
    /// - Throws: `notSupported` where App Attest is not; what the device throws for a key it
    ///   cannot create (`interactionNotAllowed` before the first unlock).
    public func generateKey() async throws -> Data {
        try ensureSupported()
        try await load()
        let name = try ItemName("\(namespace).key.\(Hex.encode(random.bytes(16)))")
        let publicKey = try Self.p256(try await device.createKey(name, policy: .noVerification))
        let keyID = Digest.sha256(publicKey.x963Representation)
        keys[keyID] = AttestKey(name: name)
        try await save()
        return keyID
    }

    /// Attests the key over SHA-256 of `clientData` (Apple's nine verification steps in reverse).
    /// - Throws: `notSupported` where App Attest is not; ``KeyboundError/invalidated`` for an
    ///   unknown or already attested key, as `DCError.invalidKey`.
    public func attestKey(_ keyID: Data, clientData: Data) async throws -> Data {
        try ensureSupported()
        try await load()
        guard var key = keys[keyID], !key.isAttested else {
            throw KeyboundError(.invalidated, message: "DCError.invalidKey: unknown or already attested key")
        }
        // Marked before the next suspension, so two concurrent calls cannot both attest it.
        key.isAttested = true
        keys[keyID] = key
        do {
            let attestation = try await attestation(of: key, keyID: keyID, clientData: clientData)
            try await save()
            return attestation
        } catch {
            keys[keyID]?.isAttested = false
            throw error
        }
    }

    private func attestation(of key: AttestKey, keyID: Data, clientData: Data) async throws -> Data {
        let publicKey = try Self.p256(try await device.publicKey(key.name))
        let authenticatorData = try AuthenticatorData(
            rpIdHash: Digest.sha256(Data(appID.utf8)), flags: [], signCount: 0,
            attestedCredential: (environment.aaguid, keyID, CredentialPublicKey(publicKey)))
        let nonce = Digest.sha256(authenticatorData.rawValue + Digest.sha256(clientData))
        let leaf = try authority.leaf(for: publicKey, nonce: nonce)
        let statement = CBORMap([
            (.text("x5c"), .array([.bytes(leaf), .bytes(authority.intermediateCertificate)])),
            // Apple's receipt is a signed PKCS #7 blob for its fraud-metric service, which servers
            // store without verifying; the emulator has no such service.
            (.text("receipt"), .bytes(Data("keybound emulated receipt".utf8))),
        ])
        return AttestationObject(
            format: "apple-appattest", statement: statement, authenticatorData: authenticatorData
        ).encoded()
    }

    /// Signs SHA-256(authenticatorData ‖ SHA-256(`clientData`)) with an attested key; the
    /// counter in the authenticator data is one above the last assertion's.
    /// - Throws: `notSupported` where App Attest is not; ``KeyboundError/invalidated`` for an
    ///   unknown or unattested key.
    public func generateAssertion(_ keyID: Data, clientData: Data) async throws -> Data {
        try ensureSupported()
        try await load()
        guard var key = keys[keyID], key.isAttested else {
            throw KeyboundError(.invalidated, message: "DCError.invalidKey: unknown or unattested key")
        }
        // Counted (and kept) before signing: a counter is never used twice, even across launches.
        key.counter += 1
        keys[keyID] = key
        try await save()
        // App Attest assertions: RP ID hash, flags 0x40 (AT without attested data), counter.
        var authenticatorData = Digest.sha256(Data(appID.utf8))
        authenticatorData.append(0x40)
        authenticatorData.append(contentsOf: withUnsafeBytes(of: key.counter.bigEndian) { Array($0) })
        let nonce = Digest.sha256(authenticatorData + Digest.sha256(clientData))
        let signature = try await device.sign(nonce, with: key.name, verification: nil)
        return CBOR.map([
            (.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authenticatorData)),
        ]).encoded()
    }

    // MARK: - Records in the device

    /// One record as the device's item stores it.
    private struct StoredKey: Codable {
        let keyID: Data
        let key: AttestKey
    }

    /// Reads this app's records from the device, once.
    private func load() async throws {
        guard !isLoaded else { return }
        var stored: [StoredKey] = []
        if await device.exists(indexName) {
            let data = try await device.read(indexName, verification: nil)
            do { stored = try JSONDecoder().decode([StoredKey].self, from: data) } catch {
                throw KeyboundError(
                    .unexpected, message: "the emulated App Attest records do not decode: \(error)")
            }
        }
        // Another call may have loaded (and changed) them while this one waited for the device.
        guard !isLoaded else { return }
        for record in stored { keys[record.keyID] = record.key }
        isLoaded = true
    }

    /// Writes the records as they are when the write runs, after every earlier write.
    private func save() async throws {
        let previous = lastWrite
        let write = Task {
            _ = await previous?.result
            try await self.store()
        }
        lastWrite = write
        try await write.value
    }

    private func store() async throws {
        let records = keys.map { StoredKey(keyID: $0.key, key: $0.value) }.sorted {
            $0.key.name.rawValue < $1.key.name.rawValue
        }
        let data: Data
        do { data = try JSONEncoder().encode(records) } catch {
            throw KeyboundError(
                .unexpected, message: "the emulated App Attest records do not encode: \(error)")
        }
        try await device.store(data, as: indexName, policy: .noVerification, verification: nil)
    }

    /// `DCError.featureUnsupported`, as DCAppAttestService answers where it is not supported.
    private func ensureSupported() throws {
        guard isSupported else {
            throw KeyboundError(.notSupported, message: "App Attest is not available on this device")
        }
    }

    private static func p256(_ spki: Data) throws -> P256PublicKey {
        do {
            return try P256PublicKey(spkiDER: spki)
        } catch {
            throw KeyboundError(.unexpected, message: "the secure element returned no P-256 key: \(error)")
        }
    }
}
