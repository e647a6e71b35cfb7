#if os(Linux)
    import Foundation
    import Keybound
    internal import KeyboundCrypto

    /// Items in the user's Secret Service (gnome-keyring, KeePassXC: the D-Bus API
    /// `org.freedesktop.secrets`), each value sealed under a TPM key of its own from a
    /// ``TPMKeyVault``, made with the item's policy: what the keyring holds is useless without
    /// this machine's TPM and, for a PIN-bound item, the PIN the TPM checks.
    ///
    /// ```swift
    /// let vault = try TPMKeyVault(directory: support.appendingPathComponent("keys"))
    /// let store = try SecretServiceStore(vault: vault, service: "com.acme.app")
    /// try await store.store(token, as: "refresh-token", policy: .devicePasscode, verification: nil)
    /// let verification = try await TPMPINVerifier(vault: vault, entry: askPIN).verify(.devicePasscode, prompt: prompt)
    /// let value = try await store.read("refresh-token", verification: verification)
    /// ```
    ///
    /// **Sealing.** ``store(_:as:policy:verification:)`` makes a TPM key for the item (replacing
    /// the item's old key, so its old copies die with it) and encrypts the value to it
    /// (``TPMKeyVault/encrypt(_:for:)``: ECDH in the TPM, AES-256-GCM); ``read(_:verification:)``
    /// has the TPM decrypt it, which for a PIN-bound item needs ``TPMPINVerifier``'s verification
    /// (the TPM checks the PIN again). One key per item, named from a hash of the store's service
    /// and the item's name, so that a value copied into another item of the keyring opens for
    /// neither.
    ///
    /// **Policies** are ``TPMKeyVault``'s (``TPMKeyVault/checkSupported(_:)``): `.devicePasscode`
    /// and `.noVerification`; a policy the TPM cannot enforce (biometrics, the screen lock, an
    /// application password) is refused with ``KeyboundError/notSupported``, never weakened; so is
    /// an accessibility that would let the item leave the machine: a sealed item never can.
    ///
    /// **Invalidation.** An item whose TPM key is gone (the PIN was removed, the TPM was cleared,
    /// the keyring came from another machine) is gone too, as an invalidated Keychain item is: it
    /// is deleted from the keyring at its next read and reported ``KeyboundError/itemNotFound``,
    /// which ``ProtectedStore`` turns into ``KeyboundError/invalidated`` by its marker. The markers
    /// themselves (Keybound's reserved names) are kept unsealed: they are not secret, and must
    /// outlive the keys whose loss they report.
    ///
    /// **The bus.** The session bus is `DBUS_SESSION_BUS_ADDRESS`'s (or `$XDG_RUNTIME_DIR/bus`).
    /// Values cross it in the Secret Service's `plain` session: they are TPM ciphertext already,
    /// and the keyring gives the same bytes to any process of the user anyway. A locked keyring is
    /// ``KeyboundError/interactionNotAllowed`` (recovery `waitForUnlock`): Keybound shows no
    /// keyring prompt. No Secret Service on the bus is ``KeyboundError/notSupported``.
    public struct SecretServiceStore: SecureStore {
        /// The TPM the values are sealed by.
        public let vault: TPMKeyVault
        /// Whose items these are: the `keybound.service` attribute of every item, as a Keychain
        /// item's service.
        public let service: String
        /// The session bus's address.
        public let busAddress: String

        /// - Parameters:
        ///   - vault: the TPM keys the values are sealed under (the app's own vault).
        ///   - service: the app's name for its items, e.g. its bundle identifier.
        ///   - busAddress: the session bus (default: `DBUS_SESSION_BUS_ADDRESS`, else
        ///     `unix:path=$XDG_RUNTIME_DIR/bus`).
        /// - Throws: ``KeyboundError/invalidInput`` for a service that is empty or over 128 bytes;
        ///   ``KeyboundError/notSupported`` when no session bus address is known.
        public init(vault: TPMKeyVault, service: String, busAddress: String? = nil) throws {
            guard (1...128).contains(service.utf8.count),
                !service.unicodeScalars.contains(where: { $0.value < 0x20 })
            else { throw KeyboundError.invalidInput("a service is 1–128 printable bytes") }
            guard let address = busAddress ?? Self.sessionBusAddress() else {
                throw KeyboundError(
                    .notSupported,
                    message: "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and there is no "
                        + "$XDG_RUNTIME_DIR/bus; the Secret Service runs in the user's desktop session")
            }
            self.vault = vault
            self.service = service
            self.busAddress = address
        }

        private static func sessionBusAddress() -> String? {
            let environment = ProcessInfo.processInfo.environment
            if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
            guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return nil }
            let socket = runtime + "/bus"
            return FileManager.default.fileExists(atPath: socket) ? "unix:path=\(socket)" : nil
        }

        /// Whether items with `policy` can be stored here.
        /// - Throws: ``KeyboundError/notSupported`` (the message says why) for what the TPM cannot
        ///   enforce, and for an accessibility that lets an item leave the machine.
        public static func checkSupported(_ policy: AccessPolicy) throws {
            guard policy.accessibility.isThisDeviceOnly else {
                throw KeyboundError(
                    .notSupported,
                    message: "a value sealed by this TPM never leaves this machine: use a …ThisDeviceOnly "
                        + "accessibility, not \(policy.accessibility)")
            }
            try TPMKeyVault.checkSupported(policy)
        }

        // MARK: SecureStore

        /// Seals `value` under a new TPM key with `policy` and stores it, replacing any item of
        /// that name (and its key).
        /// - Throws: as ``checkSupported(_:)``; ``KeyboundError/passcodeNotSet`` for a PIN-bound
        ///   item before ``TPMKeyVault/setPIN(_:)``; ``KeyboundError/interactionNotAllowed`` for a
        ///   locked keyring; ``KeyboundError/notSupported`` without a Secret Service or a TPM.
        public func store(_ value: Data, as name: ItemName, policy: AccessPolicy, verification: Verification?)
            async throws
        {
            if name.isReserved {
                guard !policy.requiresVerification else {
                    throw KeyboundError(.notSupported, message: "Keybound's own markers are not protected")
                }
                return try await write(value, as: name)
            }
            try Self.checkSupported(policy)
            _ = try await vault.createKey(keyName(name), policy: policy)
            try await write(try await seal(value, name), as: name)
        }

        /// Reads the item and has the TPM open it.
        /// - Throws: ``KeyboundError/itemNotFound`` (never stored, deleted, or its TPM key is
        ///   gone: the item is deleted then); ``KeyboundError/authenticationFailed`` for a
        ///   PIN-bound item without ``TPMPINVerifier``'s verification, or with one spent;
        ///   ``KeyboundError/throttled`` in the TPM's lockout; ``KeyboundError/invalidInput`` for
        ///   a value this store did not seal for this item (altered, or copied from another);
        ///   ``KeyboundError/interactionNotAllowed`` for a locked keyring.
        public func read(_ name: ItemName, verification: Verification?) async throws -> Data {
            let stored = try await readSecret(name)
            if name.isReserved { return stored }
            return try await open(stored, name, verification: verification)
        }

        /// Replaces the value of an existing item, keeping its key and policy: the old value is
        /// opened first, so a PIN-bound item needs the same verification as a read.
        /// - Throws: ``KeyboundError/itemNotFound`` when there is no such item; otherwise as
        ///   ``read(_:verification:)``.
        public func update(_ value: Data, as name: ItemName, verification: Verification?) async throws {
            let stored = try await readSecret(name)
            if name.isReserved { return try await write(value, as: name) }
            _ = try await open(stored, name, verification: verification)
            try await write(try await seal(value, name), as: name)
        }

        /// Deletes the item and its TPM key. Deleting what is not there succeeds.
        /// - Throws: ``KeyboundError/interactionNotAllowed`` for a locked keyring.
        public func delete(_ name: ItemName) async throws {
            let attributes = attributes(name)
            try await SecretServiceSession.run(address: busAddress) { session in
                let found = try session.search(attributes)
                guard found.locked.isEmpty else {
                    throw KeyboundError(
                        .interactionNotAllowed, message: "the keyring holding \(name) is locked")
                }
                for item in found.unlocked { try session.delete(item) }
            }
            if !name.isReserved { try await vault.deleteKey(keyName(name)) }
        }

        /// Whether the item is in the keyring (locked or not) and its TPM key still exists. Never
        /// prompts, needs no PIN.
        public func exists(_ name: ItemName) async throws -> Bool {
            let attributes = attributes(name)
            let found = try await SecretServiceSession.run(address: busAddress) { session in
                try session.search(attributes)
            }
            guard !found.unlocked.isEmpty || !found.locked.isEmpty else { return false }
            return name.isReserved ? true : try await vault.keyExists(keyName(name))
        }

        // MARK: Sealing

        /// The format of a sealed value: this byte, then the TPM vault's ciphertext.
        private static let sealedFormat: UInt8 = 1

        /// The TPM key of an item: a hash of the service and the name, so that names of any
        /// length fit and two stores' items never share a key.
        func keyName(_ name: ItemName) throws -> ItemName {
            let digest = Digest.sha256(Data("keybound secret service v1\u{0}\(service)\u{0}\(name)".utf8))
            return try ItemName(
                "keybound-ss-" + digest.prefix(20).map { String(format: "%02x", $0) }.joined())
        }

        private func seal(_ value: Data, _ name: ItemName) async throws -> Data {
            Data([Self.sealedFormat]) + (try await vault.encrypt(value, for: try keyName(name)))
        }

        /// Opens a sealed value; an item whose key is gone is deleted, and not found.
        private func open(_ stored: Data, _ name: ItemName, verification: Verification?) async throws -> Data
        {
            let key = try keyName(name)
            do {
                guard try await vault.keyExists(key) else {
                    throw KeyboundError(.itemNotFound, message: "\(name)'s TPM key is gone")
                }
                guard stored.first == Self.sealedFormat else {
                    throw KeyboundError.invalidInput("\(name) in the keyring was not sealed by Keybound")
                }
                return try await vault.decrypt(
                    Data(stored.dropFirst()), with: key, verification: verification)
            } catch let error as KeyboundError where error == .itemNotFound || error == .invalidated {
                // The key died (the PIN removed, the TPM cleared, another machine's keyring): the
                // item is useless, and goes, as a Keychain item destroyed with its passcode.
                try? await delete(name)
                throw KeyboundError(
                    .itemNotFound,
                    message: "\(name) can no longer be opened by this TPM (\(error.message ?? "\(error)")); "
                        + "it was deleted")
            }
        }

        // MARK: The keyring

        private func attributes(_ name: ItemName) -> [(String, String)] {
            [
                ("xdg:schema", "dev.keybound.Item"), ("keybound.service", service),
                ("keybound.name", name.rawValue),
            ]
        }

        private func readSecret(_ name: ItemName) async throws -> Data {
            let attributes = attributes(name)
            return try await SecretServiceSession.run(address: busAddress) { session in
                let found = try session.search(attributes)
                guard let item = found.unlocked.first else {
                    if !found.locked.isEmpty {
                        throw KeyboundError(
                            .interactionNotAllowed,
                            message: "the keyring holding \(name) is locked: it unlocks when the user logs in"
                        )
                    }
                    throw KeyboundError(.itemNotFound, message: "no item \(name) in the Secret Service")
                }
                return try session.secret(of: item)
            }
        }

        private func write(_ secret: Data, as name: ItemName) async throws {
            let attributes = attributes(name)
            let label = "\(service): \(name)"
            try await SecretServiceSession.run(address: busAddress) { session in
                try session.createItem(
                    in: try session.defaultCollection(), label: label, attributes: attributes, secret: secret)
            }
        }
    }
#endif
