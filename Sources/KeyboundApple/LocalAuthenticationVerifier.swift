#if canImport(LocalAuthentication)
    import Foundation
    import Keybound
    import LocalAuthentication

    /// Verifies the user with Face ID, Touch ID, Optic ID or the device passcode through
    /// LocalAuthentication.
    ///
    /// Every ``verify(_:prompt:)`` uses a fresh `LAContext`, so one verification never leaks
    /// into the next; the evaluated context travels inside the returned ``Verification`` to
    /// ``KeychainStore`` and ``SecureEnclaveVault``, which hand it to the Keychain
    /// (`kSecUseAuthenticationContext`). The Keychain and the Secure Enclave check it
    /// themselves: a patched "verified" flag in the app unlocks nothing.
    ///
    /// ```swift
    /// let verifier = LocalAuthenticationVerifier()
    /// let prompt = try VerificationPrompt(reason: "Log in to Acme")
    /// let verification = try await verifier.verify(.biometryCurrentSet, prompt: prompt)
    /// ```
    ///
    /// Results arrive through `async`/`await`; nothing here blocks the main thread.
    public struct LocalAuthenticationVerifier: UserVerifier {
        /// Creates a verifier. It holds no state: each call makes its own `LAContext`.
        public init() {}

        /// What the device can verify now, without prompting: its sensor, why biometrics
        /// cannot be used (if they cannot), whether a passcode is set, and the enrollment
        /// state (`evaluatedPolicyDomainState`) that tells when an enrollment change has
        /// invalidated ``AccessPolicy/biometryCurrentSet`` material.
        public func availability() async -> VerificationAvailability {
            let context = LAContext()
            var biometryError: NSError?
            let canUseBiometry = context.canEvaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics, error: &biometryError)
            // Read after canEvaluatePolicy: LocalAuthentication fills both in there.
            let type = Self.biometryType(context.biometryType)
            var state = context.evaluatedPolicyDomainState

            var passcodeError: NSError?
            let passcodeContext = LAContext()
            let isPasscodeSet =
                passcodeContext.canEvaluatePolicy(.deviceOwnerAuthentication, error: &passcodeError)
                || passcodeError.map { $0.code != LAError.Code.passcodeNotSet.rawValue } ?? true
            // In a biometric lockout the biometric policy reports no domain state; the
            // owner-authentication policy still knows it, and a lockout is no enrollment change.
            if state == nil, !canUseBiometry { state = passcodeContext.evaluatedPolicyDomainState }

            return VerificationAvailability(
                biometryType: type,
                biometryError: canUseBiometry ? nil : Self.error(biometryError),
                isPasscodeSet: isPasscodeSet,
                enrollmentState: state)
        }

        /// Shows the system prompt for `policy` and returns the verification the Keychain will
        /// accept for material bound to it.
        ///
        /// Biometrics-only policies evaluate `.deviceOwnerAuthenticationWithBiometrics`
        /// ("Enter Password" then throws `userFallback`, for the app's own password path);
        /// policies that accept the passcode evaluate `.deviceOwnerAuthentication`, which also
        /// gets the user out of a biometric lockout. The policy's reuse window becomes the
        /// context's `touchIDAuthenticationAllowableReuseDuration`.
        ///
        /// LocalAuthentication does not say which factor the user presented; the returned
        /// ``Verification/factors`` are those the evaluated policy accepts.
        ///
        /// - Throws: ``KeyboundError`` mapped from the `LAError` code (see `docs/apple-mapping.md`):
        ///   `userCancel`, `userFallback`, `systemCancel`, `appCancel`, `authenticationFailed`,
        ///   `biometryLockout`, `biometryNotAvailable`, `biometryNotEnrolled`, `passcodeNotSet`,
        ///   `interactionNotAllowed`.
        public func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
            let context = LAContext()
            context.localizedReason = prompt.reason
            context.localizedFallbackTitle = prompt.fallbackTitle
            context.localizedCancelTitle = prompt.cancelTitle
            context.touchIDAuthenticationAllowableReuseDuration = policy.reuseDuration

            var factors: Set<Verification.Factor> = []
            if policy.constraints.contains(.applicationPassword) {
                guard let password = prompt.applicationPassword,
                    context.setCredential(
                        Data(password.utf8), type: .applicationPassword)
                else {
                    throw KeyboundError.invalidInput(
                        "the policy needs VerificationPrompt.applicationPassword")
                }
                factors.insert(.applicationPassword)
            }

            switch LocalAuthenticationPolicy(policy) {
            case .applicationPasswordOnly:
                break  // The Keychain checks the password itself.
            case .deviceOwnerAuthenticationWithBiometrics:
                try await evaluate(context, .deviceOwnerAuthenticationWithBiometrics, prompt.reason)
                factors.insert(.biometry)
            case .deviceOwnerAuthentication:
                try await evaluate(context, .deviceOwnerAuthentication, prompt.reason)
                factors.insert(.passcode)
                if context.evaluatedPolicyDomainState != nil { factors.insert(.biometry) }
            }

            return Verification(
                id: UUID().uuidString, factors: factors, verifiedAt: Date(),
                reuseDuration: policy.reuseDuration, context: LAContextBox(context))
        }

        /// Evaluates `policy` on `context`, mapping any failure to a ``KeyboundError``.
        ///
        /// The completion-handler form behind a continuation, not the imported `async` form:
        /// Swift 6.3 crashes lowering the imported async `evaluatePolicy` when cross-compiling
        /// from Linux (SILGen, foreign async completion handler). Either way LocalAuthentication
        /// replies on its own queue and no thread waits.
        private func evaluate(_ context: LAContext, _ policy: LAPolicy, _ reason: String) async throws {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Void, any Error>) in
                context.evaluatePolicy(policy, localizedReason: reason) { success, error in
                    if success {
                        continuation.resume()
                    } else if let error {
                        continuation.resume(throwing: Self.error(error as NSError))
                    } else {
                        continuation.resume(
                            throwing: KeyboundError(
                                .authenticationFailed, message: "the evaluation did not succeed"))
                    }
                }
            }
        }

        /// The ``KeyboundError`` for an error LocalAuthentication reported.
        static func error(_ error: NSError?) -> KeyboundError {
            guard let error else {
                return KeyboundError(.unexpected, message: "LocalAuthentication gave no reason")
            }
            return KeyboundError(
                nativeDomain: error.domain, code: error.code, message: error.localizedDescription)
        }

        /// Keybound's name for the sensor. Optic ID is compared by its raw value,
        /// `kLABiometryTypeOpticID` (1 << 2), because the iOS 17.0 / macOS 14.0 SDKs Keybound is
        /// checked against predate the `.opticID` case; `if` comparisons (not a `switch`) keep
        /// this compiling without warnings on SDKs with more cases.
        static func biometryType(_ type: LABiometryType) -> BiometryType {
            if type == .touchID { return .touchID }
            if type == .faceID { return .faceID }
            if type.rawValue == 1 << 2 { return .opticID }
            return .none
        }
    }
#endif
