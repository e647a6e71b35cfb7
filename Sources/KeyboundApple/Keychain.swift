#if canImport(Security) && canImport(LocalAuthentication)
    import Foundation
    import Keybound
    import LocalAuthentication
    import Security

    /// The one gateway to the Keychain: every `SecItem*` call (and the key creation that adds
    /// a Secure Enclave key to it) goes through here, with one `OSStatus` → ``KeyboundError``
    /// mapping and one place that turns ``AppleAccessControl`` into Security types.
    enum Keychain {
        /// A query or attribute dictionary, as the Security functions take it.
        typealias Query = [String: Any]

        /// Security calls block for as long as a system prompt is up, so they run here: neither
        /// the main thread nor Swift's cooperative pool waits on them.
        private static let queue = DispatchQueue(
            label: "Keybound.Keychain", qos: .userInitiated, attributes: .concurrent)

        /// Runs `body` on the Keychain queue and resumes with its result.
        static func perform<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws
            -> Value
        {
            try await withCheckedThrowingContinuation { continuation in
                queue.async { continuation.resume(with: Result { try body() }) }
            }
        }

        // MARK: SecItem

        /// `SecItemAdd`.
        static func add(_ attributes: Query) throws {
            try check(SecItemAdd(attributes as CFDictionary, nil), "add")
        }

        /// `SecItemCopyMatching`; `nil` never stands for an error: not found throws `itemNotFound`.
        static func copyMatching(_ query: Query) throws -> CFTypeRef {
            var result: CFTypeRef?
            try check(SecItemCopyMatching(query as CFDictionary, &result), "read")
            guard let result else {
                throw KeyboundError(.unexpected, message: "the Keychain returned nothing")
            }
            return result
        }

        /// `SecItemUpdate`.
        static func update(_ query: Query, _ attributes: Query) throws {
            try check(SecItemUpdate(query as CFDictionary, attributes as CFDictionary), "update")
        }

        /// `SecItemDelete`; deleting what is not there succeeds.
        static func delete(_ query: Query) throws {
            do {
                try check(SecItemDelete(query as CFDictionary), "delete")
            } catch let error as KeyboundError where error == .itemNotFound {
                return
            }
        }

        /// Whether something matches `query`, without prompting (`context` must not allow
        /// interaction). A locked device is reported, never taken for "absent".
        static func exists(_ query: Query) throws -> Bool {
            do {
                _ = try copyMatching(query)
                return true
            } catch let error as KeyboundError where error == .itemNotFound {
                return false
            }
        }

        /// `SecKeyCreateRandomKey`: the only Keychain write that is not a `SecItem*` call.
        static func createRandomKey(_ attributes: Query) throws -> SecKey {
            var error: Unmanaged<CFError>?
            guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
                throw mapped(error, "create key")
            }
            return key
        }

        /// The one `OSStatus` check.
        static func check(_ status: OSStatus, _ operation: String) throws {
            if let error = KeyboundError(osStatus: status, message: "Keychain \(operation) failed") {
                throw error
            }
        }

        /// The ``KeyboundError`` for a `CFError` a `SecKey*` function reported.
        static func mapped(_ error: Unmanaged<CFError>?, _ operation: String) -> KeyboundError {
            guard let error = error?.takeRetainedValue() else {
                return KeyboundError(.unexpected, message: "\(operation) failed without an error")
            }
            let nsError = error as Error as NSError
            return KeyboundError(
                nativeDomain: nsError.domain, code: nsError.code,
                message: "\(operation): \(nsError.localizedDescription)")
        }

        // MARK: Access control

        /// The one place an ``AppleAccessControl`` becomes Keychain attributes: either
        /// `kSecAttrAccessControl` or `kSecAttrAccessible`, plus synchronization.
        static func accessAttributes(_ access: AppleAccessControl) throws -> Query {
            let accessible = try accessibility(access.accessibility)
            var attributes: Query = [:]
            if let flags = access.flags {
                attributes[kSecAttrAccessControl as String] = try accessControl(accessible, flags)
            } else {
                attributes[kSecAttrAccessible as String] = accessible
            }
            attributes[kSecAttrSynchronizable as String] = access.synchronizable
            return attributes
        }

        /// `SecAccessControlCreateWithFlags` for the flags ``AppleAccessControl`` decided.
        static func accessControl(_ accessible: CFString, _ flags: [AccessControlFlag]) throws
            -> SecAccessControl
        {
            var error: Unmanaged<CFError>?
            guard
                let control = SecAccessControlCreateWithFlags(
                    kCFAllocatorDefault, accessible, createFlags(flags), &error)
            else { throw mapped(error, "access control") }
            return control
        }

        static func createFlags(_ flags: [AccessControlFlag]) -> SecAccessControlCreateFlags {
            var result: SecAccessControlCreateFlags = []
            for flag in flags {
                switch flag {
                case .biometryCurrentSet: result.insert(.biometryCurrentSet)
                case .biometryAny: result.insert(.biometryAny)
                case .userPresence: result.insert(.userPresence)
                case .devicePasscode: result.insert(.devicePasscode)
                case .applicationPassword: result.insert(.applicationPassword)
                case .or: result.insert(.or)
                case .and: result.insert(.and)
                case .privateKeyUsage: result.insert(.privateKeyUsage)
                }
            }
            return result
        }

        static func accessibility(_ name: String) throws -> CFString {
            switch name {
            case "kSecAttrAccessibleWhenUnlocked": kSecAttrAccessibleWhenUnlocked
            case "kSecAttrAccessibleWhenUnlockedThisDeviceOnly": kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case "kSecAttrAccessibleAfterFirstUnlock": kSecAttrAccessibleAfterFirstUnlock
            case "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly":
                kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            case "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly":
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly
            default: throw KeyboundError(.unexpected, message: "unknown accessibility \(name)")
            }
        }

        // MARK: Authentication context

        /// The `LAContext` a call uses: the verification's when there is one (it must be one a
        /// ``LocalAuthenticationVerifier`` made, still within its reuse window), otherwise a
        /// fresh context that may not show any UI — the replacement for the deprecated
        /// `kSecUseAuthenticationUISkip`, so a protected item fails instead of prompting.
        static func context(for verification: Verification?) throws -> LAContextBox {
            guard let verification else {
                let context = LAContext()
                context.interactionNotAllowed = true
                return LAContextBox(context)
            }
            guard let box = verification.context as? LAContextBox else {
                throw KeyboundError(
                    .authenticationFailed,
                    message: "the verification was not made by LocalAuthenticationVerifier")
            }
            try box.admit(verification)
            return box
        }
    }
#endif
