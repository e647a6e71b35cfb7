#if canImport(Security) && canImport(LocalAuthentication) && canImport(CryptoKit)
    import CryptoKit
    import Foundation
    import Keybound
    import LocalAuthentication
    import Security

    /// P-256 keys inside the Secure Enclave: the private key is made there and never leaves it;
    /// every signature or decryption is allowed by the Secure Enclave only after the OS verified
    /// the user as the key's ``AccessPolicy`` requires (access control `privateKeyUsage` plus
    /// the policy's constraints).
    ///
    /// ```swift
    /// let vault = try SecureEnclaveVault(namespace: "com.acme.login")
    /// let publicKey = try await vault.createKey("device-key", policy: .biometryCurrentSet)  // SPKI DER
    /// let verification = try await LocalAuthenticationVerifier().verify(.biometryCurrentSet, prompt: prompt)
    /// let signature = try await vault.sign(payload, with: "device-key", verification: verification)
    /// ```
    ///
    /// Where there is no Secure Enclave (the Simulator, Macs without Apple silicon or a T2 chip)
    /// every call throws ``KeyboundError/notSupported``. Apps normally wrap the vault in
    /// ``ProtectedKeys`` for the typed invalidation signal.
    public struct SecureEnclaveVault: KeyVault {
        /// Prefixes every key's application tag (`kSecAttrApplicationTag` is
        /// "`namespace`.`name`"), e.g. your bundle identifier.
        public let namespace: String
        /// The Keychain access group the keys live in, or nil for the app's default group.
        public let accessGroup: String?

        /// The label of keys that need a verification, so that a use without one can say so.
        private static let protectedLabel = "Keybound key (verified use)"
        private static let openLabel = "Keybound key"

        /// Signatures: ECDSA over SHA-256 of the message, DER-encoded (X9.62).
        static let signatureAlgorithm = SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256
        /// Encryption to the key: ECIES, cofactor ECDH, X9.63 KDF with SHA-256, AES-GCM with a
        /// variable IV. Output: ephemeral public point (65 bytes) || ciphertext || 16-byte tag.
        static let encryptionAlgorithm = SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM

        /// - Parameters:
        ///   - namespace: prefixes the keys' tags, e.g. your bundle identifier.
        ///   - accessGroup: a Keychain access group from your entitlements.
        /// - Throws: ``KeyboundError/invalidInput`` for an empty namespace or access group.
        public init(namespace: String, accessGroup: String? = nil) throws {
            guard !namespace.isEmpty, accessGroup?.isEmpty != true else {
                throw KeyboundError.invalidInput("a key namespace and access group cannot be empty")
            }
            self.namespace = namespace
            self.accessGroup = accessGroup
        }

        /// Whether this device has a Secure Enclave Keybound can use.
        public static var isAvailable: Bool { SecureEnclave.isAvailable }

        /// Creates a key bound to `policy`, replacing any key of that name.
        /// - Returns: the public key as SubjectPublicKeyInfo DER, as the server expects it.
        /// - Throws: ``KeyboundError/notSupported`` without a Secure Enclave;
        ///   ``KeyboundError/invalidInput`` for a policy that is not `…ThisDeviceOnly`;
        ///   ``KeyboundError/passcodeNotSet`` and others from the Keychain.
        public func createKey(_ name: ItemName, policy: AccessPolicy) async throws -> Data {
            try Self.requireSecureEnclave()
            let access = try AppleAccessControl.key(policy)
            let base = baseQuery(name)
            let label = policy.requiresVerification ? Self.protectedLabel : Self.openLabel
            return try await Keychain.perform {
                try Keychain.delete(base.query)
                guard let flags = access.flags else {
                    throw KeyboundError(.unexpected, message: "no key flags")
                }
                let control = try Keychain.accessControl(
                    try Keychain.accessibility(access.accessibility), flags)
                var privateAttributes: Keychain.Query = [
                    kSecAttrIsPermanent as String: true,
                    kSecAttrApplicationTag as String: base.query[kSecAttrApplicationTag as String] as Any,
                    kSecAttrAccessControl as String: control,
                    kSecAttrLabel as String: label,
                ]
                if let group = base.query[kSecAttrAccessGroup as String] {
                    privateAttributes[kSecAttrAccessGroup as String] = group
                }
                let attributes: Keychain.Query = [
                    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                    kSecAttrKeySizeInBits as String: 256,
                    kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                    kSecUseDataProtectionKeychain as String: true,
                    kSecPrivateKeyAttrs as String: privateAttributes,
                ]
                let privateKey = try Keychain.createRandomKey(attributes)
                return try Self.spki(of: privateKey)
            }
        }

        /// The public key (SPKI DER). Never prompts.
        public func publicKey(_ name: ItemName) async throws -> Data {
            let base = baseQuery(name)
            let box = try Keychain.context(for: nil)
            return try await Keychain.perform { try Self.spki(of: try Self.privateKey(base, box.context)) }
        }

        /// Signs `message` with ECDSA P-256 over SHA-256 (`.ecdsaSignatureMessageX962SHA256`),
        /// inside the Secure Enclave, using the verification's `LAContext`.
        /// - Returns: the DER signature.
        /// - Throws: `itemNotFound`, `authenticationFailed` (no, spent or unsuitable verification),
        ///   `userCancel`, `notSupported`, …
        public func sign(_ message: Data, with name: ItemName, verification: Verification?) async throws
            -> Data
        {
            try await usePrivateKey(
                name, verification, .sign, Self.signatureAlgorithm, message, what: "sign",
                unsupported: "\(name) cannot sign ECDSA P-256 SHA-256", SecKeyCreateSignature)
        }

        /// Whether `signature` (DER) is a valid `.ecdsaSignatureMessageX962SHA256` signature over
        /// `message` by the key's public part. Never prompts.
        public func isValidSignature(_ signature: Data, for message: Data, by name: ItemName) async throws
            -> Bool
        {
            let base = baseQuery(name)
            let box = try Keychain.context(for: nil)
            return try await Keychain.perform {
                guard let publicKey = SecKeyCopyPublicKey(try Self.privateKey(base, box.context)) else {
                    throw KeyboundError(.unexpected, message: "\(name) has no public key")
                }
                // A signature that does not verify is `false` (errSecVerifyFailed), not an error.
                return SecKeyVerifySignature(
                    publicKey, Self.signatureAlgorithm, message as CFData, signature as CFData, nil)
            }
        }

        /// Encrypts `plaintext` to the key's public part with
        /// `.eciesEncryptionCofactorVariableIVX963SHA256AESGCM`. Needs no verification.
        public func encrypt(_ plaintext: Data, for name: ItemName) async throws -> Data {
            let base = baseQuery(name)
            let box = try Keychain.context(for: nil)
            return try await Keychain.perform {
                let privateKey = try Self.privateKey(base, box.context)
                guard let publicKey = SecKeyCopyPublicKey(privateKey) else {
                    throw KeyboundError(.unexpected, message: "\(name) has no public key")
                }
                guard SecKeyIsAlgorithmSupported(publicKey, .encrypt, Self.encryptionAlgorithm) else {
                    throw KeyboundError(.notSupported, message: "\(name) cannot encrypt with ECIES")
                }
                var error: Unmanaged<CFError>?
                guard
                    let ciphertext = SecKeyCreateEncryptedData(
                        publicKey, Self.encryptionAlgorithm, plaintext as CFData, &error)
                else { throw Keychain.mapped(error, "encrypt") }
                return ciphertext as Data
            }
        }

        /// Decrypts what ``encrypt(_:for:)`` made, inside the Secure Enclave, using the
        /// verification's `LAContext` as ``sign(_:with:verification:)`` does.
        /// - Throws: `invalidInput` for what cannot be such a ciphertext (or fails its tag),
        ///   `itemNotFound`, `authenticationFailed`, …
        public func decrypt(_ ciphertext: Data, with name: ItemName, verification: Verification?) async throws
            -> Data
        {
            // Ephemeral point (65) + AES-GCM tag (16): anything shorter cannot be ours.
            guard ciphertext.count >= 81, ciphertext.first == 0x04 else {
                throw KeyboundError.invalidInput("not a Keybound ciphertext (\(ciphertext.count) bytes)")
            }
            return try await usePrivateKey(
                name, verification, .decrypt, Self.encryptionAlgorithm, ciphertext, what: "decrypt",
                unsupported: "\(name) cannot decrypt ECIES", SecKeyCreateDecryptedData)
        }

        /// Deletes the key. Deleting what is not there succeeds.
        public func deleteKey(_ name: ItemName) async throws {
            let base = baseQuery(name)
            try await Keychain.perform { try Keychain.delete(base.query) }
        }

        /// SHA-256 by CryptoKit.
        public func sha256(_ message: Data) -> Data { Data(SHA256.hash(data: message)) }

        /// Whether a key of that name exists. Never prompts.
        public func keyExists(_ name: ItemName) async throws -> Bool {
            let base = baseQuery(name)
            let box = try Keychain.context(for: nil)
            return try await Keychain.perform {
                var query = base.query
                query[kSecReturnAttributes as String] = true
                query[kSecMatchLimit as String] = kSecMatchLimitOne
                query[kSecUseAuthenticationContext as String] = box.context
                return try Keychain.exists(query)
            }
        }

        // MARK: Helpers

        private static func requireSecureEnclave() throws {
            guard SecureEnclave.isAvailable else {
                throw KeyboundError(
                    .notSupported,
                    message:
                        "this device has no Secure Enclave (Simulator, or a Mac without Apple silicon or T2)")
            }
        }

        /// `SecKeyCreateSignature` or `SecKeyCreateDecryptedData`: key, algorithm, input, error.
        private typealias KeyOperation =
            @Sendable (
                SecKey, SecKeyAlgorithm, CFData, UnsafeMutablePointer<Unmanaged<CFError>?>?
            ) -> CFData?

        /// What ``sign(_:with:verification:)`` and ``decrypt(_:with:verification:)`` share: looks up
        /// the private key bound to the verification's `LAContext`, checks that it supports
        /// `algorithm` for `operation` (else `notSupported` with the message `unsupported`) and runs
        /// `create` on `input` inside the Secure Enclave. A failure of `create` is the Keychain
        /// error for `what`, or "verify first" (``useError(_:_:_:_:)``).
        private func usePrivateKey(
            _ name: ItemName, _ verification: Verification?, _ operation: SecKeyOperationType,
            _ algorithm: SecKeyAlgorithm, _ input: Data, what: String, unsupported: String,
            _ create: @escaping KeyOperation
        ) async throws -> Data {
            let base = baseQuery(name)
            let box = try Keychain.context(for: verification)
            let hasVerification = verification != nil
            return try await Keychain.perform {
                let key = try Self.privateKey(base, box.context)
                guard SecKeyIsAlgorithmSupported(key, operation, algorithm) else {
                    throw KeyboundError(.notSupported, message: unsupported)
                }
                var error: Unmanaged<CFError>?
                guard let output = create(key, algorithm, input as CFData, &error) else {
                    throw Self.useError(Keychain.mapped(error, what), base, name, hasVerification)
                }
                return output as Data
            }
        }

        /// The query naming one key: private EC key in the Secure Enclave, by application tag.
        private func baseQuery(_ name: ItemName) -> SendableQuery {
            var query: Keychain.Query = [
                kSecClass as String: kSecClassKey,
                kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecAttrApplicationTag as String: Data("\(namespace).\(name.rawValue)".utf8),
                kSecUseDataProtectionKeychain as String: true,
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return SendableQuery(query)
        }

        /// The private key reference, bound to `context`: the Secure Enclave uses that context
        /// for the operation, so an evaluated one means no second prompt.
        private static func privateKey(_ base: SendableQuery, _ context: LAContext) throws -> SecKey {
            try requireSecureEnclave()
            var query = base.query
            query[kSecReturnRef as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            query[kSecUseAuthenticationContext as String] = context
            let result = try Keychain.copyMatching(query)
            guard CFGetTypeID(result) == SecKeyGetTypeID() else {
                throw KeyboundError(.unexpected, message: "the Keychain returned something other than a key")
            }
            return result as! SecKey  // Checked by type id just above.
        }

        /// The key's public part as SPKI DER.
        private static func spki(of privateKey: SecKey) throws -> Data {
            guard let publicKey = SecKeyCopyPublicKey(privateKey) else {
                throw KeyboundError(.unexpected, message: "the key has no public part")
            }
            var error: Unmanaged<CFError>?
            guard let x963 = SecKeyCopyExternalRepresentation(publicKey, &error) else {
                throw Keychain.mapped(error, "export public key")
            }
            return try P256PublicKeyEncoding.spki(fromX963: x963 as Data)
        }

        /// A failed use without a verification of a key that needs one is `authenticationFailed`
        /// ("verify first"), not the "device locked" the non-interactive context reports.
        private static func useError(
            _ error: KeyboundError, _ base: SendableQuery, _ name: ItemName, _ hasVerification: Bool
        ) -> KeyboundError {
            guard !hasVerification, error == .interactionNotAllowed || error == .authenticationFailed else {
                return error
            }
            var query = base.query
            query[kSecReturnAttributes as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            query[kSecUseAuthenticationContext as String] = try? Keychain.context(for: nil).context
            let attributes = try? Keychain.copyMatching(query) as? [String: Any]
            guard attributes?[kSecAttrLabel as String] as? String == protectedLabel else { return error }
            return KeyboundError(
                .authenticationFailed,
                message: "\(name) is protected: pass the Verification from LocalAuthenticationVerifier")
        }
    }
#endif
