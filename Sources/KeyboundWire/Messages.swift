import Foundation

// Request and response bodies of Server API v1, in the order of the contract table.
// Each message names its members once, in a `Member` enum (JSON names are snake_case, Swift
// names camelCase); its strict reader and its builder both use it. As a `WireObject`, a message
// only reads its members from the reader and writes them into the builder. Messages an app
// receives through the SDK are public; the rest only the SDK, the server and their tests build.

/// `GET /healthz` response.
package struct HealthResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Health"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case status }
    /// `"ok"`.
    package let status: String
    /// Creates the message from its members.
    package init(status: String = "ok") { self.status = status }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        status = try reader.string(.status)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.status, status)
    }
}

/// `POST /v1/accounts` request.
package struct CreateAccountRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "CreateAccountRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case username, password }
    /// The new account's username.
    package let username: Username
    /// 8–1024 characters, no composition rules (the server checks the length).
    package let password: String
    /// Creates the message from its members.
    package init(username: Username, password: String) {
        self.username = username
        self.password = password
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        username = try Username(reader.string(.username))
        password = try reader.string(.password)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.username, username.rawValue)
        object.add(.password, password)
    }
}

/// `POST /v1/accounts` response (201).
package struct CreateAccountResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "CreateAccountResponse"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case userID = "user_id" }
    /// The user's opaque id.
    package let userID: String
    /// Creates the message from its members.
    package init(userID: String) { self.userID = userID }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        userID = try reader.string(.userID)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.userID, userID)
    }
}

/// `POST /v1/sessions/password` request.
package struct PasswordLoginRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasswordLoginRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case username, password
        case clientID = "client_id"
    }
    /// The username.
    package let username: Username
    /// The password; never logged or stored in clear.
    package let password: String
    /// The app installation: a new login from the same client ends its previous session.
    package let clientID: ClientID
    /// Creates the message from its members.
    package init(username: Username, password: String, clientID: ClientID) {
        self.username = username
        self.password = password
        self.clientID = clientID
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        username = try Username(reader.string(.username))
        password = try reader.string(.password)
        clientID = try ClientID(reader.string(.clientID))
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.username, username.rawValue)
        object.add(.password, password)
        object.add(.clientID, clientID.rawValue)
    }
}

/// `POST /v1/sessions/refresh` request.
package struct RefreshRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "RefreshRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case refreshToken = "refresh_token" }
    /// The refresh token.
    package let refreshToken: String
    /// Creates the message from its members.
    package init(refreshToken: String) { self.refreshToken = refreshToken }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        refreshToken = try reader.string(.refreshToken)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.refreshToken, refreshToken)
    }
}

/// The tokens of a session: the response of every login and of refresh.
package struct TokenResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Tokens"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case sessionID = "session_id"
        case userID = "user_id"
    }
    /// Opaque bearer token for `Authorization: Bearer …`.
    package let accessToken: String
    /// Opaque single-use token for `POST /v1/sessions/refresh`.
    package let refreshToken: String
    /// `"Bearer"`.
    package let tokenType: String
    /// Seconds until the access token expires.
    package let expiresIn: Int
    /// The session's opaque id.
    package let sessionID: String
    /// The user's opaque id.
    package let userID: String
    /// Creates the message from its members.
    package init(
        accessToken: String, refreshToken: String, tokenType: String = "Bearer", expiresIn: Int,
        sessionID: String, userID: String
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.sessionID = sessionID
        self.userID = userID
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        accessToken = try reader.string(.accessToken)
        refreshToken = try reader.string(.refreshToken)
        tokenType = try reader.string(.tokenType)
        expiresIn = try reader.integer(.expiresIn)
        sessionID = try reader.string(.sessionID)
        userID = try reader.string(.userID)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.accessToken, accessToken)
        object.add(.refreshToken, refreshToken)
        object.add(.tokenType, tokenType)
        object.add(.expiresIn, expiresIn)
        object.add(.sessionID, sessionID)
        object.add(.userID, userID)
    }
}

