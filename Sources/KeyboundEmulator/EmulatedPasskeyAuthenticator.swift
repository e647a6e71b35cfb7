import Foundation
import Keybound
import KeyboundCrypto
import KeyboundWebAuthn

/// The platform authenticator of an emulated device: passkeys whose ES256 keys live in the
/// device's emulated secure element and whose user verification is the device's own sensor.
///
/// Every ceremony prompts through ``EmulatedDevice/verify(_:prompt:)`` with the settings'
/// policy (by default `.biometryCurrentSet`), and each key is created in the device with that
/// policy, so passkeys behave as the device's keys do: a dismissed prompt is `userCancel`, five
/// failed matches lock biometry out (`biometryLockout`), and an enrollment change destroys the
/// passkeys (`invalidated`). The key signs only with the verification the prompt produced.
///
/// Registrations carry `none` attestation (an all-zero AAGUID) and assertions the flags UP and
/// UV, plus BE and BS as ``Settings/backup`` says; `clientDataJSON` is written as a browser
/// writes it (`type`, `challenge`, `origin`, `crossOrigin`). The passkeys' records (relying
/// party, user handle, counter) are items of the device, so they persist with it.
///
/// ```swift
/// let passkeys = try EmulatedPasskeyAuthenticator(device: phone)
/// await phone.present(.match)
/// let registration = try await passkeys.createCredential(request)
/// ```
public actor EmulatedPasskeyAuthenticator: PasskeyAuthenticator {
    /// How the emulated authenticator behaves.
    public struct Settings: Sendable, Hashable {
        /// The backup flags its authenticator data carries.
        public enum Backup: String, Sendable, Hashable, CaseIterable {
            /// BE and BS clear: a device-bound passkey.
            case notEligible
            /// BE set, BS clear: may be backed up, is not yet.
            case eligible
            /// BE and BS set: iCloud Keychain passkeys.
            case backedUp
        }

        /// The signature counter its assertions report.
        public enum SignCounter: String, Sendable, Hashable, CaseIterable {
            /// Always 0, as Apple's passkeys.
            case alwaysZero
            /// 1 on the first assertion, one more on each after.
            case incrementing
        }

        /// The backup flags. Default: ``Backup/backedUp``, as iCloud Keychain passkeys.
        public var backup: Backup
        /// The counter. Default: ``SignCounter/alwaysZero``, as Apple's passkeys.
        public var signCounter: SignCounter
        /// The policy of the keys and of every prompt. Default: `.biometryCurrentSet`.
        public var policy: AccessPolicy
        /// The origin written into `clientDataJSON`; nil writes `https://` and the relying party
        /// id, as Apple's platform authenticator does for apps.
        public var origin: String?
        /// The prefix of the items and keys this authenticator keeps in the device.
        public var namespace: String

        /// Settings; the defaults are those of Apple's passkeys, bound to the current enrollment.
        public init(
            backup: Backup = .backedUp, signCounter: SignCounter = .alwaysZero,
            policy: AccessPolicy = .biometryCurrentSet, origin: String? = nil, namespace: String = "passkeys"
        ) {
            self.backup = backup
            self.signCounter = signCounter
            self.policy = policy
            self.origin = origin
            self.namespace = namespace
        }
    }

    /// One passkey the authenticator holds.
    public struct StoredPasskey: Sendable, Hashable, Codable {
        /// The credential id.
        public let credentialID: Data
        /// The relying party it signs for.
        public let relyingPartyID: String
        /// The user handle it was created with.
        public let userHandle: Data
        /// The account name shown in the system sheet.
        public let userName: String
        /// The counter of its last assertion.
        public internal(set) var signCount: UInt32
    }

    /// The settings.
    public nonisolated let settings: Settings
    private let device: EmulatedDevice
    private let keys: ProtectedKeys
    private let random: RandomSource
    private let indexName: ItemName

    /// An authenticator on `device`.
    ///
    /// - Parameters:
    ///   - device: holds the keys and the records, and verifies the user.
    ///   - settings: flags, counter, policy, origin.
    ///   - random: credential ids.
    /// - Throws: ``KeyboundError/invalidInput`` for a namespace that is not a valid item name.
    public init(device: EmulatedDevice, settings: Settings = Settings(), random: RandomSource = .system)
        throws
    {
        self.device = device
        self.settings = settings
        self.random = random
        keys = ProtectedKeys(vault: device, markers: device, verifier: device)
        indexName = try ItemName("\(settings.namespace).index")
    }

    /// The passkeys it holds, oldest first.
    public func passkeys() async throws -> [StoredPasskey] {
        guard await device.exists(indexName) else { return [] }
        do {
            return try JSONDecoder().decode(
                [StoredPasskey].self, from: try await device.read(indexName, verification: nil))
        } catch {
            throw KeyboundError(.unexpected, message: "the emulated passkey records do not decode: \(error)")
        }
    }

    // MARK: - PasskeyAuthenticator

    /// Creates a passkey after the device verified the user, replacing any passkey of the same
    /// relying party and user handle (as platform authenticators do).
    ///
    /// - Throws: ``KeyboundError``: `notSupported` when ES256 (-7) is not offered,
    ///   `duplicateItem` when it holds an excluded credential, and whatever the device's prompt
    ///   throws (`userCancel`, `biometryLockout`, `authenticationFailed`, …).
    public func createCredential(_ request: PasskeyRegistrationRequest) async throws -> PasskeyRegistration {
        guard request.algorithms.contains(Self.es256) else {
            throw KeyboundError(
                .notSupported, message: "the platform authenticator makes ES256 (-7) keys only")
        }
        let existing = try await passkeys().filter { $0.relyingPartyID == request.relyingPartyID }
        if existing.contains(where: { request.excludedCredentialIDs.contains($0.credentialID) }) {
            throw KeyboundError(
                .duplicateItem, message: "this device already holds a passkey for that account")
        }
        _ = try await device.verify(
            settings.policy, prompt: prompt("Create a passkey for \(request.relyingPartyName)"))

        let credentialID = random.bytes(16)
        let publicKey: P256PublicKey
        do {
            publicKey = try P256PublicKey(
                spkiDER: try await keys.createKey(keyName(credentialID), policy: settings.policy))
        } catch let error as KeyboundError {
            throw error
        } catch {
            throw KeyboundError(.unexpected, message: "the secure element returned no P-256 key: \(error)")
        }
        for replaced in existing where replaced.userHandle == request.userID {
            try await forget(replaced)
        }
        let stored = StoredPasskey(
            credentialID: credentialID, relyingPartyID: request.relyingPartyID, userHandle: request.userID,
            userName: request.userName, signCount: 0)
        try await save(try await passkeys() + [stored])

        let clientData = clientDataJSON(
            "webauthn.create", request.challenge, relyingPartyID: request.relyingPartyID)
        let authenticatorData = try AuthenticatorData(
            rpIdHash: Digest.sha256(Data(request.relyingPartyID.utf8)), flags: flags, signCount: 0,
            attestedCredential: (Data(count: 16), credentialID, CredentialPublicKey(publicKey)))
        let attestation = AttestationObject(
            format: "none", statement: CBORMap([]), authenticatorData: authenticatorData)
        return PasskeyRegistration(
            credentialID: credentialID, clientDataJSON: clientData, attestationObject: attestation.encoded(),
            attachment: "platform")
    }

    /// Signs the challenge with the newest passkey of the relying party that the request allows,
    /// after the device verified the user.
    ///
    /// - Throws: ``KeyboundError``: `itemNotFound` when it holds no such passkey, `invalidated`
    ///   when an enrollment change destroyed it (its record is removed too), and whatever the
    ///   device's prompt throws.
    public func getAssertion(_ request: PasskeyAssertionRequest) async throws -> PasskeyAssertion {
        let allowed = request.allowedCredentialIDs
        let candidates = try await passkeys().filter {
            $0.relyingPartyID == request.relyingPartyID
                && (allowed.isEmpty || allowed.contains($0.credentialID))
        }
        guard var passkey = candidates.last else {
            throw KeyboundError(
                .itemNotFound, message: "no passkey for \(request.relyingPartyID) on this device")
        }
        let name = try keyName(passkey.credentialID)
        // Known dead before any prompt, as the device's own keys are.
        switch try await keys.status(name) {
        case .present: break
        case .invalidated:
            try await forget(passkey)
            throw KeyboundError(
                .invalidated, message: "the passkey was invalidated by an enrollment or passcode change")
        case .absent:
            try await forget(passkey)
            throw KeyboundError(.itemNotFound, message: "the passkey's key is gone")
        }
        let verification = try await device.verify(
            settings.policy, prompt: prompt("Sign in to \(request.relyingPartyID)"))

        if settings.signCounter == .incrementing { passkey.signCount += 1 }
        let authenticatorData = try AuthenticatorData(
            rpIdHash: Digest.sha256(Data(request.relyingPartyID.utf8)), flags: flags,
            signCount: passkey.signCount)
        let clientData = clientDataJSON(
            "webauthn.get", request.challenge, relyingPartyID: request.relyingPartyID)
        let signature = try await keys.sign(
            authenticatorData.rawValue + Digest.sha256(clientData), with: name, verification: verification)
        let counted = passkey
        try await save(try await passkeys().map { $0.credentialID == counted.credentialID ? counted : $0 })
        return PasskeyAssertion(
            credentialID: passkey.credentialID, clientDataJSON: clientData,
            authenticatorData: authenticatorData.rawValue, signature: signature,
            userHandle: passkey.userHandle,
            attachment: "platform")
    }

    /// Deletes a passkey and its key (the user removed it in Settings › Passwords).
    public func deletePasskey(_ credentialID: Data) async throws {
        guard let passkey = try await passkeys().first(where: { $0.credentialID == credentialID }) else {
            return
        }
        try await forget(passkey)
    }

    // MARK: - Helpers

    private static let es256 = -7

    private var flags: AuthenticatorData.Flags {
        var flags: AuthenticatorData.Flags = [.userPresent, .userVerified]
        switch settings.backup {
        case .notEligible: break
        case .eligible: flags.insert(.backupEligible)
        case .backedUp: flags.formUnion([.backupEligible, .backedUp])
        }
        return flags
    }

    private func keyName(_ credentialID: Data) throws -> ItemName {
        try ItemName("\(settings.namespace).key.\(Hex.encode(credentialID))")
    }

    private func prompt(_ reason: String) throws -> VerificationPrompt {
        try VerificationPrompt(reason: String(reason.prefix(200)))
    }

    /// `clientDataJSON` as a browser writes it: `type`, `challenge`, `origin`, `crossOrigin`.
    private func clientDataJSON(_ type: String, _ challenge: Data, relyingPartyID: String) -> Data {
        JSON.serialize(
            .object([
                JSONMember("type", .string(type)),
                JSONMember("challenge", .string(Base64URL.encode(challenge))),
                JSONMember("origin", .string(settings.origin ?? "https://\(relyingPartyID)")),
                JSONMember("crossOrigin", .bool(false)),
            ]))
    }

    private func forget(_ passkey: StoredPasskey) async throws {
        try await keys.deleteKey(try keyName(passkey.credentialID))
        try await save(try await passkeys().filter { $0.credentialID != passkey.credentialID })
    }

    private func save(_ passkeys: [StoredPasskey]) async throws {
        let data: Data
        do { data = try JSONEncoder().encode(passkeys) } catch {
            throw KeyboundError(.unexpected, message: "the emulated passkey records do not encode: \(error)")
        }
        try await device.store(data, as: indexName, policy: .noVerification, verification: nil)
    }
}
