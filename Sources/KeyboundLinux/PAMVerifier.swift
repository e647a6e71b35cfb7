#if os(Linux)
    import Foundation
    import Keybound

    /// Verifies the user by the password or PIN that PAM checks (Linux-PAM): the stack configured
    /// for a service name, `/etc/pam.d/keybound` by default, decides. The secret comes from the
    /// app's own dialog (a closure), which PAM's conversation calls for each prompt of the stack.
    ///
    /// ```swift
    /// let verifier = try PAMVerifier { request in
    ///     try await passwordDialog.ask(request.prompt.reason, label: request.message)  // "Password: "
    /// }   // throw KeyboundError.userCancel on Cancel
    /// let verification = try await verifier.verify(.devicePasscode, prompt: prompt)
    /// ```
    ///
    /// It satisfies what the device passcode satisfies (``AccessPolicy/devicePasscode``,
    /// ``AccessPolicy/userPresence``, ``AccessPolicy/biometryOrPasscode``); a biometrics-only
    /// policy is ``KeyboundError/biometryNotAvailable`` and an application-password-only one
    /// ``KeyboundError/notSupported``, as from ``TPMPINVerifier``. A wrong secret is
    /// ``KeyboundError/authenticationFailed``; an account that the stack locked (pam_faillock) or a
    /// stack out of tries (`PAM_MAXTRIES`) is ``KeyboundError/throttled``, right secret or not.
    /// The native code is ``KeyboundError/NativeCode/pam(_:)`` (docs/linux.md has the table).
    ///
    /// - Important: PAM checks the secret in this process and binds nothing to it: a
    ///   ``Verification`` from here is what this process saw, as a passcode check by an app would
    ///   be. Keys and items that need a secret the hardware checks (``TPMKeyVault``'s PIN-bound
    ///   keys, ``SecretServiceStore``'s PIN-bound items) take ``TPMPINVerifier``'s verifications,
    ///   not these.
    ///
    /// PAM runs on a thread of its own, one verification at a time in the process (PAM modules
    /// are not all thread-safe, and a module may wait seconds after a failure), never on Swift's
    /// cooperative pool: `pam_authenticate` blocks until the stack and the user are done.
    public struct PAMVerifier: UserVerifier {
        /// One question from the PAM stack, for the app's dialog.
        public struct Request: Sendable {
            /// The reason the app gave for the verification.
            public let prompt: VerificationPrompt
            /// PAM's own text for the question (`"Password: "`), from the module that asks.
            public let message: String
            /// Whether the answer may be shown as it is typed (`PAM_PROMPT_ECHO_ON`); false for a
            /// password or PIN.
            public let echo: Bool
            /// What the stack said before this question (`PAM_ERROR_MSG`, `PAM_TEXT_INFO`), in order.
            public let notices: [String]
        }

        /// Answers one question of the stack: the app's own dialog, showing the request's prompt
        /// and message. Throw ``KeyboundError/userCancel`` when the user cancels: the verification
        /// then throws that error, whatever PAM makes of the aborted conversation.
        public typealias SecretEntry = @Sendable (_ request: Request) async throws -> String

        /// The PAM service whose stack checks the secret (`/etc/pam.d/SERVICE`, or the
        /// configuration directory's file of that name).
        public let service: String
        /// The user whose secret is checked.
        public let user: String
        /// Where the service's file is read from instead of `/etc/pam.d` (Linux-PAM's
        /// `pam_start_confdir`), or nil.
        public let configurationDirectory: URL?
        private let entry: SecretEntry
        private let clock: Keybound.Clock
        private let random: RandomSource

        /// - Parameters:
        ///   - service: the PAM service name (default `keybound`: install `/etc/pam.d/keybound`,
        ///     e.g. `@include common-auth` and `@include common-account`; without it Linux-PAM
        ///     uses the `other` service).
        ///   - user: whose secret (default: the user this process runs as).
        ///   - configurationDirectory: a directory to read the service's file from instead of
        ///     `/etc/pam.d` (tests, an app's own stack); nil for the system's.
        ///   - clock: time, for the verifications' timestamps.
        ///   - random: randomness, for the verifications' ids.
        ///   - entry: answers the stack's questions.
        /// - Throws: ``KeyboundError/invalidInput`` for a service name that is empty, longer than
        ///   64 bytes, or holds a `/` or a control character, for an empty user name, or when no
        ///   user is given and this process's user has no name.
        public init(
            service: String = "keybound", user: String? = nil, configurationDirectory: URL? = nil,
            clock: Keybound.Clock = .system, random: RandomSource = .system, entry: @escaping SecretEntry
        ) throws {
            guard (1...64).contains(service.utf8.count), !service.contains("/"),
                !service.unicodeScalars.contains(where: { $0.value < 0x20 })
            else {
                throw KeyboundError.invalidInput("a PAM service name is 1–64 printable bytes without /")
            }
            guard let user = user ?? PAMTransaction.currentUserName() else {
                throw KeyboundError.invalidInput("this process's user has no name: pass the user")
            }
            guard !user.isEmpty, !user.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
                throw KeyboundError.invalidInput("a user name is printable and not empty")
            }
            self.service = service
            self.user = user
            self.configurationDirectory = configurationDirectory
            self.entry = entry
            self.clock = clock
            self.random = random
        }

        /// No biometrics (``BiometryType/none``, ``KeyboundError/biometryNotAvailable``). The
        /// passcode counts as set: it is the user's password, and PAM cannot tell more without
        /// asking for it. No enrollment state: nothing here is bound to an enrollment.
        public func availability() async -> VerificationAvailability {
            SecretVerifiers.availability("the PAM verifier", isPasscodeSet: true)
        }

        /// Has the PAM stack authenticate the user (`pam_authenticate`, then `pam_acct_mgmt`:
        /// an expired or disabled account does not verify), asking ``SecretEntry`` for each
        /// question.
        /// - Returns: a verification with the factor ``Verification/Factor/passcode``, for
        ///   `policy`'s reuse window; with no factor and no prompt for a policy without constraints.
        /// - Throws: ``KeyboundError/biometryNotAvailable`` for a biometrics-only policy;
        ///   ``KeyboundError/notSupported`` for an application-password-only one, and when the
        ///   stack cannot check this user (unknown user, broken configuration, a module missing);
        ///   what `entry` throws; ``KeyboundError/authenticationFailed`` for a wrong secret;
        ///   ``KeyboundError/throttled`` when the stack refuses every try for now.
        public func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
            if let none = SecretVerifiers.unconstrained(policy, clock: clock, random: random) { return none }
            try SecretVerifiers.requireSecretSuffices(policy, secret: "a password through PAM")
            let transaction = PAMTransaction(
                service: service, user: user, configurationDirectory: configurationDirectory?.path,
                prompt: prompt, entry: entry)
            try await transaction.run()
            return Verification(
                id: SecretVerifiers.id(random), factors: [.passcode], verifiedAt: clock.now(),
                reuseDuration: policy.reuseDuration)
        }

    }
#endif
