import Foundation

// Request and response bodies of Server API v1, in the order of the contract table.
// JSON member names are snake_case; Swift property names are camelCase.

/// `GET /healthz` response.
public struct HealthResponse: WireMessage, Hashable {
    /// `"ok"`.
    public let status: String
    /// Creates the message from its members.
    public init(status: String = "ok") { self.status = status }
    /// Decodes the body strictly: `status` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        status = try JSONReader(json, allowed: ["status"]).string("status")
    }
    /// The body as sent: `{"status": …}`.
    public var json: JSONValue { .object([JSONMember("status", .string(status))]) }
}

/// `POST /v1/accounts` request.
public struct CreateAccountRequest: WireMessage, Hashable {
    /// 1–64 of `a-z 0-9 . _ @ + -` (compared case-insensitively).
    public let username: String
    /// 8–1024 characters, no composition rules.
    public let password: String
    /// Creates the message from its members.
    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
    /// Decodes the body strictly: `username` and `password` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["username", "password"])
        username = try reader.string("username")
        password = try reader.string("password")
    }
    /// The body as sent: `username` and `password`, in this order.
    public var json: JSONValue {
        .object([JSONMember("username", .string(username)), JSONMember("password", .string(password))])
    }
}

/// `POST /v1/accounts` response (201).
public struct CreateAccountResponse: WireMessage, Hashable {
    /// The user's opaque id (`user_id`).
    public let userID: String
    /// Creates the message from its members.
    public init(userID: String) { self.userID = userID }
    /// Decodes the body strictly: `user_id` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        userID = try JSONReader(json, allowed: ["user_id"]).string("user_id")
    }
    /// The body as sent: `{"user_id": …}`.
    public var json: JSONValue { .object([JSONMember("user_id", .string(userID))]) }
}

/// `POST /v1/sessions/password` request.
public struct PasswordLoginRequest: WireMessage, Hashable {
    /// The username (`username`).
    public let username: String
    /// The password (`password`); never logged or stored in clear.
    public let password: String
    /// Identifies the app installation: a new login from the same client ends its previous
    /// session; 1–128 of `A-Z a-z 0-9 . _ : -`.
    public let clientID: String
    /// Creates the message from its members.
    public init(username: String, password: String, clientID: String) {
        self.username = username
        self.password = password
        self.clientID = clientID
    }
    /// Decodes the body strictly: `username`, `password` and `client_id` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["username", "password", "client_id"])
        username = try reader.string("username")
        password = try reader.string("password")
        clientID = try reader.string("client_id")
    }
    /// The body as sent: `username`, `password` and `client_id`, in this order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("username", username)
        object.add("password", password)
        object.add("client_id", clientID)
        return object.value
    }
}

/// `POST /v1/sessions/refresh` request.
public struct RefreshRequest: WireMessage, Hashable {
    /// The refresh token (`refresh_token`).
    public let refreshToken: String
    /// Creates the message from its members.
    public init(refreshToken: String) { self.refreshToken = refreshToken }
    /// Decodes the body strictly: `refresh_token` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        refreshToken = try JSONReader(json, allowed: ["refresh_token"]).string("refresh_token")
    }
    /// The body as sent: `{"refresh_token": …}`.
    public var json: JSONValue { .object([JSONMember("refresh_token", .string(refreshToken))]) }
}