/// `GET /v1/me` response.
public struct MeResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Me"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case userID = "user_id"
        case username
        case sessionID = "session_id"
        case authMethod = "auth_method"
        case authTime = "auth_time"
        case stepUpExpiresAt = "step_up_expires_at"
    }
    /// The user's opaque id.
    public let userID: String
    /// The username.
    public let username: String
    /// The session's opaque id.
    public let sessionID: String
    /// How the session was opened.
    public let authMethod: AuthMethod
    /// When the user last authenticated in this session (password or device signature).
    public let authTime: Date
    /// Until when this session may do what needs a recent password login (binding a device):
    /// ``authTime`` plus the server's step-up window for a password session, nil for a device
    /// session, which never may.
    public let stepUpExpiresAt: Date?
    /// Creates the message from its members.
    public init(
        userID: String, username: String, sessionID: String, authMethod: AuthMethod, authTime: Date,
        stepUpExpiresAt: Date?
    ) {
        self.userID = userID
        self.username = username
        self.sessionID = sessionID
        self.authMethod = authMethod
        self.authTime = authTime
        self.stepUpExpiresAt = stepUpExpiresAt
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        userID = try reader.string(.userID)
        username = try reader.string(.username)
        sessionID = try reader.string(.sessionID)
        authMethod = try reader.enumeration(.authMethod, as: AuthMethod.self)
        authTime = try reader.timestamp(.authTime)
        stepUpExpiresAt = try reader.optionalTimestamp(.stepUpExpiresAt)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.userID, userID)
        object.add(.username, username)
        object.add(.sessionID, sessionID)
        object.add(.authMethod, authMethod)
        object.add(.authTime, authTime)
        object.add(.stepUpExpiresAt, stepUpExpiresAt)
    }
}

/// `POST /v1/devices` request.
package struct BindDeviceRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "BindDeviceRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case publicKey = "public_key"
        case name
        case keyProtection = "key_protection"
        case appAttest = "app_attest"
    }
    /// The P-256 public key as SubjectPublicKeyInfo DER (base64url on the wire).
    package let publicKey: Data
    /// A display name, 1–64 characters.
    package let name: String
    /// Where the device key lives.
    package let keyProtection: KeyProtection
    /// An App Attest attestation vouching for this binding, or nil.
    package let appAttest: AppAttestBinding?
    /// Creates the message from its members.
    package init(
        publicKey: Data, name: String, keyProtection: KeyProtection, appAttest: AppAttestBinding? = nil
    ) {
        self.publicKey = publicKey
        self.name = name
        self.keyProtection = keyProtection
        self.appAttest = appAttest
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        publicKey = try reader.bytes(.publicKey)
        name = try reader.string(.name)
        keyProtection = try reader.enumeration(.keyProtection, as: KeyProtection.self)
        appAttest =
            reader.has(.appAttest)
            ? try AppAttestBinding(json: reader.value(.appAttest), path: Member.appAttest.rawValue) : nil
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.publicKey, publicKey)
        object.add(.name, name)
        object.add(.keyProtection, keyProtection)
        object.add(.appAttest, appAttest?.json ?? .null)
    }
}

/// `POST /v1/devices` response (201).
package struct BindDeviceResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "BindDeviceResponse"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case deviceID = "device_id" }
    /// The device's opaque id.
    package let deviceID: String
    /// Creates the message from its members.
    package init(deviceID: String) { self.deviceID = deviceID }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        deviceID = try reader.string(.deviceID)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.deviceID, deviceID)
    }
}

