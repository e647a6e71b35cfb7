#if canImport(DeviceCheck) && canImport(CryptoKit)
    import CryptoKit
    import DeviceCheck
    import Foundation
    import Keybound

    /// App Attest through `DCAppAttestService.shared`: keys in the Secure Enclave, attested by
    /// Apple for this app's App ID.
    ///
    /// The app needs the App Attest entitlement (`com.apple.developer.devicecheck.appattest-environment`,
    /// `development` or `production`, which decides the attestations' AAGUID). Not available in
    /// the Simulator or in most app extensions (``isSupported`` is false there). Every failure is
    /// a ``KeyboundError`` (see the `DCError` table in docs/apple-mapping.md).
    ///
    /// ```swift
    /// let login = try BiometricLogin(client: client, device: .apple(service: "com.acme.bank"),
    ///                                configuration: configuration, appAttest: PlatformAppAttestService())
    /// ```
    public struct PlatformAppAttestService: AppAttestService {
        /// The shared service.
        public init() {}

        /// `DCAppAttestService.shared.isSupported`.
        public var isSupported: Bool {
            get async { DCAppAttestService.shared.isSupported }
        }

        /// A new Secure Enclave key.
        /// - Returns: its key id, the 32 bytes Apple gives as base64.
        public func generateKey() async throws -> Data {
            try Self.ensureSupported()
            let keyID: String = try await Self.call {
                DCAppAttestService.shared.generateKey(completionHandler: $0)
            }
            guard let bytes = Data(base64Encoded: keyID) else {
                throw KeyboundError(.unexpected, message: "App Attest returned a key id that is not base64")
            }
            return bytes
        }

        /// Has Apple attest the key over SHA-256 of `clientData` (needs the network).
        public func attestKey(_ keyID: Data, clientData: Data) async throws -> Data {
            try await Self.call(keyID, clientData: clientData) {
                DCAppAttestService.shared.attestKey($0, clientDataHash: $1, completionHandler: $2)
            }
        }

        /// Signs SHA-256 of `clientData` with an attested key (offline).
        public func generateAssertion(_ keyID: Data, clientData: Data) async throws -> Data {
            try await Self.call(keyID, clientData: clientData) {
                DCAppAttestService.shared.generateAssertion($0, clientDataHash: $1, completionHandler: $2)
            }
        }

        private static func ensureSupported() throws {
            guard DCAppAttestService.shared.isSupported else {
                throw KeyboundError(.notSupported, message: "App Attest is not available on this device")
            }
        }

        /// What ``attestKey(_:clientData:)`` and ``generateAssertion(_:clientData:)`` share: runs
        /// `start` (given the key id as base64, SHA-256 of `clientData` and the completion handler)
        /// through ``call(_:)``.
        private static func call(
            _ keyID: Data, clientData: Data,
            _ start: (String, Data, @escaping @Sendable (Data?, (any Error)?) -> Void) -> Void
        ) async throws -> Data {
            try ensureSupported()
            let hash = Data(SHA256.hash(data: clientData))
            return try await call { start(keyID.base64EncodedString(), hash, $0) }
        }

        /// Runs a DeviceCheck call and waits for its completion handler, turning its `NSError` into
        /// the ``KeyboundError`` of the table. (The completion handlers, not their imported `async`
        /// forms: the compiler the SDK check runs with crashes lowering those.)
        private static func call<Value: Sendable>(
            _ start: (@escaping @Sendable (Value?, (any Error)?) -> Void) -> Void
        ) async throws -> Value {
            try await withCheckedThrowingContinuation { continuation in
                start { value, error in
                    if let value {
                        continuation.resume(returning: value)
                        return
                    }
                    let native = (error ?? KeyboundError.unexpected) as NSError
                    continuation.resume(
                        throwing: KeyboundError(
                            nativeDomain: native.domain, code: native.code,
                            message: native.localizedDescription))
                }
            }
        }
    }
#endif