/// The tokens of a session: the response of every login and of refresh.
public struct TokenResponse: WireMessage, Hashable {
    /// Opaque bearer token for `Authorization: Bearer …`.
    public let accessToken: String
    /// Opaque single-use token for `POST /v1/sessions/refresh`.
    public let refreshToken: String
    /// `"Bearer"`.
    public let tokenType: String
    /// Seconds until the access token expires.
    public let expiresIn: Int
    /// The session's opaque id (`session_id`).
    public let sessionID: String
    /// The user's opaque id (`user_id`).
    public let userID: String
    /// Creates the message from its members.
    public init(
        accessToken: String, refreshToken: String, tokenType: String = "Bearer", expiresIn: Int,
        sessionID: String,
        userID: String
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.sessionID = sessionID
        self.userID = userID
    }
    /// Decodes the body strictly: `access_token`, `refresh_token`, `token_type`, `expires_in`,
    /// `session_id` and `user_id` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json,
            allowed: ["access_token", "refresh_token", "token_type", "expires_in", "session_id", "user_id"])
        accessToken = try reader.string("access_token")
        refreshToken = try reader.string("refresh_token")
        tokenType = try reader.string("token_type")
        expiresIn = try reader.integer("expires_in")
        sessionID = try reader.string("session_id")
        userID = try reader.string("user_id")
    }
    /// The body as sent: `access_token`, `refresh_token`, `token_type`, `expires_in`, `session_id` and
    /// `user_id`, in this order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("access_token", accessToken)
        object.add("refresh_token", refreshToken)
        object.add("token_type", tokenType)
        object.add("expires_in", expiresIn)
        object.add("session_id", sessionID)
        object.add("user_id", userID)
        return object.value
    }
}

/// How a session was opened.
public enum AuthMethod: String, Sendable, Hashable {
    /// A password login (`POST /v1/sessions/password`); needed for step-up operations.
    case password
    /// A device-key login (`POST /v1/sessions/device`).
    case device
}

/// `GET /v1/me` response.
public struct MeResponse: WireMessage, Hashable {
    /// The user's opaque id (`user_id`).
    public let userID: String
    /// The username (`username`).
    public let username: String
    /// The session's opaque id (`session_id`).
    public let sessionID: String
    /// How the session was opened (`auth_method`).
    public let authMethod: AuthMethod
    /// When the user last authenticated in this session (password or device signature).
    public let authTime: Date
    /// Creates the message from its members.
    public init(userID: String, username: String, sessionID: String, authMethod: AuthMethod, authTime: Date) {
        self.userID = userID
        self.username = username
        self.sessionID = sessionID
        self.authMethod = authMethod
        self.authTime = authTime
    }
    /// Decodes the body strictly: `user_id`, `username`, `session_id`, `auth_method` and `auth_time`
    /// required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json, allowed: ["user_id", "username", "session_id", "auth_method", "auth_time"])
        userID = try reader.string("user_id")
        username = try reader.string("username")
        sessionID = try reader.string("session_id")
        authMethod = try reader.enumeration("auth_method", as: AuthMethod.self)
        authTime = try reader.timestamp("auth_time")
    }
    /// The body as sent: `user_id`, `username`, `session_id`, `auth_method` and `auth_time`, in this
    /// order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("user_id", userID)
        object.add("username", username)
        object.add("session_id", sessionID)
        object.add("auth_method", authMethod.rawValue)
        object.add("auth_time", Timestamp.format(authTime))
        return object.value
    }
}

/// Where a device key lives.
public enum KeyProtection: String, Sendable, Hashable, CaseIterable {
    /// Apple Secure Enclave.
    case secureEnclave
    /// A software key (no hardware protection).
    case software
    /// The Keybound emulator.
    case emulator
}

/// `POST /v1/devices` request.
public struct BindDeviceRequest: WireMessage, Hashable {
    /// The P-256 public key as SubjectPublicKeyInfo DER (base64url on the wire).
    public let publicKey: Data
    /// A display name, 1–64 characters.
    public let name: String
    /// Where the device key lives (`key_protection`).
    public let keyProtection: KeyProtection
    /// Creates the message from its members.
    public init(publicKey: Data, name: String, keyProtection: KeyProtection) {
        self.publicKey = publicKey
        self.name = name
        self.keyProtection = keyProtection
    }
    /// Decodes the body strictly: `public_key`, `name` and `key_protection` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["public_key", "name", "key_protection"])
        publicKey = try reader.bytes("public_key")
        name = try reader.string("name")
        keyProtection = try reader.enumeration("key_protection", as: KeyProtection.self)
    }
    /// The body as sent: `public_key`, `name` and `key_protection`, in this order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("public_key", Base64URL.encode(publicKey))
        object.add("name", name)
        object.add("key_protection", keyProtection.rawValue)
        return object.value
    }
}