/// One device in `GET /v1/devices`.
public struct DeviceInfo: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Device"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case deviceID = "device_id"
        case name
        case keyProtection = "key_protection"
        case status
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
        case attested
    }
    /// The device's opaque id.
    public let deviceID: String
    /// The device's display name.
    public let name: String
    /// Where the device key lives.
    public let keyProtection: KeyProtection
    /// The state.
    public let status: DeviceStatus
    /// When it was created.
    public let createdAt: Date
    /// When the device last signed successfully, or nil.
    public let lastUsedAt: Date?
    /// Whether an App Attest attestation vouched for the binding.
    public let attested: Bool
    /// Creates the message from its members.
    public init(
        deviceID: String, name: String, keyProtection: KeyProtection, status: DeviceStatus, createdAt: Date,
        lastUsedAt: Date?, attested: Bool = false
    ) {
        self.deviceID = deviceID
        self.name = name
        self.keyProtection = keyProtection
        self.status = status
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.attested = attested
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        deviceID = try reader.string(.deviceID)
        name = try reader.string(.name)
        keyProtection = try reader.enumeration(.keyProtection, as: KeyProtection.self)
        status = try reader.enumeration(.status, as: DeviceStatus.self)
        createdAt = try reader.timestamp(.createdAt)
        lastUsedAt = try reader.optionalTimestamp(.lastUsedAt)
        attested = try reader.bool(.attested)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.deviceID, deviceID)
        object.add(.name, name)
        object.add(.keyProtection, keyProtection)
        object.add(.status, status)
        object.add(.createdAt, createdAt)
        object.add(.lastUsedAt, lastUsedAt)
        object.add(.attested, .bool(attested))
    }
}

/// `GET /v1/devices` response.
package struct DeviceListResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "DeviceList"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case devices }
    /// The caller's devices, oldest first.
    package let devices: [DeviceInfo]
    /// Creates the message from its members.
    package init(devices: [DeviceInfo]) { self.devices = devices }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        devices = try reader.array(.devices, each: DeviceInfo.init(json:))
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.devices, .array(devices.map(\.json)))
    }
}

/// `POST /v1/challenges` request.
package struct ChallengeRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "ChallengeRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case deviceID = "device_id" }
    /// The device's opaque id.
    package let deviceID: String
    /// Creates the message from its members.
    package init(deviceID: String) { self.deviceID = deviceID }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        deviceID = try reader.string(.deviceID)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.deviceID, deviceID)
    }
}

/// `POST /v1/challenges` response (201): the payload to sign for a device login.
public struct ChallengeResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Challenge"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case challengeID = "challenge_id"
        case payload
        case expiresAt = "expires_at"
    }
    /// The challenge's opaque id.
    public let challengeID: String
    /// The exact ``SigningPayload`` bytes to sign (base64url on the wire).
    public let payload: Data
    /// When the payload stops being accepted.
    public let expiresAt: Date
    /// Creates the message from its members.
    public init(challengeID: String, payload: Data, expiresAt: Date) {
        self.challengeID = challengeID
        self.payload = payload
        self.expiresAt = expiresAt
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        challengeID = try reader.string(.challengeID)
        payload = try reader.bytes(.payload)
        expiresAt = try reader.timestamp(.expiresAt)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.challengeID, challengeID)
        object.add(.payload, payload)
        object.add(.expiresAt, expiresAt)
    }
}

/// `POST /v1/sessions/device` request.
package struct DeviceLoginRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "DeviceLoginRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case challengeID = "challenge_id"
        case signature
        case appAttestAssertion = "app_attest_assertion"
    }
    /// The challenge's opaque id.
    package let challengeID: String
    /// ECDSA P-256 SHA-256 signature of the payload, DER (base64url on the wire).
    package let signature: Data
    /// For a device bound with App Attest: an assertion of its App Attest key over the payload
    /// bytes (what `generateAssertion(_:clientDataHash:)` returns for SHA-256 of the payload), or
    /// nil.
    package let appAttestAssertion: Data?
    /// Creates the message from its members.
    package init(challengeID: String, signature: Data, appAttestAssertion: Data? = nil) {
        self.challengeID = challengeID
        self.signature = signature
        self.appAttestAssertion = appAttestAssertion
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        challengeID = try reader.string(.challengeID)
        signature = try reader.bytes(.signature)
        appAttestAssertion = try reader.optionalBytes(.appAttestAssertion)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.challengeID, challengeID)
        object.add(.signature, signature)
        object.add(.appAttestAssertion, appAttestAssertion)
    }
}

