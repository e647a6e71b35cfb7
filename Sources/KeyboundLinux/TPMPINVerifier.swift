#if os(Linux)
    import Foundation
    import Keybound

    /// Verifies the user by the device PIN of a ``TPMKeyVault``, which the TPM checks: the
    /// ``Verification`` it returns carries the PIN (in memory, for its reuse window) so that the
    /// vault can prove it to the TPM again at each use of a PIN-bound key.
    ///
    /// ```swift
    /// let verifier = TPMPINVerifier(vault: vault) { prompt in
    ///     try await pinDialog.ask(prompt.reason)   // throw KeyboundError.userCancel on Cancel
    /// }
    /// ```
    ///
    /// It satisfies policies the device passcode satisfies (``AccessPolicy/devicePasscode``,
    /// ``AccessPolicy/userPresence``, ``AccessPolicy/biometryOrPasscode``); a biometrics-only policy
    /// is ``KeyboundError/biometryNotAvailable``, as on a device without a sensor. A wrong PIN is
    /// ``KeyboundError/authenticationFailed`` and counts toward the TPM's lockout; in lockout every
    /// try is ``KeyboundError/throttled``, right PIN or not, until the TPM lets one more through.
    public struct TPMPINVerifier: UserVerifier {
        /// Asks the user for the PIN: the app's own dialog, showing `prompt`'s reason. Throw
        /// ``KeyboundError/userCancel`` when the user cancels.
        public typealias PINEntry = @Sendable (_ prompt: VerificationPrompt) async throws -> String

        private let vault: TPMKeyVault
        private let entry: PINEntry
        private let clock: Keybound.Clock
        private let random: RandomSource

        /// - Parameters:
        ///   - vault: the vault whose device PIN this checks.
        ///   - clock: time, for the verifications' timestamps.
        ///   - random: randomness, for the verifications' ids.
        ///   - entry: asks the user for the PIN.
        public init(
            vault: TPMKeyVault, clock: Keybound.Clock = .system, random: RandomSource = .system,
            entry: @escaping PINEntry
        ) {
            self.vault = vault
            self.entry = entry
            self.clock = clock
            self.random = random
        }

        /// No biometrics (``BiometryType/none``, ``KeyboundError/biometryNotAvailable``); the
        /// passcode is set when the vault has a PIN. No enrollment state: nothing here is bound to
        /// an enrollment.
        public func availability() async -> VerificationAvailability {
            SecretVerifiers.availability(
                "the TPM PIN verifier", isPasscodeSet: (try? await vault.isPINSet()) ?? false)
        }

        /// Asks for the PIN and has the TPM check it.
        /// - Returns: a verification with the factor ``Verification/Factor/passcode``, for
        ///   `policy`'s reuse window; with no factor and no prompt for a policy without constraints.
        /// - Throws: ``KeyboundError/biometryNotAvailable`` for a biometrics-only policy;
        ///   ``KeyboundError/notSupported`` for an application-password-only one;
        ///   ``KeyboundError/passcodeNotSet`` without a PIN; what `entry` throws;
        ///   ``KeyboundError/authenticationFailed`` for a wrong PIN; ``KeyboundError/throttled``
        ///   in the TPM's lockout.
        public func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
            if let none = SecretVerifiers.unconstrained(policy, clock: clock, random: random) { return none }
            try SecretVerifiers.requireSecretSuffices(policy, secret: "the device PIN")
            guard try await vault.isPINSet() else {
                throw KeyboundError(.passcodeNotSet, message: "no TPM PIN is set (TPMKeyVault.setPIN)")
            }
            let authValue = try TPMKeyVault.pinAuthValue(try await entry(prompt))
            try await vault.checkPIN(authValue: authValue)
            let now = clock.now()
            return Verification(
                id: SecretVerifiers.id(random), factors: [.passcode], verifiedAt: now,
                reuseDuration: policy.reuseDuration,
                context: TPMPINProof(
                    authValue: authValue, verifiedAt: now, reuseDuration: policy.reuseDuration))
        }

    }

    /// What a ``TPMPINVerifier`` verification carries for ``TPMKeyVault``: the PIN's
    /// authorization value, and its own record of when it was made and how often it was used, so
    /// that the reuse rule (``Verification/admits(verifiedAt:reuseDuration:previousUses:now:)``)
    /// does not depend on fields anyone could copy into another verification.
    final class TPMPINProof: Sendable {
        let authValue: Data
        let verifiedAt: Date
        let reuseDuration: TimeInterval
        private let uses = Mutex(0)

        init(authValue: Data, verifiedAt: Date, reuseDuration: TimeInterval) {
            self.authValue = authValue
            self.verifiedAt = verifiedAt
            self.reuseDuration = reuseDuration
        }

        /// Counts one use, if the reuse rule allows it.
        func spend(now: Date) -> Bool {
            uses.withLock { uses in
                guard
                    Verification.admits(
                        verifiedAt: verifiedAt, reuseDuration: reuseDuration, previousUses: uses, now: now)
                else { return false }
                uses += 1
                return true
            }
        }
    }
#endif