/// `POST /v1/devices` response (201).
public struct BindDeviceResponse: WireMessage, Hashable {
    /// The device's opaque id (`device_id`).
    public let deviceID: String
    /// Creates the message from its members.
    public init(deviceID: String) { self.deviceID = deviceID }
    /// Decodes the body strictly: `device_id` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        deviceID = try JSONReader(json, allowed: ["device_id"]).string("device_id")
    }
    /// The body as sent: `{"device_id": …}`.
    public var json: JSONValue { .object([JSONMember("device_id", .string(deviceID))]) }
}

/// The state of a bound device.
public enum DeviceStatus: String, Sendable, Hashable {
    /// Bound and usable for logins and approvals.
    case active
    /// Suspended. Keybound servers no longer suspend devices (bad signatures are throttled
    /// instead); kept so older servers' answers decode.
    case suspended
    /// Revoked by the user or replaced by a newer key of the same client; final.
    case revoked
}

/// One device in `GET /v1/devices`.
public struct DeviceInfo: WireMessage, Hashable {
    /// The device's opaque id (`device_id`).
    public let deviceID: String
    /// The device's display name (`name`).
    public let name: String
    /// Where the device key lives (`key_protection`).
    public let keyProtection: KeyProtection
    /// The state (`status`).
    public let status: DeviceStatus
    /// When it was created (`created_at`).
    public let createdAt: Date
    /// When the device last signed successfully (`last_used_at`), or nil.
    public let lastUsedAt: Date?
    /// Creates the message from its members.
    public init(
        deviceID: String, name: String, keyProtection: KeyProtection, status: DeviceStatus, createdAt: Date,
        lastUsedAt: Date?
    ) {
        self.deviceID = deviceID
        self.name = name
        self.keyProtection = keyProtection
        self.status = status
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
    /// Decodes the body strictly: `device_id`, `name`, `key_protection`, `status` and `created_at`
    /// required, `last_used_at` optional (absent or null), no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json, allowed: ["device_id", "name", "key_protection", "status", "created_at", "last_used_at"])
        deviceID = try reader.string("device_id")
        name = try reader.string("name")
        keyProtection = try reader.enumeration("key_protection", as: KeyProtection.self)
        status = try reader.enumeration("status", as: DeviceStatus.self)
        createdAt = try reader.timestamp("created_at")
        lastUsedAt = try reader.optionalTimestamp("last_used_at")
    }
    /// The body as sent: `device_id`, `name`, `key_protection`, `status`, `created_at` and
    /// `last_used_at`, in this order (`last_used_at` null when absent).
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("device_id", deviceID)
        object.add("name", name)
        object.add("key_protection", keyProtection.rawValue)
        object.add("status", status.rawValue)
        object.add("created_at", Timestamp.format(createdAt))
        object.add("last_used_at", lastUsedAt.map { .string(Timestamp.format($0)) } ?? .null)
        return object.value
    }
}

/// `GET /v1/devices` response.
public struct DeviceListResponse: WireMessage, Hashable {
    /// The caller's devices, oldest first (`devices`).
    public let devices: [DeviceInfo]
    /// Creates the message from its members.
    public init(devices: [DeviceInfo]) { self.devices = devices }
    /// Decodes the body strictly: `devices` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        var devices: [DeviceInfo] = []
        for item in try JSONReader(json, allowed: ["devices"]).array("devices") {
            devices.append(try DeviceInfo(json: item))
        }
        self.devices = devices
    }
    /// The body as sent: `{"devices": …}`.
    public var json: JSONValue { .object([JSONMember("devices", .array(devices.map(\.json)))]) }
}