/// `POST /v1/approvals` request.
package struct CreateApprovalRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "CreateApprovalRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case deviceID = "device_id"
        case action
    }
    /// The device that is asked to sign.
    package let deviceID: String
    /// The action to approve.
    package let action: ApprovalAction
    /// Creates the message from its members.
    package init(deviceID: String, action: ApprovalAction) {
        self.deviceID = deviceID
        self.action = action
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        deviceID = try reader.string(.deviceID)
        action = try ApprovalAction(json: reader.value(.action))
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.deviceID, deviceID)
        object.add(.action, action.json)
    }
}

/// `POST /v1/approvals` response (201): the payload to sign.
public struct ApprovalChallengeResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "ApprovalChallenge"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case approvalID = "approval_id"
        case payload
        case expiresAt = "expires_at"
    }
    /// The approval's opaque id.
    public let approvalID: String
    /// The exact ``SigningPayload`` bytes to sign (base64url on the wire).
    public let payload: Data
    /// When the payload stops being accepted.
    public let expiresAt: Date
    /// Creates the message from its members.
    public init(approvalID: String, payload: Data, expiresAt: Date) {
        self.approvalID = approvalID
        self.payload = payload
        self.expiresAt = expiresAt
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        approvalID = try reader.string(.approvalID)
        payload = try reader.bytes(.payload)
        expiresAt = try reader.timestamp(.expiresAt)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.approvalID, approvalID)
        object.add(.payload, payload)
        object.add(.expiresAt, expiresAt)
    }
}

/// One approval waiting for the user in `GET /v1/approvals?status=pending`: what its device
/// must sign. It carries no separate description of the action: the app shows what the payload
/// says (the SDK's `TransactionApproval.pending()` parses and checks it), nothing else.
public struct PendingApprovalInfo: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PendingApproval"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case approvalID = "approval_id"
        case deviceID = "device_id"
        case payload
        case createdAt = "created_at"
        case expiresAt = "expires_at"
        case bindingMessage = "binding_message"
        case clientName = "client_name"
    }
    /// The approval's opaque id.
    public let approvalID: String
    /// The device that must sign it.
    public let deviceID: String
    /// The exact ``SigningPayload`` bytes to sign (base64url on the wire).
    public let payload: Data
    /// When it was created.
    public let createdAt: Date
    /// When the payload stops being accepted.
    public let expiresAt: Date
    /// The message the requesting system shows beside its request (CIBA's `binding_message`), so
    /// that the user can tell it is the one they started; not part of the signed payload.
    public let bindingMessage: String?
    /// The name of the OAuth client that asked for it through CIBA, as its operator registered
    /// it; nil for an approval the app asked for.
    public let clientName: String?
    /// Creates the message from its members.
    public init(
        approvalID: String, deviceID: String, payload: Data, createdAt: Date, expiresAt: Date,
        bindingMessage: String? = nil, clientName: String? = nil
    ) {
        self.approvalID = approvalID
        self.deviceID = deviceID
        self.payload = payload
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.bindingMessage = bindingMessage
        self.clientName = clientName
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        approvalID = try reader.string(.approvalID)
        deviceID = try reader.string(.deviceID)
        payload = try reader.bytes(.payload)
        createdAt = try reader.timestamp(.createdAt)
        expiresAt = try reader.timestamp(.expiresAt)
        bindingMessage = try reader.optionalString(.bindingMessage)
        clientName = try reader.optionalString(.clientName)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.approvalID, approvalID)
        object.add(.deviceID, deviceID)
        object.add(.payload, payload)
        object.add(.createdAt, createdAt)
        object.add(.expiresAt, expiresAt)
        object.add(.bindingMessage, bindingMessage)
        object.add(.clientName, clientName)
    }
}

/// `GET /v1/approvals?status=pending` response.
package struct PendingApprovalListResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PendingApprovalList"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case approvals }
    /// The caller's approvals still waiting, newest first.
    package let approvals: [PendingApprovalInfo]
    /// Creates the message from its members.
    package init(approvals: [PendingApprovalInfo]) { self.approvals = approvals }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        approvals = try reader.array(.approvals, each: PendingApprovalInfo.init(json:))
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.approvals, .array(approvals.map(\.json)))
    }
}

