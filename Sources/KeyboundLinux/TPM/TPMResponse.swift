#if os(Linux)
    internal import CTSS2
    import Keybound

    /// A `TSS2_RC` from the TPM or one of the software layers in front of it, and the one place
    /// that decides which ``KeyboundError`` it is (the table in docs/linux.md).
    struct TPMResponse: Sendable, Hashable {
        /// What the failing call was doing: the same TPM code means different things in
        /// different places (an authorization failure is a wrong PIN when a PIN is proved, and a
        /// hierarchy password nobody told us about when the primary key is made).
        enum Operation: Sendable {
            /// Opening the TCTI and the ESAPI context.
            case connect
            /// TPM2_CreatePrimary under the owner hierarchy.
            case createPrimary
            /// TPM2_Create of a key or the PIN object.
            case create
            /// TPM2_Load of a stored blob.
            case load
            /// TPM2_StartAuthSession.
            case startSession
            /// Proving the PIN: TPM2_PolicySecret, TPM2_ObjectChangeAuth.
            case authorize
            /// TPM2_Sign.
            case use
            /// TPM2_ECDH_KeyGen.
            case encrypt
            /// TPM2_ECDH_ZGen.
            case decrypt
            /// Anything else (names, attributes, properties, flushing).
            case other
        }

        /// The whole code.
        let code: TSS2_RC

        init(_ code: TSS2_RC) { self.code = code }

        /// The software layer that answered (bits 16–23): 0 is the TPM itself.
        var layer: TSS2_RC { code & keybound_rc_layer_mask }

        /// The TPM's response code without the handle, session or parameter number it may carry,
        /// when the TPM answered (directly, or through a resource manager passing it on).
        var tpmCode: TPM2_RC? {
            guard layer == keybound_rc_layer_tpm || layer == keybound_rc_layer_resmgr_tpm else { return nil }
            let low = code & 0xFFFF
            // Format 1 (bit 7): error number in bits 0–5, the number of the handle, session or
            // parameter above. Format 0: bits 0–6 and the version and warning bits.
            return low & 0x80 != 0 ? low & 0xBF : low & 0xFFF
        }

        /// Whether the TPM refused because it is in dictionary-attack lockout.
        var isLockout: Bool { tpmCode == keybound_rc_lockout }

        /// tss2's own text for the code (`tpm:session(1):the authorization HMAC check failed…`).
        var text: String { String(cString: Tss2_RC_Decode(code)) }

        /// The Keybound error for this response.
        /// - Parameters:
        ///   - operation: what the failing call was doing.
        ///   - tcti: the TCTI configuration, named in messages about reaching the TPM.
        ///   - lockoutInterval: in lockout, seconds until the TPM allows another try.
        func error(during operation: Operation, tcti: String, lockoutInterval: Int? = nil) -> KeyboundError {
            let native = KeyboundError.NativeCode.tss2(code)
            func error(_ code: KeyboundError.Code, _ message: String, recovery: KeyboundError.Recovery? = nil)
                -> KeyboundError
            {
                KeyboundError(code, native: native, message: "\(message) (\(text))", recovery: recovery)
            }
            if layer == keybound_rc_layer_tcti || operation == .connect {
                return error(.notSupported, "the TPM cannot be reached through \(tcti)")
            }
            guard let tpmCode else {
                return error(.unexpected, "the TPM software stack failed")
            }
            switch tpmCode {
            case keybound_rc_lockout:
                let wait = lockoutInterval.map { ": it allows one more try every \($0) s" } ?? ""
                return KeyboundError(
                    .throttled, native: native,
                    message:
                        "the TPM is in dictionary-attack lockout after too many wrong PINs\(wait) (\(text))",
                    retryAfter: lockoutInterval)
            case keybound_rc_auth_fail, keybound_rc_bad_auth:
                switch operation {
                case .authorize, .use, .decrypt:
                    return error(.authenticationFailed, "the TPM refused the PIN")
                case .createPrimary:
                    return error(
                        .notSupported,
                        "the TPM's owner hierarchy has an authorization value; TPMKeyVault needs it empty")
                default:
                    return error(.unexpected, "the TPM refused an authorization")
                }
            case keybound_rc_initialize:
                return error(.notSupported, "the TPM has not been started (TPM2_Startup)")
            case keybound_rc_disabled, keybound_rc_hierarchy:
                return error(.notSupported, "the TPM's owner hierarchy is disabled")
            case keybound_rc_policy_fail:
                return error(.invalidated, "the key is bound to a PIN that no longer exists")
            case keybound_rc_ecc_point where operation == .decrypt:
                return error(.invalidInput, "not a ciphertext made for this key")
            case keybound_rc_object_memory, keybound_rc_session_memory:
                return error(
                    .unexpected,
                    "the TPM has no room for another object or session: without a resource manager, "
                        + "another program left its own loaded",
                    recovery: .retryLater)
            case keybound_rc_retry, keybound_rc_yielded, keybound_rc_testing, keybound_rc_canceled:
                return error(.unexpected, "the TPM is busy", recovery: .retryLater)
            default:
                // A stored blob the TPM will not load (made under another TPM's storage key, or
                // before this one was cleared; or damaged): the key is gone for good here.
                if operation == .load, tpmCode & 0x80 != 0 {
                    return error(
                        .invalidated,
                        "the stored key does not belong to this TPM (another machine, or the TPM was cleared)"
                    )
                }
                return error(.unexpected, "the TPM refused")
            }
        }

        /// A call that reported success but returned nothing.
        static func missingOutput(_ what: String) -> KeyboundError {
            KeyboundError(.unexpected, message: "\(what) returned no result")
        }
    }
#endif
