// The enumerated values of Server API v1, each wire text spelled once. Values on the wire are
// snake_case like every member name (`secure_enclave`); Swift names are camelCase.
//
// Two kinds, decided by who may add values:
// - Closed sets (`enum … : String`) hold values the client itself sends or that this version
//   must understand to act (key protection, device and approval status, how a session was
//   opened). An unknown value is a decoding error.
// - Open sets (``OpenVocabulary``: problem codes, audit event types and methods) are what a
//   newer server may extend without breaking older apps: an unknown value decodes, keeps its
//   text, and compares unequal to every known one.
// docs/openapi.yaml lists the same values; OpenAPIVocabularyTests checks that they agree.

/// A set of values a newer server may extend: every string decodes, and the values this version
/// knows are static members.
public protocol OpenVocabulary: RawRepresentable, Sendable, Hashable, CustomStringConvertible
where RawValue == String {
    /// Wraps a value's wire text (known or not).
    init(rawValue: String)
    /// Every value this version of Keybound writes, in the order of docs/openapi.yaml.
    static var known: [Self] { get }
}

extension OpenVocabulary {
    /// The wire text.
    public var description: String { rawValue }
}

/// How a session was opened.
public enum AuthMethod: String, Sendable, Hashable, CaseIterable {
    /// A password login.
    case password
    /// A device-key login (a signature over a server challenge).
    case device
    /// A passkey sign-in or sign-up (WebAuthn); like a password login, it counts for step-up.
    case passkey
}

/// Where a device key lives.
public enum KeyProtection: String, Sendable, Hashable, CaseIterable {
    /// Apple Secure Enclave.
    case secureEnclave = "secure_enclave"
    /// A software key (no hardware protection).
    case software
    /// The Keybound emulator.
    case emulator
}

/// The state of a bound device.
public enum DeviceStatus: String, Sendable, Hashable, CaseIterable {
    /// Usable for logins and approvals.
    case active
    /// Suspended. Keybound servers no longer suspend devices (bad signatures are throttled
    /// instead); kept so older servers' answers decode.
    case suspended
    /// Revoked by the user or replaced by a new key from the same client; it signs nothing more.
    case revoked
}

/// The state of an approval.
public enum ApprovalStatus: String, Sendable, Hashable, CaseIterable {
    /// Waiting for a signature.
    case pending
    /// Confirmed with a valid signature.
    case approved
    /// A confirmation with an invalid signature used it up.
    case failed
    /// Not confirmed in time.
    case expired
    /// The user refused it (`POST /v1/approvals/{id}/deny`).
    case denied
}

/// What an audit event records. Open: a newer server may record types this version does not
/// know; they decode with their text (compare with ``known`` to tell).
public struct AuditEventType: OpenVocabulary {
    /// The type as it appears on the wire.
    public let rawValue: String
    /// A type from its wire text (unknown types are kept as they are).
    public init(rawValue: String) { self.rawValue = rawValue }