/// `POST /v1/approvals/{id}/confirm` request.
package struct ConfirmApprovalRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "ConfirmApprovalRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case signature
        case appAttestAssertion = "app_attest_assertion"
    }
    /// ECDSA P-256 SHA-256 signature of the payload, DER (base64url on the wire).
    package let signature: Data
    /// For a device bound with App Attest: an assertion of its App Attest key over the payload
    /// bytes, or nil.
    package let appAttestAssertion: Data?
    /// Creates the message from its members.
    package init(signature: Data, appAttestAssertion: Data? = nil) {
        self.signature = signature
        self.appAttestAssertion = appAttestAssertion
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        signature = try reader.bytes(.signature)
        appAttestAssertion = try reader.optionalBytes(.appAttestAssertion)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.signature, signature)
        object.add(.appAttestAssertion, appAttestAssertion)
    }
}

/// `POST /v1/approvals/{id}/confirm` response (200).
public struct ConfirmApprovalResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "ConfirmApprovalResponse"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case status }
    /// `approved`.
    public let status: ApprovalStatus
    /// Creates the message from its members.
    public init(status: ApprovalStatus = .approved) { self.status = status }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        status = try reader.enumeration(.status, as: ApprovalStatus.self)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.status, status)
    }
}

/// `GET /v1/approvals/{id}` response.
public struct ApprovalResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Approval"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case approvalID = "approval_id"
        case status
        case deviceID = "device_id"
        case action
        case createdAt = "created_at"
        case expiresAt = "expires_at"
        case decidedAt = "decided_at"
        case receipt
    }
    /// The approval's opaque id.
    public let approvalID: String
    /// The state.
    public let status: ApprovalStatus
    /// The device's opaque id.
    public let deviceID: String
    /// The action to approve.
    public let action: ApprovalAction
    /// When it was created.
    public let createdAt: Date
    /// When the payload stops being accepted.
    public let expiresAt: Date
    /// When it was approved or failed; nil while pending or expired.
    public let decidedAt: Date?
    /// The receipt of an approved approval: a compact JWS (`typ: keybound-receipt+jwt`) that
    /// anyone can verify offline against the issuer's JWK Set (KeyboundVerifier's
    /// `ReceiptVerifier`, `keybound receipt verify`; docs/approvals.md). nil unless approved, and
    /// on a server without an issuer.
    public let receipt: String?
    /// Creates the message from its members.
    public init(
        approvalID: String, status: ApprovalStatus, deviceID: String, action: ApprovalAction, createdAt: Date,
        expiresAt: Date, decidedAt: Date?, receipt: String? = nil
    ) {
        self.approvalID = approvalID
        self.status = status
        self.deviceID = deviceID
        self.action = action
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.decidedAt = decidedAt
        self.receipt = receipt
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        approvalID = try reader.string(.approvalID)
        status = try reader.enumeration(.status, as: ApprovalStatus.self)
        deviceID = try reader.string(.deviceID)
        action = try ApprovalAction(json: reader.value(.action))
        createdAt = try reader.timestamp(.createdAt)
        expiresAt = try reader.timestamp(.expiresAt)
        decidedAt = try reader.optionalTimestamp(.decidedAt)
        receipt = try reader.optionalString(.receipt)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.approvalID, approvalID)
        object.add(.status, status)
        object.add(.deviceID, deviceID)
        object.add(.action, action.json)
        object.add(.createdAt, createdAt)
        object.add(.expiresAt, expiresAt)
        object.add(.decidedAt, decidedAt)
        object.add(.receipt, receipt)
    }
}

