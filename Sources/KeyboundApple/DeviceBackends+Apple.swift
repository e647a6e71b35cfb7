#if canImport(Security) && canImport(LocalAuthentication) && canImport(CryptoKit)
    import Keybound

    extension DeviceBackends {
        /// This device's Keychain, Secure Enclave and LocalAuthentication, for the SDK's flows.
        ///
        /// ```swift
        /// let login = try BiometricLogin(client: client, device: .apple(service: "com.acme.bank"),
        ///                                configuration: .init(clientID: installationID, serverID: "acme"))
        /// ```
        /// - Parameters:
        ///   - service: names this app's items and prefixes its keys' tags, e.g. the bundle identifier.
        ///   - accessGroup: a Keychain access group from the entitlements, to share with other apps.
        /// - Throws: ``KeyboundError/invalidInput`` for an empty service or access group.
        public static func apple(service: String, accessGroup: String? = nil) throws -> DeviceBackends {
            DeviceBackends(
                store: try KeychainStore(service: service, accessGroup: accessGroup),
                vault: try SecureEnclaveVault(namespace: service, accessGroup: accessGroup),
                verifier: LocalAuthenticationVerifier())
        }
    }
#endif
