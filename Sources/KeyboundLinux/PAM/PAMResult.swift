#if os(Linux)
    internal import CPAM
    import Keybound

    /// A Linux-PAM result code, and the one place that decides which ``KeyboundError`` it is
    /// (the table in docs/linux.md).
    struct PAMResult: Sendable, Hashable {
        let code: Int32

        init(_ code: Int32) { self.code = code }

        /// Linux-PAM's own text for the code ("Authentication failure").
        var text: String { pam_strerror(nil, code).map { String(cString: $0) } ?? "PAM error \(code)" }

        /// The Keybound error for this result.
        /// - Parameters:
        ///   - service: the PAM service, for messages.
        ///   - configurationDirectory: where its file was read, for messages (nil: `/etc/pam.d`).
        ///   - user: whose secret, for messages.
        ///   - refusedBeforeAsking: whether a module showed an error before any question, so its
        ///     refusal did not depend on the secret (pam_faillock's lock).
        ///   - notices: what the stack said (error and information messages).
        func error(
            service: String, configurationDirectory: String?, user: String, refusedBeforeAsking: Bool,
            notices: [String]
        ) -> KeyboundError {
            let native = KeyboundError.NativeCode.pam(code)
            let said = notices.isEmpty ? "" : " (the stack said: \(notices.joined(separator: " ")))"
            let stack = "the PAM service \(service) (\(configurationDirectory ?? "/etc/pam.d"))"
            switch code {
            case PAM_AUTH_ERR where refusedBeforeAsking, PAM_MAXTRIES:
                return KeyboundError(
                    .throttled, native: native,
                    message: "\(stack) refuses \(user) for now, whatever the password\(said)",
                    retryAfter: Self.minutesLeft(in: notices).map { $0 * 60 })
            case PAM_AUTH_ERR, PAM_CRED_ERR:
                return KeyboundError(
                    .authenticationFailed, native: native, message: "\(text)\(said)")
            case PAM_USER_UNKNOWN:
                return KeyboundError(
                    .notSupported, native: native, message: "\(stack) does not know the user \(user)\(said)")
            case PAM_AUTHINFO_UNAVAIL, PAM_CRED_UNAVAIL, PAM_CRED_INSUFFICIENT:
                return KeyboundError(
                    .notSupported, native: native,
                    message: "\(stack) cannot check \(user)'s password here: \(text)\(said)")
            case PAM_ACCT_EXPIRED, PAM_PERM_DENIED, PAM_NEW_AUTHTOK_REQD, PAM_AUTHTOK_EXPIRED,
                PAM_CRED_EXPIRED:
                return KeyboundError(
                    .notSupported, native: native,
                    message: "\(stack) does not let \(user) in: \(text)\(said)")
            // PAM_ABORT is also what Linux-PAM answers when the service has no file and there is no
            // `other` either.
            case PAM_OPEN_ERR, PAM_SYMBOL_ERR, PAM_SERVICE_ERR, PAM_MODULE_UNKNOWN, PAM_BAD_ITEM,
                PAM_IGNORE, PAM_ABORT:
                return KeyboundError(
                    .notSupported, native: native,
                    message:
                        "\(stack) is missing or misconfigured (no file, a module missing, a wrong line): "
                        + "\(text)\(said)")
            case PAM_TRY_AGAIN, PAM_AUTHTOK_LOCK_BUSY:
                return KeyboundError(
                    .unexpected, native: native, message: "\(text)\(said)", recovery: .retryLater)
            default:
                // PAM_SYSTEM_ERR, PAM_BUF_ERR, PAM_CONV_ERR that no closure caused, …
                return KeyboundError(.unexpected, native: native, message: "\(stack): \(text)\(said)")
            }
        }

        /// pam_faillock's "(10 minutes left to unlock)", in minutes, when a notice says it.
        static func minutesLeft(in notices: [String]) -> Int? {
            for notice in notices where notice.contains("left to unlock") {
                let digits = notice.split(whereSeparator: { !$0.isNumber })
                if let minutes = digits.last.flatMap({ Int($0) }) { return minutes }
            }
            return nil
        }
    }
#endif