/// One audit event in `GET /v1/audit`. Never contains a secret, token or signature.
///
/// Repeated refusals of one kind for one target (failed logins, lockouts) fold into one event:
/// ``count`` says how many, ``time`` is the first and ``lastTime`` the latest, ``clientAddress``
/// the first one's client and ``lastClientAddress`` the latest one's.
public struct AuditEvent: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "AuditEvent"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case time, type, method
        case userID = "user_id"
        case deviceID = "device_id"
        case sessionID = "session_id"
        case clientAddress = "client_address"
        case count
        case lastTime = "last_time"
        case lastClientAddress = "last_client_address"
        case actorID = "actor_id"
        case detail
    }
    /// When it happened; for a folded event, the first time.
    public let time: Date
    /// What happened. A newer server may send types this version does not know (see
    /// ``AuditEventType``).
    public let type: AuditEventType
    /// How the actor authenticated, for logins, their refusals and accounts an operator
    /// created; otherwise nil.
    public let method: AuditMethod?
    /// The user's opaque id.
    public let userID: String?
    /// The device's opaque id.
    public let deviceID: String?
    /// The session's opaque id.
    public let sessionID: String?
    /// The client's network address, or nil (an operator on the server's machine); for a folded
    /// event, the first one's.
    public let clientAddress: String?
    /// How many times it happened (at least 1).
    public let count: Int
    /// When it last happened; equal to ``time`` when ``count`` is 1.
    public let lastTime: Date
    /// The client address of the latest occurrence; equal to ``clientAddress`` when ``count`` is
    /// 1, and for events folded before the server kept both.
    public let lastClientAddress: String?
    /// The user id of the administrator who did it on the operator console; nil for what the
    /// user (or the server) did.
    public let actorID: String?
    /// What an administrator's change was about (`webhook whk_… removed`), for changes that name
    /// no user; otherwise nil.
    public let detail: String?
    /// Creates the message from its members.
    /// - Parameters:
    ///   - lastTime: nil: `time`.
    ///   - lastClientAddress: nil: `clientAddress`.
    public init(
        time: Date, type: AuditEventType, method: AuditMethod?, userID: String?, deviceID: String?,
        sessionID: String?, clientAddress: String?, count: Int = 1, lastTime: Date? = nil,
        lastClientAddress: String? = nil, actorID: String? = nil, detail: String? = nil
    ) {
        self.actorID = actorID
        self.detail = detail
        self.time = time
        self.type = type
        self.method = method
        self.userID = userID
        self.deviceID = deviceID
        self.sessionID = sessionID
        self.clientAddress = clientAddress
        self.count = count
        self.lastTime = lastTime ?? time
        self.lastClientAddress = lastClientAddress ?? clientAddress
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        time = try reader.timestamp(.time)
        type = try reader.vocabulary(.type, as: AuditEventType.self)
        method = try reader.optionalVocabulary(.method, as: AuditMethod.self)
        userID = try reader.optionalString(.userID)
        deviceID = try reader.optionalString(.deviceID)
        sessionID = try reader.optionalString(.sessionID)
        clientAddress = try reader.optionalString(.clientAddress)
        count = try reader.integer(.count)
        lastTime = try reader.timestamp(.lastTime)
        lastClientAddress = try reader.optionalString(.lastClientAddress)
        actorID = try reader.optionalString(.actorID)
        detail = try reader.optionalString(.detail)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.time, time)
        object.add(.type, type)
        object.add(.method, method)
        object.add(.userID, userID)
        object.add(.deviceID, deviceID)
        object.add(.sessionID, sessionID)
        object.add(.clientAddress, clientAddress)
        object.add(.count, count)
        object.add(.lastTime, lastTime)
        object.add(.lastClientAddress, lastClientAddress)
        object.add(.actorID, actorID)
        object.add(.detail, detail)
    }
}

/// `GET /v1/audit` response: the caller's own events, newest first.
package struct AuditListResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "AuditList"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case events }
    /// The events, newest first.
    package let events: [AuditEvent]
    /// Creates the message from its members.
    package init(events: [AuditEvent]) { self.events = events }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        events = try reader.array(.events, each: AuditEvent.init(json:))
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.events, .array(events.map(\.json)))
    }
}
