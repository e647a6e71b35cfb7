#if canImport(Security) && canImport(LocalAuthentication)
    import Foundation
    import Keybound
    import LocalAuthentication
    import Security

    /// Small secrets in the Keychain, each guarded by the OS according to its ``AccessPolicy``.
    ///
    /// Items are generic passwords keyed by ``service`` and the item name (the account),
    /// in ``accessGroup`` when one is given, always in the data-protection Keychain (also on
    /// macOS). A policy with constraints becomes a `SecAccessControl`, so Face ID / Touch ID /
    /// the passcode is checked by the Keychain itself when the item is read.
    ///
    /// Reads of protected items take the ``Verification`` from ``LocalAuthenticationVerifier``;
    /// its `LAContext` goes to the Keychain as `kSecUseAuthenticationContext`, so the user is
    /// not asked twice. Without a verification nothing ever prompts: a protected item answers
    /// `authenticationFailed`, a locked device `interactionNotAllowed` — never a silent `nil`.
    ///
    /// Apps usually wrap it in ``ProtectedStore``, which adds `Codable` values and reports an
    /// item destroyed by an enrollment change as ``KeyboundError/invalidated``:
    ///
    /// ```swift
    /// let verifier = LocalAuthenticationVerifier()
    /// let store = ProtectedStore(store: KeychainStore(service: "com.acme.login"), verifier: verifier)
    /// ```
    public struct KeychainStore: SecureStore {
        /// The Keychain service (`kSecAttrService`) all items of this store share.
        public let service: String
        /// The access group (`kSecAttrAccessGroup`) shared with other apps of the same team, or
        /// nil for the app's default group.
        public let accessGroup: String?
        /// Whether items whose policy allows it (no verification, not `…ThisDeviceOnly`) are
        /// synchronized through iCloud Keychain. Protected items never are.
        public let synchronizesWhereAllowed: Bool

        /// The `kSecAttrGeneric` value of items whose policy needs a verification, so that a read
        /// without one can say so instead of "device locked".
        private static let protectedMark = Data("keybound.verified".utf8)

        /// - Parameters:
        ///   - service: groups this store's items, e.g. your bundle identifier.
        ///   - accessGroup: a Keychain access group from your entitlements, to share items.
        ///   - synchronizesWhereAllowed: opt in to iCloud Keychain for unprotected, non-device-only items.
        /// - Throws: ``KeyboundError/invalidInput`` for an empty service or access group.
        public init(service: String, accessGroup: String? = nil, synchronizesWhereAllowed: Bool = false)
            throws
        {
            guard !service.isEmpty, accessGroup?.isEmpty != true else {
                throw KeyboundError.invalidInput("a Keychain service and access group cannot be empty")
            }
            self.service = service
            self.accessGroup = accessGroup
            self.synchronizesWhereAllowed = synchronizesWhereAllowed
        }

        /// Stores `value`, replacing any item of that name (and its policy).
        ///
        /// A duplicate becomes an update of value and access control. When the old item's own
        /// protection refuses the update (it would need a verification), or the Keychain will not
        /// change its access control in place, the old item is deleted and the new one added:
        /// replacing is always allowed, reading is not. If that add then fails, no item is left.
        public func store(
            _ value: Data, as name: ItemName, policy: AccessPolicy, verification: Verification?
        ) async throws {
            let base = baseQuery(name)
            let access = AppleAccessControl.item(policy, allowSynchronization: synchronizesWhereAllowed)
            let mark = policy.requiresVerification ? Self.protectedMark : Data()
            let box = try Keychain.context(for: verification)
            try await Keychain.perform {
                let accessAttributes = try Keychain.accessAttributes(access)
                var attributes = base.query.merging(accessAttributes) { $1 }
                attributes[kSecValueData as String] = value
                attributes[kSecAttrGeneric as String] = mark
                do {
                    try Keychain.add(attributes)
                    return
                } catch let error as KeyboundError where error == .duplicateItem {}

                var query = base.query
                query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
                query[kSecUseAuthenticationContext as String] = box.context
                var changes = accessAttributes
                changes[kSecValueData as String] = value
                changes[kSecAttrGeneric as String] = mark
                do {
                    try Keychain.update(query, changes)
                } catch let error as KeyboundError
                    where [.authenticationFailed, .interactionNotAllowed, .userCancel, .invalidInput]
                    .contains(error)
                {
                    try Keychain.delete(query)
                    try Keychain.add(attributes)
                }
            }
        }

        /// Reads the item; a protected one needs a verification satisfying its policy.
        /// - Throws: `itemNotFound`, `authenticationFailed` (no or spent verification, or it does not
        ///   satisfy the item), `interactionNotAllowed` (device locked), `userCancel`, …
        public func read(_ name: ItemName, verification: Verification?) async throws -> Data {
            let base = baseQuery(name)
            let box = try Keychain.context(for: verification)
            let hasVerification = verification != nil
            return try await Keychain.perform {
                var query = base.query
                query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
                query[kSecReturnData as String] = true
                query[kSecMatchLimit as String] = kSecMatchLimitOne
                query[kSecUseAuthenticationContext as String] = box.context
                do {
                    guard let data = try Keychain.copyMatching(query) as? Data else {
                        throw KeyboundError(.unexpected, message: "\(name) did not read as data")
                    }
                    return data
                } catch let error as KeyboundError where error == .interactionNotAllowed && !hasVerification {
                    throw Self.needsVerification(base) ? Self.missingVerification(name) : error
                }
            }
        }

        /// Replaces the value of an existing item, keeping its policy.
        /// - Throws: `itemNotFound` when there is no such item; otherwise as ``read(_:verification:)``.
        public func update(_ value: Data, as name: ItemName, verification: Verification?) async throws {
            let base = baseQuery(name)
            let box = try Keychain.context(for: verification)
            let hasVerification = verification != nil
            try await Keychain.perform {
                var query = base.query
                query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
                query[kSecUseAuthenticationContext as String] = box.context
                do {
                    try Keychain.update(query, [kSecValueData as String: value])
                } catch let error as KeyboundError where error == .interactionNotAllowed && !hasVerification {
                    throw Self.needsVerification(base) ? Self.missingVerification(name) : error
                }
            }
        }

        /// Deletes the item. Deleting what is not there succeeds; deleting never prompts.
        public func delete(_ name: ItemName) async throws {
            let base = baseQuery(name)
            try await Keychain.perform {
                var query = base.query
                query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
                try Keychain.delete(query)
            }
        }

        /// Whether the item exists. Never prompts; a locked device throws `interactionNotAllowed`.
        public func exists(_ name: ItemName) async throws -> Bool {
            let base = baseQuery(name)
            return try await Keychain.perform { try Self.attributes(base) != nil }
        }

        // MARK: Queries

        /// The query that names one item: class, service, account, access group, and the
        /// data-protection Keychain (the only one with access control, also on macOS).
        private func baseQuery(_ name: ItemName) -> SendableQuery {
            var query: Keychain.Query = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: name.rawValue,
                kSecUseDataProtectionKeychain as String: true,
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return SendableQuery(query)
        }

        /// The item's attributes (never its data), without prompting; nil when absent.
        private static func attributes(_ base: SendableQuery) throws -> [String: Any]? {
            var query = base.query
            query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
            query[kSecReturnAttributes as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            query[kSecUseAuthenticationContext as String] = try Keychain.context(for: nil).context
            do {
                return try Keychain.copyMatching(query) as? [String: Any]
            } catch let error as KeyboundError where error == .itemNotFound {
                return nil
            }
        }

        /// Whether the item is marked as needing a verification (false when that cannot be told).
        private static func needsVerification(_ base: SendableQuery) -> Bool {
            let attributes = try? Self.attributes(base)
            return attributes?[kSecAttrGeneric as String] as? Data == protectedMark
        }

        private static func missingVerification(_ name: ItemName) -> KeyboundError {
            KeyboundError(
                .authenticationFailed,
                message: "\(name) is protected: pass the Verification from LocalAuthenticationVerifier")
        }
    }

    /// A query made of property-list values only (strings, numbers, booleans, data and
    /// Security's constant `CFString`s), which are immutable: safe to send to the Keychain queue.
    struct SendableQuery: @unchecked Sendable {
        let query: Keychain.Query
        init(_ query: Keychain.Query) { self.query = query }
    }
#endif