/// `POST /v1/challenges` request.
public struct ChallengeRequest: WireMessage, Hashable {
    /// The device's opaque id (`device_id`).
    public let deviceID: String
    /// Creates the message from its members.
    public init(deviceID: String) { self.deviceID = deviceID }
    /// Decodes the body strictly: `device_id` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        deviceID = try JSONReader(json, allowed: ["device_id"]).string("device_id")
    }
    /// The body as sent: `{"device_id": …}`.
    public var json: JSONValue { .object([JSONMember("device_id", .string(deviceID))]) }
}

/// `POST /v1/challenges` response (201): the payload to sign for a device login.
public struct ChallengeResponse: WireMessage, Hashable {
    /// The challenge's opaque id (`challenge_id`).
    public let challengeID: String
    /// The exact ``SigningPayload`` bytes to sign (base64url on the wire).
    public let payload: Data
    /// When the payload stops being accepted (`expires_at`).
    public let expiresAt: Date
    /// Creates the message from its members.
    public init(challengeID: String, payload: Data, expiresAt: Date) {
        self.challengeID = challengeID
        self.payload = payload
        self.expiresAt = expiresAt
    }
    /// Decodes the body strictly: `challenge_id`, `payload` and `expires_at` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["challenge_id", "payload", "expires_at"])
        challengeID = try reader.string("challenge_id")
        payload = try reader.bytes("payload")
        expiresAt = try reader.timestamp("expires_at")
    }
    /// The body as sent: `challenge_id`, `payload` and `expires_at`, in this order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("challenge_id", challengeID)
        object.add("payload", Base64URL.encode(payload))
        object.add("expires_at", Timestamp.format(expiresAt))
        return object.value
    }
}

/// `POST /v1/sessions/device` request.
public struct DeviceLoginRequest: WireMessage, Hashable {
    /// The challenge's opaque id (`challenge_id`).
    public let challengeID: String
    /// ECDSA P-256 SHA-256 signature of the payload, DER (base64url on the wire).
    public let signature: Data
    /// Creates the message from its members.
    public init(challengeID: String, signature: Data) {
        self.challengeID = challengeID
        self.signature = signature
    }
    /// Decodes the body strictly: `challenge_id` and `signature` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["challenge_id", "signature"])
        challengeID = try reader.string("challenge_id")
        signature = try reader.bytes("signature")
    }
    /// The body as sent: `challenge_id` and `signature`, in this order.
    public var json: JSONValue {
        .object([
            JSONMember("challenge_id", .string(challengeID)),
            JSONMember("signature", .string(Base64URL.encode(signature))),
        ])
    }
}

/// `POST /v1/approvals` request.
public struct CreateApprovalRequest: WireMessage, Hashable {
    /// The device that is asked to sign.
    public let deviceID: String
    /// The action to approve (`action`).
    public let action: ApprovalAction
    /// Creates the message from its members.
    public init(deviceID: String, action: ApprovalAction) {
        self.deviceID = deviceID
        self.action = action
    }
    /// Decodes the body strictly: `device_id` and `action` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["device_id", "action"])
        deviceID = try reader.string("device_id")
        action = try ApprovalAction(json: reader.value("action"))
    }
    /// The body as sent: `device_id` and `action`, in this order.
    public var json: JSONValue {
        .object([JSONMember("device_id", .string(deviceID)), JSONMember("action", action.json)])
    }
}

/// `POST /v1/approvals` response (201): the payload to sign.
public struct ApprovalChallengeResponse: WireMessage, Hashable {
    /// The approval's opaque id (`approval_id`).
    public let approvalID: String
    /// The exact ``SigningPayload`` bytes to sign (base64url on the wire).
    public let payload: Data
    /// When the payload stops being accepted (`expires_at`).
    public let expiresAt: Date
    /// Creates the message from its members.
    public init(approvalID: String, payload: Data, expiresAt: Date) {
        self.approvalID = approvalID
        self.payload = payload
        self.expiresAt = expiresAt
    }
    /// Decodes the body strictly: `approval_id`, `payload` and `expires_at` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["approval_id", "payload", "expires_at"])
        approvalID = try reader.string("approval_id")
        payload = try reader.bytes("payload")
        expiresAt = try reader.timestamp("expires_at")
    }
    /// The body as sent: `approval_id`, `payload` and `expires_at`, in this order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("approval_id", approvalID)
        object.add("payload", Base64URL.encode(payload))
        object.add("expires_at", Timestamp.format(expiresAt))
        return object.value
    }
}

