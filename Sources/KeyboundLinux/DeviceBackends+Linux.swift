#if os(Linux)
    import Foundation
    import Keybound

    extension DeviceBackends {
        /// This machine's TPM, Secret Service and fingerprint reader, for the SDK's flows
        /// (``BiometricLogin``, ``TransactionApproval``, ``AppLock``), unchanged: items in the
        /// user's Secret Service, each sealed under a TPM key (``SecretServiceStore``); keys in the
        /// TPM (the `vault`); the user verified by the device PIN, which the TPM checks, and, when a
        /// reader is given, by a fingerprint where only the check matters (``LinuxVerifier``).
        ///
        /// ```swift
        /// let vault = try TPMKeyVault(directory: dataDirectory.appendingPathComponent("keys"))  // /dev/tpmrm0
        /// if !(try await vault.isPINSet()) { try await vault.setPIN(try await pinDialog.chooseNewPIN()) }
        /// let device = try DeviceBackends.linux(
        ///     vault: vault, service: "com.acme.kiosk", fingerprint: try? FprintdVerifier(),
        ///     fingerprintPrompt: { prompt in await screen.show("Touch the reader: \(prompt.reason)") },
        ///     enterPIN: { prompt in try await pinDialog.ask(prompt.reason) })  // throw .userCancel on Cancel
        /// let login = try BiometricLogin(
        ///     client: client, device: device,
        ///     configuration: .init(clientID: installationID, serverID: "acme", policy: .devicePasscode,
        ///                          keyProtection: .software))
        /// ```
        ///
        /// Flows must ask for what the TPM enforces: ``AccessPolicy/devicePasscode`` for the token
        /// item or the device key (biometric policies are refused with
        /// ``KeyboundError/notSupported`` by the vault and the store, never weakened; nothing binds
        /// a fingerprint to a TPM key). ``AppLock``'s default, ``AccessPolicy/biometryOrPasscode``,
        /// takes a finger where a reader has one enrolled, else the PIN.
        ///
        /// - Parameters:
        ///   - vault: the app's TPM keys: its data directory and the TPM connection (default
        ///     `/dev/tpmrm0`; `TPMConnection(tcti:)` for another). The app sets the device PIN on
        ///     it (``TPMKeyVault/setPIN(_:)``), as a phone's owner sets a passcode.
        ///   - service: names this app's items in the Secret Service (`keybound.service`), e.g. its
        ///     reverse-DNS id; 1–128 printable bytes.
        ///   - secretServiceBus: the session bus of the user's keyring (default:
        ///     `DBUS_SESSION_BUS_ADDRESS`, else `unix:path=$XDG_RUNTIME_DIR/bus`).
        ///   - fingerprint: fprintd's reader (its user, system bus and timeout), or nil for a
        ///     kiosk without one: then only the PIN verifies.
        ///   - fingerprintPrompt: called just before the reader waits for a finger, to show the
        ///     prompt's reason and "touch the reader" (fprintd shows nothing); the wait ends when
        ///     the verification returns or throws.
        ///   - enterPIN: asks the user for the device PIN, showing the prompt's reason; throw
        ///     ``KeyboundError/userCancel`` when the user cancels.
        /// - Throws: ``KeyboundError/invalidInput`` for an invalid service;
        ///   ``KeyboundError/notSupported`` when no session bus address is known.
        public static func linux(
            vault: TPMKeyVault, service: String, secretServiceBus: String? = nil,
            fingerprint: FprintdVerifier? = nil,
            fingerprintPrompt: (@Sendable (VerificationPrompt) async -> Void)? = nil,
            enterPIN: @escaping TPMPINVerifier.PINEntry
        ) throws -> DeviceBackends {
            DeviceBackends(
                store: try SecretServiceStore(vault: vault, service: service, busAddress: secretServiceBus),
                vault: vault,
                verifier: LinuxVerifier(
                    pin: TPMPINVerifier(vault: vault, clock: vault.clock, entry: enterPIN),
                    fingerprint: fingerprint,
                    fingerprintPrompt: fingerprintPrompt))
        }
    }

    /// The user verifier of ``DeviceBackends/linux(vault:service:secretServiceBus:fingerprint:fingerprintPrompt:enterPIN:)``:
    /// the device PIN (``TPMPINVerifier``, checked by the TPM) for the device passcode and
    /// wherever a finger cannot answer, and a fingerprint (``FprintdVerifier``) where a finger is
    /// asked for or, with a usable reader, may answer.
    ///
    /// Which one answers, by policy:
    /// - ``AccessPolicy/devicePasscode``: the PIN. This is what material in the TPM needs: its
    ///   verification carries the PIN for the vault to prove to the TPM again.
    /// - ``AccessPolicy/biometryAny``, ``AccessPolicy/biometryCurrentSet``: the finger; without a
    ///   reader ``KeyboundError/biometryNotAvailable``, as on a device without a sensor. Nothing in
    ///   the TPM or the Secret Service store can be bound to such a policy (they refuse it), so a
    ///   finger only ever answers checks that are the point themselves (an app lock, a step-up).
    /// - ``AccessPolicy/biometryOrPasscode``, ``AccessPolicy/userPresence``: the finger when the
    ///   reader has one enrolled and can be used now, else the PIN (as Face ID falls to the
    ///   passcode where biometrics cannot be used). A finger that does not match is
    ///   ``KeyboundError/authenticationFailed`` (recovery `retry`), not a PIN prompt.
    ///
    /// ``availability()`` reports the reader (``BiometryType/touchID``, fprintd's enrollment state,
    /// so enrolling or deleting a finger invalidates `biometryCurrentSet` markers) and whether the
    /// PIN is set.
    public struct LinuxVerifier: UserVerifier {
        /// The device PIN.
        public let pin: TPMPINVerifier
        /// The fingerprint reader, if the machine has one.
        public let fingerprint: FprintdVerifier?
        private let fingerprintPrompt: (@Sendable (VerificationPrompt) async -> Void)?

        /// - Parameters:
        ///   - pin: checks the device PIN.
        ///   - fingerprint: checks a finger, or nil without a reader.
        ///   - fingerprintPrompt: called just before the reader waits for a finger.
        public init(
            pin: TPMPINVerifier, fingerprint: FprintdVerifier? = nil,
            fingerprintPrompt: (@Sendable (VerificationPrompt) async -> Void)? = nil
        ) {
            self.pin = pin
            self.fingerprint = fingerprint
            self.fingerprintPrompt = fingerprintPrompt
        }

        /// The reader's type, state and enrollment (``FprintdVerifier/availability()``), or none
        /// without one; the passcode is set when the TPM vault has a PIN.
        public func availability() async -> VerificationAvailability {
            let pinAvailability = await pin.availability()
            guard let fingerprint else { return pinAvailability }
            let finger = await fingerprint.availability()
            return VerificationAvailability(
                biometryType: finger.biometryType, biometryError: finger.biometryError,
                isPasscodeSet: pinAvailability.isPasscodeSet, enrollmentState: finger.enrollmentState)
        }

        /// Asks for the PIN or a finger, as the type's description says.
        /// - Throws: what ``TPMPINVerifier/verify(_:prompt:)`` or
        ///   ``FprintdVerifier/verify(_:prompt:)`` throws; ``KeyboundError/biometryNotAvailable``
        ///   for a biometrics-only policy without a reader (or ``KeyboundError/biometryNotEnrolled``
        ///   and the like, from the reader, without prompting); ``KeyboundError/notSupported`` for a
        ///   policy neither satisfies alone (an application password, a finger *and* the PIN).
        public func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
            guard policy.requiresVerification else { return try await pin.verify(policy, prompt: prompt) }
            let fingerAlone =
                switch policy.combination {
                case .or: policy.constraints.contains { $0.acceptsBiometry }
                case .and: policy.constraints.allSatisfy { $0.acceptsBiometry }
                }
            guard fingerAlone || policy.acceptsPasscodeAlone else {
                throw KeyboundError(
                    .notSupported,
                    message: "\(policy) is satisfied neither by a finger alone nor by the device PIN alone")
            }
            if fingerAlone, let fingerprint {
                if let error = await fingerprint.availability().biometryError {
                    // A reader that cannot be used now falls to the PIN where the policy allows it.
                    guard policy.acceptsPasscodeAlone else { throw error }
                } else {
                    await fingerprintPrompt?(prompt)
                    return try await fingerprint.verify(policy, prompt: prompt)
                }
            }
            return try await pin.verify(policy, prompt: prompt)
        }
    }
#endif
