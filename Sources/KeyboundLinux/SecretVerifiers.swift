#if os(Linux)
    import Foundation
    import Keybound

    /// What the verifiers that check a secret (``TPMPINVerifier``: the device PIN;
    /// ``PAMVerifier``: a password through PAM) answer alike: they have no sensor, and satisfy
    /// exactly the policies the passcode alone satisfies.
    enum SecretVerifiers {
        /// No biometrics (``BiometryType/none``, ``KeyboundError/biometryNotAvailable``) and no
        /// enrollment state: nothing is bound to an enrollment.
        /// - Parameter verifier: its name, for the message (`the PAM verifier`).
        static func availability(_ verifier: String, isPasscodeSet: Bool) -> VerificationAvailability {
            VerificationAvailability(
                biometryType: .none,
                biometryError: KeyboundError(
                    .biometryNotAvailable, message: "\(verifier) has no biometric sensor"),
                isPasscodeSet: isPasscodeSet, enrollmentState: nil)
        }

        /// A verification with no factor for a policy without constraints (nil otherwise): then
        /// nobody is asked anything.
        static func unconstrained(_ policy: AccessPolicy, clock: Keybound.Clock, random: RandomSource)
            -> Verification?
        {
            guard !policy.requiresVerification else { return nil }
            return Verification(
                id: id(random), factors: [], verifiedAt: clock.now(), reuseDuration: policy.reuseDuration)
        }

        /// Refuses a policy the secret alone does not satisfy: ``KeyboundError/biometryNotAvailable``
        /// for one that needs biometrics, ``KeyboundError/notSupported`` for anything else.
        /// - Parameter secret: what the verifier checks, for the message (`a PIN`).
        static func requireSecretSuffices(_ policy: AccessPolicy, secret: String) throws {
            guard !policy.acceptsPasscodeAlone else { return }
            if policy.acceptsBiometry {
                throw KeyboundError(
                    .biometryNotAvailable,
                    message: "\(policy) needs biometrics; this verifier checks \(secret)")
            }
            throw KeyboundError(
                .notSupported, message: "\(policy) is not satisfied by \(secret), which this verifier checks")
        }

        /// A fresh verification id: 16 random bytes in hex.
        static func id(_ random: RandomSource) -> String {
            random.bytes(16).map { String(format: "%02x", $0) }.joined()
        }
    }
#endif
