#if canImport(LocalAuthentication)
    import Foundation
    import Keybound
    import LocalAuthentication

    /// The evaluated `LAContext` a ``Verification`` carries from ``LocalAuthenticationVerifier``
    /// to the Keychain call that needs it (`kSecUseAuthenticationContext`).
    ///
    /// `LAContext` is not `Sendable`. This box is safe to send because the context is fully
    /// configured and evaluated before the box is made, and afterwards it is only handed to
    /// Security calls (which treat it as read-only) after ``admit(_:)`` admitted the use under
    /// the lock; nothing mutates it except `invalidate()`, which LocalAuthentication documents as
    /// callable from any thread.
    final class LAContextBox: @unchecked Sendable {
        /// The context. Use it only after ``admit(_:)`` (or for a box made for a single call).
        let context: LAContext
        /// How many Keychain calls used this context.
        private let uses = Mutex(0)

        init(_ context: LAContext) { self.context = context }

        /// Admits one Keychain or key operation if `verification` may still be used, by the
        /// rule every backend shares (``Verification/admits(verifiedAt:reuseDuration:previousUses:now:)``).
        /// A spent context is invalidated so it cannot satisfy anything any more.
        /// - Throws: ``KeyboundError/authenticationFailed`` when the verification is spent.
        func admit(_ verification: Verification) throws {
            let admitted = uses.withLock { count in
                let fresh = Verification.admits(
                    verifiedAt: verification.verifiedAt, reuseDuration: verification.reuseDuration,
                    previousUses: count, now: Date())
                if fresh { count += 1 }
                return fresh
            }
            guard admitted else {
                context.invalidate()
                throw KeyboundError(
                    .authenticationFailed,
                    message: "this verification was already used or its reuse window is over; verify again")
            }
        }

        /// Ends the context early (the app cancelled).
        func invalidate() { context.invalidate() }
    }
#endif
