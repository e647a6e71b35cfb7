#if os(Linux)
    import Dispatch
    import Foundation
    import Keybound
    internal import KeyboundCrypto

    /// Verifies the user by a fingerprint, through fprintd's D-Bus API on the system bus
    /// (`net.reactivated.Fprint`): fprintd claims the reader, asks libfprint to match the finger
    /// against the user's enrolled prints, and says whether it matched.
    ///
    /// ```swift
    /// let verifier = try FprintdVerifier()        // this process's user, the system bus
    /// let verification = try await verifier.verify(.biometryAny, prompt: prompt)  // shows nothing:
    /// // the app shows its own "touch the reader" text (prompt.reason) while this waits
    /// ```
    ///
    /// - Important: On Linux a fingerprint match is decided by a root daemon (fprintd), not bound
    ///   to a key by hardware as the Secure Enclave binds it: nothing lets a TPM key or a sealed
    ///   item demand a finger. So ``TPMKeyVault`` and ``SecretServiceStore`` refuse biometric
    ///   policies, and a verification from here is what this process was told by fprintd, over
    ///   the system bus. Use it where the check itself is the point (an app lock, a step-up before
    ///   showing something), or with the PIN (``TPMPINVerifier``) for material.
    ///
    /// It satisfies the biometric policies (``AccessPolicy/biometryAny``,
    /// ``AccessPolicy/biometryCurrentSet``, ``AccessPolicy/userPresence``,
    /// ``AccessPolicy/biometryOrPasscode``) with the factor ``Verification/Factor/biometry``; a
    /// passcode-only policy is ``KeyboundError/notSupported`` (use ``TPMPINVerifier`` or
    /// ``PAMVerifier``). No match is ``KeyboundError/authenticationFailed``; no reader is
    /// ``KeyboundError/biometryNotAvailable``; no finger enrolled
    /// ``KeyboundError/biometryNotEnrolled``; a reader another program holds is
    /// ``KeyboundError/unexpected`` with recovery `retryLater`; a task cancelled while it waits is
    /// ``KeyboundError/appCancel``; no finger within ``timeout`` ``KeyboundError/systemCancel``.
    /// ``availability()``'s enrollment state is a hash of the enrolled fingers' names, so enrolling
    /// or deleting a finger changes it, as an enrollment change does on Apple platforms.
    public struct FprintdVerifier: UserVerifier {
        /// Whose fingers.
        public let user: String
        /// The system bus's address.
        public let busAddress: String
        /// How long ``verify(_:prompt:)`` waits for a finger.
        public let timeout: TimeInterval
        private let clock: Keybound.Clock
        private let random: RandomSource

        /// - Parameters:
        ///   - user: whose enrolled fingers (default: the user this process runs as).
        ///   - busAddress: the system bus (default: `DBUS_SYSTEM_BUS_ADDRESS`, else
        ///     `unix:path=/run/dbus/system_bus_socket`).
        ///   - timeout: how long a verification waits for a finger (1–300 s, default 30).
        ///   - clock: time, for the verifications' timestamps.
        ///   - random: randomness, for the verifications' ids.
        /// - Throws: ``KeyboundError/invalidInput`` for an empty user name, a timeout outside
        ///   1–300 s, or when no user is given and this process's user has no name.
        public init(
            user: String? = nil, busAddress: String? = nil, timeout: TimeInterval = 30,
            clock: Keybound.Clock = .system, random: RandomSource = .system
        ) throws {
            guard let user = user ?? PAMTransaction.currentUserName(), !user.isEmpty,
                !user.unicodeScalars.contains(where: { $0.value < 0x20 })
            else { throw KeyboundError.invalidInput("a user name is printable and not empty") }
            guard (1...300).contains(timeout) else {
                throw KeyboundError.invalidInput("a fingerprint timeout is 1–300 s")
            }
            self.user = user
            let environment = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"]
            self.busAddress =
                busAddress ?? (environment?.isEmpty == false ? environment : nil)
                ?? "unix:path=/run/dbus/system_bus_socket"
            self.timeout = timeout
            self.clock = clock
            self.random = random
        }

        /// A fingerprint reader (``BiometryType/touchID``: a fingerprint sensor) when fprintd has
        /// one; ``KeyboundError/biometryNotEnrolled`` without an enrolled finger,
        /// ``KeyboundError/biometryNotAvailable`` without fprintd or a reader. The enrollment
        /// state is a hash of the enrolled fingers' names. No passcode: this verifier checks none.
        public func availability() async -> VerificationAvailability {
            let user = self.user
            let result: Result<[String], any Error>
            do {
                result = .success(
                    try await FprintdSession.run(address: busAddress) { session in
                        try session.enrolledFingers(of: user)
                    })
            } catch { result = .failure(error) }
            switch result {
            case .success(let fingers) where !fingers.isEmpty:
                let state = Digest.sha256(
                    Data(("fprintd v1\u{0}" + fingers.sorted().joined(separator: "\u{0}")).utf8))
                return VerificationAvailability(
                    biometryType: .touchID, biometryError: nil, isPasscodeSet: false, enrollmentState: state)
            case .success:
                return VerificationAvailability(
                    biometryType: .touchID,
                    biometryError: KeyboundError(
                        .biometryNotEnrolled, message: "\(user) has no finger enrolled"),
                    isPasscodeSet: false, enrollmentState: nil)
            case .failure(let error):
                let error = error as? KeyboundError ?? KeyboundError(.unexpected, message: "\(error)")
                let notEnrolled = error.code == .biometryNotEnrolled
                return VerificationAvailability(
                    biometryType: notEnrolled ? .touchID : .none, biometryError: error, isPasscodeSet: false,
                    enrollmentState: nil)
            }
        }

        /// Waits for a finger on the reader and has fprintd match it against the user's prints.
        /// - Returns: a verification with the factor ``Verification/Factor/biometry``, for
        ///   `policy`'s reuse window; with no factor and no scan for a policy without constraints.
        /// - Throws: see the type's description.
        public func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
            guard policy.requiresVerification else {
                return Verification(
                    id: newID(), factors: [], verifiedAt: clock.now(), reuseDuration: policy.reuseDuration)
            }
            guard policy.acceptsBiometry else {
                throw KeyboundError(
                    .notSupported,
                    message: "\(policy) is not satisfied by a fingerprint; use TPMPINVerifier or PAMVerifier")
            }
            let user = self.user
            let cancelled = Mutex(false)
            let waiting = Int32(timeout * 1000)
            try await withTaskCancellationHandler {
                try await FprintdSession.run(address: busAddress) { session in
                    try session.verify(user: user, waitingMilliseconds: waiting) {
                        cancelled.withLock { $0 }
                    }
                }
            } onCancel: {
                cancelled.withLock { $0 = true }
            }
            return Verification(
                id: newID(), factors: [.biometry], verifiedAt: clock.now(),
                reuseDuration: policy.reuseDuration)
        }

        private func newID() -> String {
            random.bytes(16).map { String(format: "%02x", $0) }.joined()
        }
    }

#endif
