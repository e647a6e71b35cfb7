#if os(Linux)
    internal import CTSS2
    import Foundation
    import Keybound
    internal import KeyboundCrypto

    /// P-256 keys made inside a TPM 2.0: the private key is generated there and leaves it only
    /// encrypted under the TPM's own storage key, so the blob kept on disk loads on this TPM
    /// alone. A key bound to the device PIN (``AccessPolicy/devicePasscode``) can be used only
    /// after the TPM itself checked the PIN, and every wrong PIN counts toward the TPM's
    /// dictionary-attack lockout.
    ///
    /// ```swift
    /// let vault = try TPMKeyVault(directory: support.appendingPathComponent("keys"))  // /dev/tpmrm0
    /// try await vault.setPIN(chosenPIN)                                            // once
    /// let publicKey = try await vault.createKey("device-key", policy: .devicePasscode)  // SPKI DER
    /// let verifier = TPMPINVerifier(vault: vault) { prompt in try await askForPIN(prompt.reason) }
    /// let verification = try await verifier.verify(.devicePasscode, prompt: prompt)
    /// let signature = try await vault.sign(payload, with: "device-key", verification: verification)
    /// ```
    ///
    /// **The device PIN.** The PIN is the authorization value of one TPM object, the *PIN object*
    /// (``setPIN(_:)``), and a PIN-bound key's TPM policy is `TPM2_PolicySecret` on that object:
    /// the TPM signs or decrypts with the key only in a session where the PIN was proved. Keys are
    /// made without the PIN (as a Secure Enclave key is made without a prompt), the PIN can be
    /// changed without touching them (``changePIN(from:to:)``), and removing it destroys them
    /// (``removePIN()``), as removing a passcode destroys `whenPasscodeSetThisDeviceOnly` items.
    /// The PIN is proved in a session salted with the TPM's storage key, so it never crosses the
    /// bus to the TPM in the clear; the ECDH secrets of ``encrypt(_:for:)`` and
    /// ``decrypt(_:with:verification:)`` come back encrypted in such a session too.
    ///
    /// **Keys a TPM can no longer load** (it was cleared, or the directory came from another
    /// machine) are moved aside into `stale-…/` in the directory and reported
    /// ``KeyboundError/invalidated``: from then on they do not exist, as an invalidated Secure
    /// Enclave key does not, so ``ProtectedKeys`` and the flows offer to enroll again.
    ///
    /// **What the TPM enforces** (docs/linux.md has the table): the private key never leaves it
    /// unencrypted and its blob loads nowhere else; a PIN-bound key is refused without the right
    /// PIN; wrong PINs lock the TPM out after its threshold (``KeyboundError/throttled`` with
    /// ``KeyboundError/retryAfter``). What the vault enforces in this process, not the TPM: a
    /// verification's reuse window and single use (the PIN itself is re-proved to the TPM at every
    /// use). What nobody enforces here: the screen lock, which the TPM cannot see; biometrics,
    /// which nothing binds to a TPM key. Policies that ask for those are refused with
    /// ``KeyboundError/notSupported`` (``checkSupported(_:)``), never weakened.
    ///
    /// Every operation opens its own connection, runs alone on the TPM (one queue per TCTI in the
    /// process) and flushes every object and session it loaded, so it works without a resource
    /// manager (swtpm) as well as through the kernel's (`/dev/tpmrm0`).
    public struct TPMKeyVault: KeyVault {
        /// Where the key blobs and the PIN object live (owner-only).
        public let directory: URL
        /// The TPM.
        public let connection: TPMConnection
        private let files: VaultFiles
        /// Time, for verifications' reuse windows; a PIN verifier for this vault reads the same.
        let clock: Keybound.Clock
        private var device: TPMDevice { TPMDevice.shared(connection) }

        /// A vault over `directory` (created, owner-only, if missing) on the TPM `connection`
        /// reaches. Nothing talks to the TPM until the vault is first used.
        /// - Parameters:
        ///   - directory: the vault's own directory, e.g. under `~/.local/share/APP`.
        ///   - connection: the TPM (default: the kernel's resource manager, `/dev/tpmrm0`).
        ///   - clock: time, for verifications' reuse windows.
        /// - Throws: ``KeyboundError/invalidInput`` when the directory cannot be created.
        public init(
            directory: URL, connection: TPMConnection = .kernelResourceManager,
            clock: Keybound.Clock = .system
        ) throws {
            self.directory = directory
            self.connection = connection
            self.clock = clock
            files = try VaultFiles(directory: directory)
        }

        // MARK: Capabilities

        /// How the TPM protects a key.
        enum Protection: Sendable {
            /// Usable by whoever can run code as the user and reach the TPM; bound to this TPM.
            case none
            /// Usable only after the TPM checked the device PIN.
            case pin
        }

        /// Whether keys for `policy` can be made here: a policy the TPM cannot enforce as asked
        /// is refused, never weakened.
        ///
        /// Supported: ``AccessPolicy/devicePasscode`` (constraint `devicePasscode` alone, any
        /// `…ThisDeviceOnly` accessibility; with a reuse window only `afterFirstUnlockThisDeviceOnly`,
        /// since the TPM cannot see the screen lock), and ``AccessPolicy/noVerification`` (no
        /// constraint, `afterFirstUnlockThisDeviceOnly`).
        /// - Throws: ``KeyboundError/invalidInput`` for an accessibility that lets material leave
        ///   the device; ``KeyboundError/notSupported`` (the message says why) for biometric
        ///   constraints, an application password, several constraints, and lock-state classes
        ///   the TPM cannot see.
        public static func checkSupported(_ policy: AccessPolicy) throws {
            _ = try protection(for: policy)
        }

        static func protection(for policy: AccessPolicy) throws -> Protection {
            guard policy.accessibility.isThisDeviceOnly else {
                throw KeyboundError.invalidInput(
                    "a TPM key never leaves this machine: use a …ThisDeviceOnly accessibility, not "
                        + "\(policy.accessibility)")
            }
            switch policy.constraints {
            case []:
                guard policy.accessibility == .afterFirstUnlockThisDeviceOnly else {
                    throw KeyboundError(
                        .notSupported,
                        message:
                            "a TPM key without a PIN is usable whenever the user's session runs: the TPM "
                            + "cannot see the screen lock that \(policy.accessibility) asks for; use "
                            + ".noVerification (afterFirstUnlockThisDeviceOnly) or the PIN (.devicePasscode)")
                }
                return .none
            case [.devicePasscode]:
                guard policy.reuseDuration == 0 || !policy.accessibility.requiresUnlockedDevice else {
                    throw KeyboundError(
                        .notSupported,
                        message: "the TPM cannot see the screen lock: a reuse window would let the key sign "
                            + "while the screen is locked, which \(policy.accessibility) forbids; use reuse 0 "
                            + "or afterFirstUnlockThisDeviceOnly")
                }
                return .pin
            default:
                if policy.acceptsBiometry {
                    throw KeyboundError(
                        .notSupported,
                        message:
                            "a TPM key cannot be bound to a fingerprint: fprintd decides a match in a root "
                            + "daemon and nothing binds it to the key; use .devicePasscode (the TPM checks the PIN)"
                    )
                }
                if policy.constraints.contains(.applicationPassword) {
                    throw KeyboundError(
                        .notSupported,
                        message: "TPM keys take the device PIN (.devicePasscode), not an application password"
                    )
                }
                throw KeyboundError(
                    .notSupported, message: "TPM keys take one constraint, .devicePasscode, not \(policy)")
            }
        }

        // MARK: The device PIN

        /// Whether a device PIN is set (without the PIN).
        public func isPINSet() async throws -> Bool {
            await probeIdentityOnce()
            let files = self.files
            return try await device.serially { files.exists(files.pinURL) }
        }

        /// Sets the device PIN: makes the PIN object, whose authorization value it is, inside the
        /// TPM. Keys bound to the PIN can be made from then on.
        /// - Parameter pin: 4–64 characters.
        /// - Throws: ``KeyboundError/duplicateItem`` when a PIN is set (``changePIN(from:to:)``);
        ///   ``KeyboundError/invalidInput`` for a PIN outside 4–64 characters; TPM errors.
        public func setPIN(_ pin: String) async throws {
            let authValue = try Self.pinAuthValue(pin)
            try await withTPM { connection, primary, files in
                guard !files.exists(files.pinURL) else {
                    throw KeyboundError(
                        .duplicateItem, message: "a PIN is set: changePIN(from:to:) changes it")
                }
                let session = try connection.startSaltedHMACSession(saltKey: primary)
                // Encrypts the new authorization value (the first parameter) on its way in.
                try connection.setParameterEncryption(
                    session, commandParameter: true, responseParameter: false)
                let blob = try connection.create(
                    under: primary, TPMTemplates.pinObject(), authValue: authValue, session: session)
                let name = try connection.name(of: try connection.load(blob, under: primary))
                try files.write(
                    PINRecord(format: PINRecord.currentFormat, blob: blob, objectName: name), to: files.pinURL
                )
            }
        }

        /// Changes the device PIN after the TPM checked the current one (a wrong one counts toward
        /// the lockout). PIN-bound keys keep working, with the new PIN only.
        ///
        /// - Important: The TPM cannot revoke a copy of the old PIN object: whoever saved the
        ///   vault's `pin.json` before the change can still use the keys with the old PIN. The
        ///   change protects against a PIN seen over a shoulder, not against a copied directory.
        /// - Throws: ``KeyboundError/passcodeNotSet`` without a PIN; ``KeyboundError/authenticationFailed``
        ///   for a wrong current PIN; ``KeyboundError/throttled`` in lockout.
        public func changePIN(from current: String, to new: String) async throws {
            let currentValue = try Self.pinAuthValue(current)
            let newValue = try Self.pinAuthValue(new)
            try await withTPM { connection, primary, files in
                let pin = try Self.readPIN(files)
                let session = try connection.startSaltedHMACSession(saltKey: primary)
                let object = try Self.loadPIN(pin, connection, primary)
                try connection.setAuthValue(currentValue, for: object)
                try connection.setParameterEncryption(
                    session, commandParameter: true, responseParameter: false)
                let newPrivate = try connection.changeAuthValue(
                    of: object, parent: primary, to: newValue, session: session)
                try files.write(
                    PINRecord(
                        format: PINRecord.currentFormat, blob: pin.blob.replacingPrivate(newPrivate),
                        objectName: pin.objectName),
                    to: files.pinURL)
            }
        }

        /// Removes the device PIN and destroys every key bound to it (their use would need a PIN
        /// object that no longer exists). Keys without a PIN stay. Removing what is not there
        /// succeeds.
        public func removePIN() async throws {
            let files = self.files
            try await device.serially {
                for url in try files.pinAndItsKeys() { try files.remove(url) }
            }
        }

        /// Has the TPM check `authValue` against the PIN object (for ``TPMPINVerifier``).
        func checkPIN(authValue: Data) async throws {
            try await withTPM { connection, primary, files in
                let pin = try Self.readPIN(files)
                let session = try connection.startSaltedHMACSession(saltKey: primary)
                let object = try Self.loadPIN(pin, connection, primary)
                try connection.flush(primary)
                try connection.setAuthValue(authValue, for: object)
                try connection.policySecret(
                    object, policySession: try connection.startPolicySession(), authSession: session)
            }
        }

        /// The PIN object's authorization value: SHA-256 of a fixed label and the PIN, so that PINs
        /// of any length and script fit the TPM's 32 bytes.
        static func pinAuthValue(_ pin: String) throws -> Data {
            guard (4...64).contains(pin.count) else {
                throw KeyboundError.invalidInput("a PIN is 4–64 characters")
            }
            return Digest.sha256(Data("keybound tpm pin v1\u{0}".utf8) + Data(pin.utf8))
        }

        private static func readPIN(_ files: VaultFiles) throws -> PINRecord {
            let pin: PINRecord?
            do { pin = try files.read(PINRecord.self, at: files.pinURL) } catch { throw Dead.pin(error) }
            guard let pin else {
                throw KeyboundError(.passcodeNotSet, message: "no TPM PIN is set (TPMKeyVault.setPIN)")
            }
            return pin
        }

        /// Loads the PIN object; one this TPM refuses is dead, with its keys.
        private static func loadPIN(_ pin: PINRecord, _ connection: ESYSConnection, _ primary: ESYS_TR) throws
            -> ESYS_TR
        {
            do { return try connection.load(pin.blob, under: primary) } catch let error as KeyboundError
                where error == .invalidated
            {
                throw Dead.pin(error)
            }
        }

        // MARK: KeyVault

        /// Creates a P-256 key inside the TPM, replacing any key of that name. Needs no PIN, even
        /// for a PIN-bound key (its policy names the PIN object, not the PIN).
        /// - Returns: the public key as SubjectPublicKeyInfo DER.
        /// - Throws: as ``checkSupported(_:)``; ``KeyboundError/passcodeNotSet`` for a PIN-bound key
        ///   before ``setPIN(_:)``; ``KeyboundError/notSupported`` without a reachable TPM.
        public func createKey(_ name: ItemName, policy: AccessPolicy) async throws -> Data {
            let protection = try Self.protection(for: policy)
            return try await withTPM { connection, primary, files in
                let pin = protection == .pin ? try Self.readPIN(files) : nil
                let template = try TPMTemplates.p256Key(
                    authPolicy: pin.map { TPMTemplates.policySecretDigest(authObjectName: $0.objectName) })
                let blob = try connection.create(
                    under: primary, template, authValue: Data(), session: ESYS_TR(ESYS_TR_PASSWORD))
                let spki = try Self.spki(of: blob)
                try files.write(
                    KeyRecord(
                        format: KeyRecord.currentFormat, name: name, policy: policy, blob: blob,
                        pinObjectName: pin?.objectName),
                    to: files.keyURL(name))
                return spki
            }
        }

        /// The public key (SPKI DER), from the stored blob: needs no PIN, and no TPM.
        /// - Throws: ``KeyboundError/itemNotFound``.
        public func publicKey(_ name: ItemName) async throws -> Data {
            await probeIdentityOnce()
            let files = self.files
            return try await device.serially {
                do { return try Self.spki(of: try Self.record(name, files).blob) } catch Dead.key(
                    _, let error)
                {
                    // A damaged file: reported, left for the next use of the key to move aside.
                    throw Self.invalidated(error, "\(name)'s file is damaged")
                }
            }
        }

        /// Signs `message`: ECDSA P-256 over SHA-256(`message`), hashed here and signed by the TPM;
        /// the DER signature `SecKeyCreateSignature(.ecdsaSignatureMessageX962SHA256)` produces.
        /// A PIN-bound key needs a ``Verification`` from ``TPMPINVerifier``, whose PIN the TPM
        /// checks again.
        /// - Throws: ``KeyboundError/itemNotFound``; ``KeyboundError/authenticationFailed`` (no,
        ///   spent or foreign verification, or a PIN the TPM refused); ``KeyboundError/throttled``
        ///   in lockout; ``KeyboundError/invalidated`` for a key this TPM can no longer load (it is
        ///   moved aside, so the key is gone from then on, as an invalidated Secure Enclave key is).
        public func sign(_ message: Data, with name: ItemName, verification: Verification?) async throws
            -> Data
        {
            let digest = Digest.sha256(message)
            let now = clock.now()
            let raw = try await withTPM { connection, primary, files in
                let use = try Self.authorizedUse(name, verification, files, now: now)
                return try use.run(on: connection, primary: primary, secretResponse: false) {
                    key, session, _ in
                    try connection.signECDSA(digest: digest, with: key, session: session)
                }
            }
            return try P256Signature(rawRepresentation: raw).derRepresentation
        }

        /// Whether `signature` (DER) is a valid ECDSA P-256 SHA-256 signature over `message` by the
        /// key, checked here with its public part (KeyboundCrypto): no PIN, no TPM.
        /// - Throws: ``KeyboundError/itemNotFound``.
        public func isValidSignature(_ signature: Data, for message: Data, by name: ItemName) async throws
            -> Bool
        {
            let publicKey = try P256PublicKey(spkiDER: try await publicKey(name))
            guard let parsed = try? P256Signature(derRepresentation: signature) else { return false }
            return publicKey.isValidSignature(parsed, for: message)
        }

        /// Encrypts `plaintext` to the key, with no verification: an ephemeral P-256 key pair and
        /// the shared secret come from the TPM (TPM2_ECDH_KeyGen), then HKDF-SHA-256 and
        /// AES-256-GCM (KeyboundCrypto). The bytes differ from Apple's ECIES; the contract is the
        /// same: anyone may encrypt, only a verified user can decrypt.
        /// - Returns: ephemeral public point (65 bytes) || nonce (12) || ciphertext || tag (16).
        public func encrypt(_ plaintext: Data, for name: ItemName) async throws -> Data {
            let now = clock.now()
            let (shared, ephemeral, recipient) = try await withTPM { connection, primary, files in
                let use = try Self.authorizedUse(name, nil, files, now: now, needsAuthorization: false)
                let (shared, ephemeral) = try use.run(on: connection, primary: primary, secretResponse: true)
                {
                    key, _, encryptSession in
                    try connection.ecdhKeyGen(key, encryptSession: encryptSession)
                }
                return (shared, ephemeral, try use.record.blob.eccPublicPoint())
            }
            return ephemeral
                + (try Self.seal(plaintext, shared: shared, ephemeral: ephemeral, recipient: recipient))
        }

        /// Decrypts what ``encrypt(_:for:)`` made: the TPM computes the shared secret
        /// (TPM2_ECDH_ZGen) under the same authorization as ``sign(_:with:verification:)``.
        /// - Throws: ``KeyboundError/invalidInput`` for what is not such a ciphertext for this key
        ///   (or was altered); otherwise as ``sign(_:with:verification:)``.
        public func decrypt(_ ciphertext: Data, with name: ItemName, verification: Verification?) async throws
            -> Data
        {
            let pointCount = 1 + 2 * TPMBytes.p256ByteCount
            guard ciphertext.count >= pointCount + AES256GCM.nonceByteCount + AES256GCM.tagByteCount,
                ciphertext.first == 0x04
            else {
                throw KeyboundError.invalidInput("not a Keybound TPM ciphertext (\(ciphertext.count) bytes)")
            }
            let bytes = [UInt8](ciphertext)
            let ephemeral = Data(bytes[..<pointCount])
            let now = clock.now()
            let (shared, recipient) = try await withTPM { connection, primary, files in
                let use = try Self.authorizedUse(name, verification, files, now: now)
                let shared = try use.run(on: connection, primary: primary, secretResponse: true) {
                    key, session, encryptSession in
                    try connection.ecdhZGen(
                        key, point: ephemeral, session: session, encryptSession: encryptSession)
                }
                return (shared, try use.record.blob.eccPublicPoint())
            }
            do {
                let key = try Self.sealingKey(shared: shared, ephemeral: ephemeral, recipient: recipient)
                return try AES256GCM.open(Data(bytes[pointCount...]), key: key, authenticating: ephemeral)
            } catch {
                throw KeyboundError.invalidInput("the ciphertext was not made for \(name), or was altered")
            }
        }

        /// Deletes the key's blob. Deleting what is not there succeeds. (The TPM holds nothing of
        /// a key between uses; a copy of the blob elsewhere still needs this TPM, and its PIN.)
        public func deleteKey(_ name: ItemName) async throws {
            let files = self.files
            try await device.serially { try files.remove(files.keyURL(name)) }
        }

        /// Whether a key of that name exists (its blob is here). Needs no PIN; asks the TPM only
        /// once in the process, whether it is still the one the vault's keys were made by (when
        /// it cannot be reached, the blobs on disk answer).
        public func keyExists(_ name: ItemName) async throws -> Bool {
            await probeIdentityOnce()
            let files = self.files
            return try await device.serially { files.exists(files.keyURL(name)) }
        }

        /// SHA-256 by KeyboundCrypto (OpenSSL).
        public func sha256(_ message: Data) -> Data { Digest.sha256(message) }

        // MARK: The TPM the keys belong to

        /// What no longer loads on this TPM: moved aside by ``withTPM(_:)``, then reported.
        private enum Dead: Error {
            /// One key: its blob does not load, it is damaged, or the PIN object it names is gone.
            case key(ItemName, any Error)
            /// The PIN object (damaged, or refused by the TPM): it goes with the keys bound to it.
            case pin(any Error)
        }

        /// Runs `body` on the TPM once the storage primary key is made and the TPM is known to be
        /// the one this vault's objects were made by (recorded the first time).
        ///
        /// When it is not (the TPM was cleared, or the directory came from another machine), every
        /// key and the PIN are moved aside and the call fails with ``KeyboundError/invalidated``:
        /// from then on they are gone, as Secure Enclave keys are after an erase, and the flows
        /// offer to enroll again. One key or the PIN object that no longer loads goes alone.
        private func withTPM<Value: Sendable>(
            _ body: @escaping @Sendable (ESYSConnection, ESYS_TR, VaultFiles) throws -> Value
        ) async throws -> Value {
            let files = self.files
            let now = clock.now()
            let probe = identityProbe
            return try await device.withConnection { connection in
                let primary = try connection.createStoragePrimary()
                try Self.checkIdentity(primary.publicPoint, files, now: now)
                Self.probed.withLock { _ = $0.insert(probe) }
                do {
                    return try body(connection, primary.handle, files)
                } catch Dead.key(let name, let error) {
                    let folder = try files.moveAside([files.keyURL(name)], now: now)
                    throw Self.invalidated(error, "\(name) was moved to \(folder)")
                } catch Dead.pin(let error) {
                    let folder = try files.moveAside(try files.pinAndItsKeys(), now: now)
                    throw Self.invalidated(error, "the PIN and its keys were moved to \(folder)")
                }
            }
        }

        /// Moves everything aside when the TPM is not the one that made it.
        private static func checkIdentity(_ storageKey: Data, _ files: VaultFiles, now: Date) throws {
            let current = TPMIdentity(format: TPMIdentity.currentFormat, storageKey: storageKey)
            // A damaged record is no evidence either way: the next load of each blob decides.
            guard let recorded = (try? files.read(TPMIdentity.self, at: files.identityURL)) ?? nil else {
                return try files.write(current, to: files.identityURL)
            }
            guard recorded.storageKey != storageKey else { return }
            let folder = try files.moveAside(try files.everything(), now: now)
            try files.write(current, to: files.identityURL)
            throw KeyboundError(
                .invalidated,
                message: "this vault's keys and PIN were made by another TPM, or by this one before it was "
                    + "cleared; they were moved to \(folder)")
        }

        /// `(TCTI, directory)` pairs whose TPM was checked in this process. A TPM is cleared through
        /// its firmware, with a reboot, so once per process is enough; a load that fails later
        /// (TPM2_Clear at run time) still finds it.
        private static let probed = Mutex<Set<String>>([])
        private var identityProbe: String { connection.tcti + "\u{0}" + directory.standardizedFileURL.path }

        /// Checks the TPM's identity once in the process, for the calls that need no TPM; an
        /// unreachable TPM leaves the answer to the files, and is tried again next time.
        private func probeIdentityOnce() async {
            guard !Self.probed.withLock({ $0.contains(identityProbe) }) else { return }
            _ = try? await withTPM { _, _, _ in () }
        }

        private static func invalidated(_ error: any Error, _ note: String) -> KeyboundError {
            let error = error as? KeyboundError ?? KeyboundError(.invalidated, message: "\(error)")
            return KeyboundError(
                .invalidated, native: error.native, message: (error.message.map { $0 + "; " } ?? "") + note)
        }

        // MARK: Using a key

        /// What one use of a key needs: its record and, for a PIN-bound key, the PIN object and the
        /// authorization value the verification carries.
        private struct AuthorizedUse: Sendable {
            let record: KeyRecord
            let pin: PINRecord?
            let authValue: Data?

            /// Loads the key (and the PIN object), proves the PIN in a policy session when the key
            /// needs it, and runs `body` with the key, the session that authorizes it (the policy
            /// session, or the password session for a key without a PIN; none when `pin` is nil and
            /// no authorization was asked for), and a salted session that encrypts the first
            /// response parameter when `secretResponse` (else none). Flushes the primary key.
            func run<Value>(
                on connection: ESYSConnection, primary: ESYS_TR, secretResponse: Bool,
                _ body: (ESYS_TR, ESYS_TR, ESYS_TR) throws -> Value
            ) throws -> Value {
                let salted =
                    secretResponse || pin != nil
                    ? try connection.startSaltedHMACSession(saltKey: primary) : ESYS_TR(ESYS_TR_NONE)
                var session = ESYS_TR(ESYS_TR_PASSWORD)
                if let pin, let authValue {
                    let pinObject = try TPMKeyVault.loadPIN(pin, connection, primary)
                    try connection.setAuthValue(authValue, for: pinObject)
                    session = try connection.startPolicySession()
                    try connection.policySecret(pinObject, policySession: session, authSession: salted)
                    try connection.flush(pinObject)
                }
                do {
                    let key = try connection.load(record.blob, under: primary)
                    try connection.flush(primary)
                    if secretResponse {
                        try connection.setParameterEncryption(
                            salted, commandParameter: false, responseParameter: true)
                    }
                    return try body(key, session, salted)
                } catch let error as KeyboundError where error == .invalidated {
                    throw Dead.key(record.name, error)
                }
            }
        }

        /// The key's record and, when its TPM policy needs the PIN (and `needsAuthorization`), the
        /// PIN object and the PIN the verification carries — spending a single-use verification.
        ///
        /// Whether the PIN is needed is read from the blob's own public area (a non-empty
        /// `authPolicy`), which the TPM enforces, not from the record's policy, which anyone who
        /// can write the file could change.
        private static func authorizedUse(
            _ name: ItemName, _ verification: Verification?, _ files: VaultFiles, now: Date,
            needsAuthorization: Bool = true
        ) throws -> AuthorizedUse {
            let record = try Self.record(name, files)
            let needsPIN: Bool
            do { needsPIN = try record.blob.publicArea().publicArea.authPolicy.size > 0 } catch {
                throw Dead.key(name, error)
            }
            guard needsPIN, needsAuthorization else {
                return AuthorizedUse(record: record, pin: nil, authValue: nil)
            }
            guard let proof = verification?.context as? TPMPINProof else {
                throw KeyboundError(
                    .authenticationFailed,
                    message: "\(name) needs the TPM PIN: pass the Verification from TPMPINVerifier")
            }
            guard proof.spend(now: now) else {
                throw KeyboundError(
                    .authenticationFailed,
                    message: "the verification was already used or its reuse window is over")
            }
            let pin: PINRecord?
            do { pin = try files.read(PINRecord.self, at: files.pinURL) } catch { throw Dead.pin(error) }
            guard let pin, pin.objectName == record.pinObjectName else {
                throw Dead.key(
                    name, KeyboundError(.invalidated, message: "the PIN \(name) was bound to is gone"))
            }
            return AuthorizedUse(record: record, pin: pin, authValue: proof.authValue)
        }

        private static func record(_ name: ItemName, _ files: VaultFiles) throws -> KeyRecord {
            let record: KeyRecord?
            do { record = try files.read(KeyRecord.self, at: files.keyURL(name)) } catch {
                throw Dead.key(name, error)
            }
            guard let record else { throw KeyboundError(.itemNotFound, message: "no TPM key \(name)") }
            return record
        }

        private static func spki(of blob: TPMBlob) throws -> Data {
            try P256PublicKey(x963Representation: try blob.eccPublicPoint()).spkiDER
        }

        // MARK: Encryption

        /// HKDF-SHA-256 of the ECDH secret, bound to both public points and the format.
        private static func sealingKey(shared: Data, ephemeral: Data, recipient: Data) throws -> Data {
            try HKDFSHA256.deriveKey(
                inputKeyMaterial: shared, salt: Data(),
                info: Data("keybound tpm ecdh aes-256-gcm v1".utf8) + ephemeral + recipient,
                outputByteCount: AES256GCM.keyByteCount)
        }

        private static func seal(_ plaintext: Data, shared: Data, ephemeral: Data, recipient: Data) throws
            -> Data
        {
            let key = try sealingKey(shared: shared, ephemeral: ephemeral, recipient: recipient)
            return try AES256GCM.seal(plaintext, key: key, authenticating: ephemeral)
        }
    }
#endif