    /// An account was created, through the API or by an operator (method `operator`).
    public static let accountCreated = AuditEventType(rawValue: "account_created")
    /// A session was opened (method `password` or `device`).
    public static let login = AuditEventType(rawValue: "login")
    /// A login was refused: wrong password, unknown user, bad device signature (folded).
    public static let loginFailed = AuditEventType(rawValue: "login_failed")
    /// One client address was blocked from password logins on the account (folded).
    public static let lockout = AuditEventType(rawValue: "lockout")
    /// The account's failures from all addresses reached the ceiling (folded).
    public static let accountCeiling = AuditEventType(rawValue: "account_ceiling")
    /// A client address was blocked after failed logins of any kind; it names no user, so it
    /// appears in no user's list, only in the server's log and database (folded).
    public static let addressLockout = AuditEventType(rawValue: "address_lockout")
    /// A session was ended by its holder.
    public static let logout = AuditEventType(rawValue: "logout")
    /// A used refresh token was presented again: the session was ended.
    public static let refreshReuse = AuditEventType(rawValue: "refresh_reuse")
    /// A device key was bound.
    public static let deviceBound = AuditEventType(rawValue: "device_bound")
    /// A device was revoked (by the user, or replaced by a new key from the same client).
    public static let deviceRevoked = AuditEventType(rawValue: "device_revoked")
    /// The device's bad signatures reached the limit; its logins wait (folded).
    public static let deviceThrottled = AuditEventType(rawValue: "device_throttled")
    /// An approval payload was issued.
    public static let approvalCreated = AuditEventType(rawValue: "approval_created")
    /// An approval was confirmed with a valid signature.
    public static let approvalConfirmed = AuditEventType(rawValue: "approval_confirmed")
    /// The user refused an approval.
    public static let approvalDenied = AuditEventType(rawValue: "approval_denied")
    /// An approval confirmation carried a bad signature (folded).
    public static let approvalFailed = AuditEventType(rawValue: "approval_failed")
    /// A passkey was registered (method `passkey`), at sign-up or added to the account.
    public static let passkeyRegistered = AuditEventType(rawValue: "passkey_registered")
    /// A passkey was removed; the sessions it opened ended.
    public static let passkeyRemoved = AuditEventType(rawValue: "passkey_removed")
    /// A passkey's signature counter did not rise: two copies of its key may exist (folded).
    public static let passkeyCloned = AuditEventType(rawValue: "passkey_cloned")
    /// The passkey's failed sign-ins reached the limit; its failures wait (folded).
    public static let passkeyThrottled = AuditEventType(rawValue: "passkey_throttled")
    /// An App Attest attestation or assertion was refused (method `app_attest`, folded).
    public static let appAttestFailed = AuditEventType(rawValue: "app_attest_failed")
    /// The user let an OAuth client sign them in: a code was issued (`POST /v1/oauth/authorize`).
    public static let oauthAuthorized = AuditEventType(rawValue: "oauth_authorized")
    /// An authorization code was presented a second time: what its first use issued was revoked.
    public static let oauthCodeReuse = AuditEventType(rawValue: "oauth_code_reuse")
    /// An administrator ended a session, or all of a user's sessions (docs/console.md).
    public static let sessionRevoked = AuditEventType(rawValue: "session_revoked")
    /// An administrator locked the account: its sessions ended, and no login opens one.
    public static let accountLocked = AuditEventType(rawValue: "account_locked")
    /// An administrator unlocked the account.
    public static let accountUnlocked = AuditEventType(rawValue: "account_unlocked")
    /// An administrator cleared the account's login throttles.
    public static let throttlesCleared = AuditEventType(rawValue: "throttles_cleared")
    /// A role was granted to the account (on the console, or by an operator).
    public static let roleGranted = AuditEventType(rawValue: "role_granted")
    /// A role was taken from the account.
    public static let roleRevoked = AuditEventType(rawValue: "role_revoked")
    /// An administrator registered an OAuth client or a webhook endpoint, removed one, or sent a
    /// webhook delivery again; the event's `detail` says which.
    public static let configurationChanged = AuditEventType(rawValue: "configuration_changed")

    /// Every type this version writes, in the order of docs/openapi.yaml.
    public static let known: [AuditEventType] = [
        .accountCreated, .login, .loginFailed, .lockout, .accountCeiling, .addressLockout, .logout,
        .refreshReuse, .deviceBound, .deviceRevoked, .deviceThrottled, .approvalCreated, .approvalConfirmed,
        .approvalDenied,
        .approvalFailed, .passkeyRegistered, .passkeyRemoved, .passkeyCloned, .passkeyThrottled,
        .appAttestFailed, .oauthAuthorized, .oauthCodeReuse, .sessionRevoked, .accountLocked,
        .accountUnlocked, .throttlesCleared, .roleGranted, .roleRevoked, .configurationChanged,
    ]
}

/// How the actor of an audit event proved who they are. Open, like ``AuditEventType``.
public struct AuditMethod: OpenVocabulary {
    /// The method as it appears on the wire.
    public let rawValue: String
    /// A method from its wire text (unknown methods are kept as they are).
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The method of a login.
    public init(_ method: AuthMethod) { rawValue = method.rawValue }

    /// A password.
    public static let password = AuditMethod(.password)
    /// A device signature over a login challenge.
    public static let device = AuditMethod(.device)
    /// A device signature over an approval payload.
    public static let approval = AuditMethod(rawValue: "approval")
    /// An operator on the server's machine (`keybound user add`).
    public static let `operator` = AuditMethod(rawValue: "operator")
    /// A passkey (WebAuthn).
    public static let passkey = AuditMethod(.passkey)
    /// An App Attest attestation or assertion.
    public static let appAttest = AuditMethod(rawValue: "app_attest")

    /// Every method this version writes, in the order of docs/openapi.yaml.
    public static let known: [AuditMethod] = [.password, .device, .approval, .operator, .passkey, .appAttest]
}
