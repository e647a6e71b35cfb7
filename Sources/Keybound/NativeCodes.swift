/// The platform's native codes and their meaning in Keybound, in one place.
///
/// These functions are platform-neutral so that the mapping is tested on every platform; the
/// Apple backends and the emulator both report through them.
extension KeyboundError {
    /// LocalAuthentication `LAError.Code` raw values (stable ABI values from LAError.h).
    public enum LAErrorCode {
        /// `LAError.authenticationFailed`: the user failed to provide valid credentials.
        public static let authenticationFailed = -1
        /// `LAError.userCancel`: the user tapped Cancel.
        public static let userCancel = -2
        /// `LAError.userFallback`: the user tapped the fallback button.
        public static let userFallback = -3
        /// `LAError.systemCancel`: the system dismissed the prompt (another app came forward).
        public static let systemCancel = -4
        /// `LAError.passcodeNotSet`: the device has no passcode.
        public static let passcodeNotSet = -5
        /// `LAError.biometryNotAvailable`: no sensor, or the user denied the app its use.
        public static let biometryNotAvailable = -6
        /// `LAError.biometryNotEnrolled`: no face or finger is enrolled.
        public static let biometryNotEnrolled = -7
        /// `LAError.biometryLockout`: too many failed matches; the passcode unlocks biometry.
        public static let biometryLockout = -8
        /// `LAError.appCancel`: the app invalidated the context during the prompt.
        public static let appCancel = -9
        /// `LAError.invalidContext`: the context was invalidated before it was used.
        public static let invalidContext = -10
        /// `LAError.companionNotAvailable`: no paired companion device (Apple Watch) nearby.
        public static let companionNotAvailable = -11
        /// `LAError.biometryNotPaired`: a removable sensor (Magic Keyboard) is not paired.
        public static let biometryNotPaired = -12
        /// `LAError.biometryDisconnected`: a removable sensor is paired but not connected.
        public static let biometryDisconnected = -13
        /// `LAError.invalidDimensions`: the prompt's UI dimensions were invalid.
        public static let invalidDimensions = -14
        /// `LAError.notInteractive`: no UI may be shown now (for example, the device is locked).
        public static let notInteractive = -1004
    }

    /// Security framework `OSStatus` values Keybound handles (from SecBase.h).
    public enum OSStatusCode {
        /// `errSecSuccess`: the call succeeded.
        public static let success: Int32 = 0
        /// `errSecUnimplemented`: the function is not implemented on this platform.
        public static let unimplemented: Int32 = -4
        /// `errSecParam`: a parameter was not valid.
        public static let param: Int32 = -50
        /// `errSecUserCanceled`: the user cancelled the prompt the Keychain showed.
        public static let userCanceled: Int32 = -128
        /// `errSecNotAvailable`: no keychain is available.
        public static let notAvailable: Int32 = -25291
        /// `errSecAuthFailed`: the item's access control was not satisfied.
        public static let authFailed: Int32 = -25293
        /// `errSecDuplicateItem`: an item with these attributes already exists.
        public static let duplicateItem: Int32 = -25299
        /// `errSecItemNotFound`: no such item — also what an invalidated item answers.
        public static let itemNotFound: Int32 = -25300
        /// `errSecInteractionNotAllowed`: the device is locked, or data protection is on.
        public static let interactionNotAllowed: Int32 = -25308
        /// `errSecDecode`: the data could not be decoded.
        public static let decode: Int32 = -26275
        /// `errSecMissingEntitlement`: the app lacks the keychain entitlement.
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
