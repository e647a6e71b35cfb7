/// The platform's native codes and their meaning in Keybound, in one place.
///
/// These functions are platform-neutral so that the mapping is tested on every platform; the
/// Apple backends and the emulator both report through them.
extension KeyboundError {
    /// LocalAuthentication `LAError.Code` raw values (stable ABI values from LAError.h).
    public enum LAErrorCode {
        public static let authenticationFailed = -1
        public static let userCancel = -2
        public static let userFallback = -3
        public static let systemCancel = -4
        public static let passcodeNotSet = -5
        public static let biometryNotAvailable = -6
        public static let biometryNotEnrolled = -7
        public static let biometryLockout = -8
        public static let appCancel = -9
        public static let invalidContext = -10
        public static let companionNotAvailable = -11
        public static let biometryNotPaired = -12
        public static let biometryDisconnected = -13
        public static let invalidDimensions = -14
        public static let notInteractive = -1004
    }

    /// Security framework `OSStatus` values Keybound handles (from SecBase.h).
    public enum OSStatusCode {
        public static let success: Int32 = 0
        public static let unimplemented: Int32 = -4
        public static let param: Int32 = -50
        public static let userCanceled: Int32 = -128
        public static let notAvailable: Int32 = -25291
        public static let authFailed: Int32 = -25293
        public static let duplicateItem: Int32 = -25299
        public static let itemNotFound: Int32 = -25300
        public static let interactionNotAllowed: Int32 = -25308
        public static let decode: Int32 = -26275
        public static let missingEntitlement: Int32 = -34018
    }

    /// The Keybound error for a LocalAuthentication error code.
    ///
    /// `invalidContext` (the app invalidated the context) is an app cancel; `notInteractive`
    /// (UI not allowed, e.g. device locked) means wait for unlock; a disconnected or unpaired
    /// sensor, or one that cannot be used, is "not available".
    public init(laErrorCode code: Int, message: String? = nil) {
        let mapped: Code
        switch code {
        case LAErrorCode.authenticationFailed: mapped = .authenticationFailed
        case LAErrorCode.userCancel: mapped = .userCancel
        case LAErrorCode.userFallback: mapped = .userFallback
        case LAErrorCode.systemCancel: mapped = .systemCancel
        case LAErrorCode.passcodeNotSet: mapped = .passcodeNotSet
        case LAErrorCode.biometryNotAvailable, LAErrorCode.biometryNotPaired,
            LAErrorCode.biometryDisconnected, LAErrorCode.companionNotAvailable,
            LAErrorCode.invalidDimensions:
            mapped = .biometryNotAvailable
        case LAErrorCode.biometryNotEnrolled: mapped = .biometryNotEnrolled
        case LAErrorCode.biometryLockout: mapped = .biometryLockout
        case LAErrorCode.appCancel, LAErrorCode.invalidContext: mapped = .appCancel
        case LAErrorCode.notInteractive: mapped = .interactionNotAllowed
        default: mapped = .unexpected
        }
        self.init(mapped, native: .laError(code), message: message)
    }

    /// The Keybound error for a Keychain `OSStatus`, or nil for `errSecSuccess`.
    ///
    /// `errSecAuthFailed` is what a protected item answers when the verification did not
    /// satisfy it; `errSecUserCanceled` is a dismissed prompt; a missing entitlement or an
    /// unavailable keychain is "not supported" here.
    public init?(osStatus status: Int32, message: String? = nil) {
        let mapped: Code
        switch status {
        case OSStatusCode.success: return nil
        case OSStatusCode.itemNotFound: mapped = .itemNotFound
        case OSStatusCode.duplicateItem: mapped = .duplicateItem
        case OSStatusCode.authFailed: mapped = .authenticationFailed
        case OSStatusCode.interactionNotAllowed: mapped = .interactionNotAllowed
        case OSStatusCode.userCanceled: mapped = .userCancel
        case OSStatusCode.param: mapped = .invalidInput
        case OSStatusCode.notAvailable, OSStatusCode.missingEntitlement, OSStatusCode.unimplemented:
            mapped = .notSupported
        default: mapped = .unexpected
        }
        self.init(mapped, native: .osStatus(status), message: message)
    }
}