/// `POST /v1/approvals/{id}/confirm` request.
public struct ConfirmApprovalRequest: WireMessage, Hashable {
    /// ECDSA P-256 SHA-256 signature of the payload, DER (base64url on the wire).
    public let signature: Data
    /// Creates the message from its members.
    public init(signature: Data) { self.signature = signature }
    /// Decodes the body strictly: `signature` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        signature = try JSONReader(json, allowed: ["signature"]).bytes("signature")
    }
    /// The body as sent: `{"signature": …}`.
    public var json: JSONValue { .object([JSONMember("signature", .string(Base64URL.encode(signature)))]) }
}

/// The state of an approval.
public enum ApprovalStatus: String, Sendable, Hashable {
    /// Waiting for a signature.
    case pending
    /// Confirmed with a valid signature.
    case approved
    /// A confirmation with an invalid signature used it up.
    case failed
    /// Not confirmed in time.
    case expired
}

/// `POST /v1/approvals/{id}/confirm` response (200).
public struct ConfirmApprovalResponse: WireMessage, Hashable {
    /// `approved`.
    public let status: ApprovalStatus
    /// Creates the message from its members.
    public init(status: ApprovalStatus = .approved) { self.status = status }
    /// Decodes the body strictly: `status` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        status = try JSONReader(json, allowed: ["status"]).enumeration("status", as: ApprovalStatus.self)
    }
    /// The body as sent: `{"status": …}`.
    public var json: JSONValue { .object([JSONMember("status", .string(status.rawValue))]) }
}

/// `GET /v1/approvals/{id}` response.
public struct ApprovalResponse: WireMessage, Hashable {
    /// The approval's opaque id (`approval_id`).
    public let approvalID: String
    /// The state (`status`).
    public let status: ApprovalStatus
    /// The device's opaque id (`device_id`).
    public let deviceID: String
    /// The action to approve (`action`).
    public let action: ApprovalAction
    /// When it was created (`created_at`).
    public let createdAt: Date
    /// When the payload stops being accepted (`expires_at`).
    public let expiresAt: Date
    /// When it was approved or failed; null while pending or expired.
    public let decidedAt: Date?
    /// Creates the message from its members.
    public init(
        approvalID: String, status: ApprovalStatus, deviceID: String, action: ApprovalAction, createdAt: Date,
        expiresAt: Date, decidedAt: Date?
    ) {
        self.approvalID = approvalID
        self.status = status
        self.deviceID = deviceID
        self.action = action
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.decidedAt = decidedAt
    }
    /// Decodes the body strictly: `approval_id`, `status`, `device_id`, `action`, `created_at` and
    /// `expires_at` required, `decided_at` optional (absent or null), no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json,
            allowed: [
                "approval_id", "status", "device_id", "action", "created_at", "expires_at", "decided_at",
            ])
        approvalID = try reader.string("approval_id")
        status = try reader.enumeration("status", as: ApprovalStatus.self)
        deviceID = try reader.string("device_id")
        action = try ApprovalAction(json: reader.value("action"))
        createdAt = try reader.timestamp("created_at")
        expiresAt = try reader.timestamp("expires_at")
        decidedAt = try reader.optionalTimestamp("decided_at")
    }
    /// The body as sent: `approval_id`, `status`, `device_id`, `action`, `created_at`, `expires_at` and
    /// `decided_at`, in this order (`decided_at` null when absent).
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("approval_id", approvalID)
        object.add("status", status.rawValue)
        object.add("device_id", deviceID)
        object.add("action", action.json)
        object.add("created_at", Timestamp.format(createdAt))
        object.add("expires_at", Timestamp.format(expiresAt))
        object.add("decided_at", decidedAt.map { .string(Timestamp.format($0)) } ?? .null)
        return object.value
    }
}

