/// The one error type of Keybound.
///
/// Every failure an app can meet — a dismissed prompt, a lockout, an invalidated item, a server
/// refusal — arrives as a `KeyboundError` whose ``code`` says what happened and whose
/// ``recovery`` says what the app should do next. When the platform reported a native code
/// (an `LAError` code or a Keychain `OSStatus`), ``native`` carries it for diagnostics.
///
/// Two errors are equal when their codes are equal, so `catch let error as KeyboundError where
/// error == .userCancel` and `#expect(throws: KeyboundError.biometryLockout)` work whatever
/// native code or message came along.
public struct KeyboundError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What happened. A closed set of codes, extended only by Keybound itself.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        /// The code's name, as logs, `keybound device --json` and ``KeyboundError/description`` spell it.
        public let rawValue: String
        /// Wraps a name. Apps compare with the static codes below rather than make their own.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name (`"biometryLockout"`).
        public var description: String { rawValue }

        /// The user dismissed the prompt.
        public static let userCancel = Code(rawValue: "userCancel")
        /// The system dismissed the prompt (another app came forward, a call arrived).
        public static let systemCancel = Code(rawValue: "systemCancel")
        /// The app cancelled the prompt.
        public static let appCancel = Code(rawValue: "appCancel")
        /// The user tapped the fallback button ("Enter Password").
        public static let userFallback = Code(rawValue: "userFallback")
        /// The biometric did not match, or a verification was missing, forged or expired.
        public static let authenticationFailed = Code(rawValue: "authenticationFailed")
        /// Five failed matches in a row locked biometrics system-wide.
        public static let biometryLockout = Code(rawValue: "biometryLockout")
        /// No biometric sensor, or it is disabled for this app.
        public static let biometryNotAvailable = Code(rawValue: "biometryNotAvailable")
        /// The sensor exists but nothing is enrolled.
        public static let biometryNotEnrolled = Code(rawValue: "biometryNotEnrolled")
        /// The device has no passcode.
        public static let passcodeNotSet = Code(rawValue: "passcodeNotSet")
        /// The item or key was permanently invalidated (enrollment changed, passcode removed).
        public static let invalidated = Code(rawValue: "invalidated")
        /// Nothing was ever stored under that name, or it was deleted.
        public static let itemNotFound = Code(rawValue: "itemNotFound")
        /// The device is locked, or protected data is not available yet.
        public static let interactionNotAllowed = Code(rawValue: "interactionNotAllowed")
        /// An item already exists (Keybound turns this into an update; apps rarely see it).
        public static let duplicateItem = Code(rawValue: "duplicateItem")
        /// A value given to Keybound was not valid; the message says which and why.
        public static let invalidInput = Code(rawValue: "invalidInput")
        /// The platform cannot do this here (no Secure Enclave, missing entitlement).
        public static let notSupported = Code(rawValue: "notSupported")
        /// A signing payload did not match what the app asked for (purpose, server, device).
        public static let payloadMismatch = Code(rawValue: "payloadMismatch")
        /// The server could not be reached.
        public static let network = Code(rawValue: "network")
        /// The server refused the request; ``KeyboundError/serverCode`` names its problem code.
        public static let server = Code(rawValue: "server")
        /// The session is over: a password login is needed.
        public static let sessionExpired = Code(rawValue: "sessionExpired")
        /// Too many attempts: wait before trying again.
        public static let throttled = Code(rawValue: "throttled")
        /// Something the platform reported that Keybound does not know.
        public static let unexpected = Code(rawValue: "unexpected")
    }

    /// What the app should do next.
    public enum Recovery: String, Sendable, Hashable, Codable {
        /// Do nothing and show nothing (the user cancelled).
        case silent
        /// Offer the app's own password login.
        case usePassword
        /// Let the user try again.
        case retry
        /// Wait a while before trying again (``KeyboundError/retryAfter`` says how long if known).
        case retryLater
        /// Ask for the device passcode: it clears a biometric lockout.
        case usePasscode
        /// Send the user to Settings to enroll Face ID / Touch ID.
        case enrollBiometrics
        /// Send the user to Settings to set a device passcode.
        case setPasscode
        /// Log in with the password, then enable biometric login again.
        case reenroll
        /// Wait until the user unlocks the device.
        case waitForUnlock
        /// Nothing to recover: the outcome is final.
        case none
    }

    /// A code the platform itself reported.
    public enum NativeCode: Sendable, Hashable, CustomStringConvertible {
        /// A LocalAuthentication `LAError.Code` raw value (e.g. -8 for biometry lockout).
        case laError(Int)
        /// A Security framework `OSStatus` (e.g. -25300, `errSecItemNotFound`).
        case osStatus(Int32)
        /// An HTTP status from the Keybound server.
        case httpStatus(Int)
        /// A TPM 2.0 software stack response code (`TSS2_RC`): the TPM's own in the low 16 bits
        /// (e.g. `0x921`, `TPM_RC_LOCKOUT`), a software layer's number above them (`0xA000A`: the
        /// TCTI could not reach the TPM). Reported by `KeyboundLinux`.
        case tss2(UInt32)
        /// A Linux-PAM result code (e.g. 7, `PAM_AUTH_ERR`). Reported by `KeyboundLinux`.
        case pam(Int32)

        /// The bare number.
        public var value: Int {
            switch self {
            case .laError(let code): code
            case .osStatus(let status): Int(status)
            case .httpStatus(let status): status
            case .tss2(let code): Int(code)
            case .pam(let code): Int(code)
            }
        }

        /// The kind and the number, e.g. `LAError(-8)`, `OSStatus(-25300)`, `HTTP 429`,
        /// `TSS2_RC(0x921)`, `PAM(7)`.
        public var description: String {
            switch self {
            case .laError(let code): "LAError(\(code))"
            case .osStatus(let status): "OSStatus(\(status))"
            case .httpStatus(let status): "HTTP \(status)"
            case .tss2(let code): "TSS2_RC(0x\(String(code, radix: 16, uppercase: true)))"
            case .pam(let code): "PAM(\(code))"
            }
        }
    }

    /// What happened.
    public let code: Code
    /// The platform's own code, when there was one.
    public let native: NativeCode?
    /// A human-readable detail for logs (never a secret).
    public let message: String?
    /// The server's problem code (``ProblemCode/invalidCredentials``, ``ProblemCode/challengeUsed``,
    /// …) for ``Code/server`` and ``Code/throttled``, and the refusal behind a ``Code/sessionExpired``.
    public let serverCode: ProblemCode?
    /// Seconds to wait before retrying, when the server said so.
    public let retryAfter: Int?
    /// What the app should do next.
    public let recovery: Recovery

    /// Creates an error. The recovery defaults to the one the error table assigns to the code.
    public init(
        _ code: Code, native: NativeCode? = nil, message: String? = nil, serverCode: ProblemCode? = nil,
        retryAfter: Int? = nil, recovery: Recovery? = nil
    ) {
        self.code = code
        self.native = native
        self.message = message
        self.serverCode = serverCode
        self.retryAfter = retryAfter
        self.recovery = recovery ?? Self.defaultRecovery(for: code)
    }

    /// The recovery of the error table in docs/design.md ("Errors").
    static func defaultRecovery(for code: Code) -> Recovery {
        switch code {
        case .userCancel, .systemCancel, .appCancel: .silent
        case .userFallback, .biometryNotAvailable, .sessionExpired: .usePassword
        case .authenticationFailed, .network: .retry
        case .throttled: .retryLater
        case .biometryLockout: .usePasscode
        case .biometryNotEnrolled: .enrollBiometrics
        case .passcodeNotSet: .setPasscode
        case .invalidated: .reenroll
        case .interactionNotAllowed: .waitForUnlock
        default: .none
        }
    }

    /// Whether both errors have the same ``code``; the native code, message and recovery are
    /// details of one occurrence and do not take part.
    public static func == (lhs: KeyboundError, rhs: KeyboundError) -> Bool { lhs.code == rhs.code }
    /// Hashes the ``code`` only, consistent with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `KeyboundError.<code>`, then the native code, the server's problem code and the message
    /// when present: `KeyboundError.biometryLockout [LAError(-8)]`. Never contains a secret.
    public var description: String {
        var text = "KeyboundError.\(code)"
        if let native { text += " [\(native)]" }
        if let serverCode { text += " (\(serverCode))" }
        if let message { text += ": \(message)" }
        return text
    }

    /// Whether this error only means the user or the system dismissed a prompt.
    public var isCancellation: Bool { recovery == .silent }

    // Shortcuts for matching: `catch let error as KeyboundError where error == .userCancel`.
    // Each is the bare code with the table's recovery, no native code and no message.

    /// The user dismissed the prompt. Recovery ``Recovery/silent``.
    public static let userCancel = KeyboundError(.userCancel)
    /// The system dismissed the prompt. Recovery ``Recovery/silent``.
    public static let systemCancel = KeyboundError(.systemCancel)
    /// The app dismissed the prompt. Recovery ``Recovery/silent``.
    public static let appCancel = KeyboundError(.appCancel)
    /// The user tapped the fallback button. Recovery ``Recovery/usePassword``.
    public static let userFallback = KeyboundError(.userFallback)
    /// No match, or a missing or unsuitable verification. Recovery ``Recovery/retry``.
    public static let authenticationFailed = KeyboundError(.authenticationFailed)
    /// Biometrics are locked after five failed matches. Recovery ``Recovery/usePasscode``.
    public static let biometryLockout = KeyboundError(.biometryLockout)
    /// No usable biometric sensor. Recovery ``Recovery/usePassword``.
    public static let biometryNotAvailable = KeyboundError(.biometryNotAvailable)
    /// Nothing enrolled. Recovery ``Recovery/enrollBiometrics``.
    public static let biometryNotEnrolled = KeyboundError(.biometryNotEnrolled)
    /// The device has no passcode. Recovery ``Recovery/setPasscode``.
    public static let passcodeNotSet = KeyboundError(.passcodeNotSet)
    /// The item or key died with an enrollment or passcode change. Recovery ``Recovery/reenroll``.
    public static let invalidated = KeyboundError(.invalidated)
    /// Nothing stored under that name. Recovery ``Recovery/none``.
    public static let itemNotFound = KeyboundError(.itemNotFound)
    /// The device is locked. Recovery ``Recovery/waitForUnlock``.
    public static let interactionNotAllowed = KeyboundError(.interactionNotAllowed)
    /// An item of that name already exists. Recovery ``Recovery/none``.
    public static let duplicateItem = KeyboundError(.duplicateItem)
    /// A value was not valid; prefer ``invalidInput(_:)``, which says why. Recovery ``Recovery/none``.
    public static let invalidInput = KeyboundError(.invalidInput)
    /// Not possible on this platform. Recovery ``Recovery/none``.
    public static let notSupported = KeyboundError(.notSupported)
    /// A signing payload was not the one asked for. Recovery ``Recovery/none``.
    public static let payloadMismatch = KeyboundError(.payloadMismatch)
    /// The server could not be reached. Recovery ``Recovery/retry``.
    public static let network = KeyboundError(.network)
    /// The server refused the request. Recovery ``Recovery/none`` here; errors from
    /// ``KeyboundClient`` carry the recovery their problem code implies.
    public static let server = KeyboundError(.server)
    /// The session is over. Recovery ``Recovery/usePassword``.
    public static let sessionExpired = KeyboundError(.sessionExpired)
    /// Too many attempts. Recovery ``Recovery/retryLater``.
    public static let throttled = KeyboundError(.throttled)
    /// An outcome Keybound does not know. Recovery ``Recovery/none``.
    public static let unexpected = KeyboundError(.unexpected)

    /// An ``Code/invalidInput`` error naming what was wrong.
    public static func invalidInput(_ message: String) -> KeyboundError {
        KeyboundError(.invalidInput, message: message)
    }

    /// `make`'s value, made by a KeyboundWire type that checks a grammar (``Username``,
    /// ``ClientID``); its refusal becomes ``Code/invalidInput``, as every SDK failure is a
    /// `KeyboundError`.
    static func validating<T>(_ make: () throws -> T) throws -> T {
        do { return try make() } catch let error as WireError {
            throw KeyboundError.invalidInput(error.detail)
        }
    }
}