/// One audit event in `GET /v1/audit`. Never contains a secret, token or signature.
///
/// Repeated refusals of one kind for one target (failed logins, lockouts) fold into one event:
/// ``count`` says how many, ``time`` is the first and ``lastTime`` the latest, and
/// ``clientAddress`` the latest one's client.
public struct AuditEvent: WireMessage, Hashable {
    /// When it happened (`time`); for a folded event, the first time.
    public let time: Date
    /// What happened: `account_created`, `login`, `login_failed`, `lockout` (one client address
    /// blocked on the account), `account_ceiling` (the account's failures from all addresses
    /// reached the ceiling), `logout`, `refresh_reuse`, `device_bound`, `device_revoked`,
    /// `device_throttled` (the device's bad signatures reached the limit), `approval_created`,
    /// `approval_confirmed`, `approval_failed`.
    public let type: String
    /// `password`, `device` or `approval` for logins and their failures, `operator` for an
    /// account an operator created; otherwise null.
    public let method: String?
    /// The user's opaque id (`user_id`).
    public let userID: String?
    /// The device's opaque id (`device_id`).
    public let deviceID: String?
    /// The session's opaque id (`session_id`).
    public let sessionID: String?
    /// The client's network address (`client_address`), or nil.
    public let clientAddress: String?
    /// How many times it happened (`count`, at least 1).
    public let count: Int
    /// When it last happened (`last_time`); equal to ``time`` when ``count`` is 1.
    public let lastTime: Date
    /// Creates the message from its members.
    public init(
        time: Date, type: String, method: String?, userID: String?, deviceID: String?, sessionID: String?,
        clientAddress: String?, count: Int = 1, lastTime: Date? = nil
    ) {
        self.time = time
        self.type = type
        self.method = method
        self.userID = userID
        self.deviceID = deviceID
        self.sessionID = sessionID
        self.clientAddress = clientAddress
        self.count = count
        self.lastTime = lastTime ?? time
    }
    /// Decodes the body strictly: `time` and `type` required, `method`, `user_id`, `device_id`,
    /// `session_id` and `client_address` optional (absent or null), no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json,
            allowed: [
                "time", "type", "method", "user_id", "device_id", "session_id", "client_address", "count",
                "last_time",
            ])
        time = try reader.timestamp("time")
        type = try reader.string("type")
        method = try reader.optionalString("method")
        userID = try reader.optionalString("user_id")
        deviceID = try reader.optionalString("device_id")
        sessionID = try reader.optionalString("session_id")
        clientAddress = try reader.optionalString("client_address")
        count = try reader.integer("count")
        lastTime = try reader.timestamp("last_time")
    }
    /// The body as sent: `time`, `type`, `method`, `user_id`, `device_id`, `session_id` and
    /// `client_address`, in this order (`method`, `user_id`, `device_id`, `session_id` and
    /// `client_address` null when absent).
    public var json: JSONValue {
        func optional(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
        var object = JSONObjectBuilder()
        object.add("time", Timestamp.format(time))
        object.add("type", type)
        object.add("method", optional(method))
        object.add("user_id", optional(userID))
        object.add("device_id", optional(deviceID))
        object.add("session_id", optional(sessionID))
        object.add("client_address", optional(clientAddress))
        object.add("count", count)
        object.add("last_time", Timestamp.format(lastTime))
        return object.value
    }
}

/// `GET /v1/audit` response: the caller's own events, newest first.
public struct AuditListResponse: WireMessage, Hashable {
    /// The events, newest first (`events`).
    public let events: [AuditEvent]
    /// Creates the message from its members.
    public init(events: [AuditEvent]) { self.events = events }
    /// Decodes the body strictly: `events` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        var events: [AuditEvent] = []
        for item in try JSONReader(json, allowed: ["events"]).array("events") {
            events.append(try AuditEvent(json: item))
        }
        self.events = events
    }
    /// The body as sent: `{"events": …}`.
    public var json: JSONValue { .object([JSONMember("events", .array(events.map(\.json)))]) }
}
