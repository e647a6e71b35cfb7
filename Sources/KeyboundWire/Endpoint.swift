import Foundation

/// The HTTP methods Server API v1 uses.
package enum HTTPMethod: String, Sendable, CaseIterable {
    /// `GET`.
    case get = "GET"
    /// `POST`.
    case post = "POST"
    /// `DELETE`.
    case delete = "DELETE"
}

/// What every ``Endpoint`` says of itself, whatever its message types: the route table, the
/// OpenAPI check and the clients read this.
package protocol EndpointDescription: Sendable {
    /// The method.
    var method: HTTPMethod { get }
    /// The path, with `{name}` for each parameter (`/v1/devices/{id}`).
    var template: String { get }
    /// The status of a success.
    var status: Int { get }
    /// The OpenAPI schema of the request body; nil when the request has none.
    var requestSchema: String? { get }
    /// The OpenAPI schema of the success body; nil when the answer has none (204).
    var responseSchema: String? { get }
}

extension EndpointDescription {
    /// The path with the template's parameters replaced by `values`, in their order.
    /// - Precondition: exactly one value per parameter, each a valid path segment (the callers pass
    ///   ids of the server's id grammar, which has no `/`).
    package func path(_ values: String...) -> String { path(values) }

    /// The path with the template's parameters replaced by `values`, in their order.
    /// - Precondition: as for ``path(_:)-(String...)``.
    package func path(_ values: [String]) -> String {
        var remaining = values[...]
        let segments = template.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            guard segment.hasPrefix("{") else { return String(segment) }
            guard let value = remaining.popFirst() else {
                preconditionFailure("\(template) needs more values")
            }
            precondition(!value.contains("/"), "a path parameter is one segment")
            return value
        }
        precondition(remaining.isEmpty, "\(template) has fewer parameters than values")
        return segments.joined(separator: "/")
    }
}

/// One route of Server API v1, declared once (``API``): its method, path and success status, the
/// message its request carries and the one it answers with. The server's router, the SDK's
/// `KeyboundClient`, the tests and the bench all take the route from here, so none of them can
/// send or decode another message than the other side, and a test holds every declaration to
/// docs/openapi.yaml.
package struct Endpoint<Request: WireMessage, Response: WireMessage>: EndpointDescription {
    package let method: HTTPMethod
    package let template: String
    package let status: Int

    /// - Parameters:
    ///   - method: the method.
    ///   - template: the path, `{name}` for each parameter.
    ///   - status: the status of a success (200 unless given).
    package init(_ method: HTTPMethod, _ template: String, status: Int = 200) {
        self.method = method
        self.template = template
        self.status = status
    }

    package var requestSchema: String? { Request.self == NoBody.self ? nil : Request.schemaName }
    package var responseSchema: String? { Response.self == NoBody.self ? nil : Response.schemaName }
}

/// The body of a request that sends none, or of a success that answers none (204).
package struct NoBody: WireMessage, Hashable {
    package static let schemaName = ""
    /// Nothing.
    package init() {}
    package init(json: JSONValue) throws(WireFailure) {}
    package var json: JSONValue { .object([]) }
}

/// The routes of Server API v1, in path order (docs/openapi.yaml documents each).
package enum API {
    /// Every route, in path order.
    package static let all: [any EndpointDescription] = [
        health, createAccount, createAppAttestChallenge, listApprovals, createApproval, approvalStatus,
        confirmApproval, denyApproval, audit, createChallenge, listDevices, bindDevice, revokeDevice, me,
        oauthAuthorize, listPasskeys,
        removePasskey, logout,
        deviceLogin, passwordLogin, refresh, passkeyLoginOptions, passkeyLoginVerify,
        passkeyRegistrationOptions, passkeyRegistrationVerify,
    ]

    /// `GET /healthz`: the database answers.
    package static let health = Endpoint<NoBody, HealthResponse>(.get, "/healthz")
    /// Sign-up with a password.
    package static let createAccount = Endpoint<CreateAccountRequest, CreateAccountResponse>(
        .post, "/v1/accounts", status: 201)
    /// The challenge of the caller's next attested device binding.
    package static let createAppAttestChallenge = Endpoint<NoBody, AppAttestChallengeResponse>(
        .post, "/v1/app-attest/challenges", status: 201)
    /// The caller's approvals waiting for a decision (`?status=pending`).
    package static let listApprovals = Endpoint<NoBody, PendingApprovalListResponse>(.get, "/v1/approvals")
    /// Asks the caller's device to approve an action.
    package static let createApproval = Endpoint<CreateApprovalRequest, ApprovalChallengeResponse>(
        .post, "/v1/approvals", status: 201)
    /// An approval's status.
    package static let approvalStatus = Endpoint<NoBody, ApprovalResponse>(.get, "/v1/approvals/{id}")
    /// The device's signature over an approval's payload.
    package static let confirmApproval = Endpoint<ConfirmApprovalRequest, ConfirmApprovalResponse>(
        .post, "/v1/approvals/{id}/confirm")
    /// The user refuses a pending approval.
    package static let denyApproval = Endpoint<NoBody, ApprovalResponse>(.post, "/v1/approvals/{id}/deny")
    /// The caller's audit events.
    package static let audit = Endpoint<NoBody, AuditListResponse>(.get, "/v1/audit")
    /// A device-login challenge.
    package static let createChallenge = Endpoint<ChallengeRequest, ChallengeResponse>(
        .post, "/v1/challenges", status: 201)
    /// The caller's devices.
    package static let listDevices = Endpoint<NoBody, DeviceListResponse>(.get, "/v1/devices")
    /// Binds a device key to the caller's account.
    package static let bindDevice = Endpoint<BindDeviceRequest, BindDeviceResponse>(
        .post, "/v1/devices", status: 201)
    /// Revokes one of the caller's devices.
    package static let revokeDevice = Endpoint<NoBody, NoBody>(.delete, "/v1/devices/{id}", status: 204)
    /// The caller's session.
    package static let me = Endpoint<NoBody, MeResponse>(.get, "/v1/me")
    /// Completes an OAuth authorization request for the caller (docs/oauth.md): the sign-in
    /// page calls it, and so can a native app holding a session.
    package static let oauthAuthorize = Endpoint<OAuthAuthorizeRequest, OAuthAuthorizeResponse>(
        .post, "/v1/oauth/authorize")
    /// The caller's passkeys.
    package static let listPasskeys = Endpoint<NoBody, PasskeyListResponse>(.get, "/v1/passkeys")
    /// Removes one of the caller's passkeys.
    package static let removePasskey = Endpoint<NoBody, NoBody>(.delete, "/v1/passkeys/{id}", status: 204)
    /// Logout.
    package static let logout = Endpoint<NoBody, NoBody>(.delete, "/v1/sessions/current", status: 204)
    /// Login with a signed device-login challenge.
    package static let deviceLogin = Endpoint<DeviceLoginRequest, TokenResponse>(.post, "/v1/sessions/device")
    /// Login with a password.
    package static let passwordLogin = Endpoint<PasswordLoginRequest, TokenResponse>(
        .post, "/v1/sessions/password")
    /// Rotates a refresh token.
    package static let refresh = Endpoint<RefreshRequest, TokenResponse>(.post, "/v1/sessions/refresh")
    /// Starts a passkey sign-in.
    package static let passkeyLoginOptions = Endpoint<PasskeyLoginOptionsRequest, PasskeyRequestOptions>(
        .post, "/v1/webauthn/login/options")
    /// Finishes a passkey sign-in.
    package static let passkeyLoginVerify = Endpoint<PasskeyAssertion, PasskeyLoginResult>(
        .post, "/v1/webauthn/login/verify")
    /// Starts a passkey sign-up, or adding a passkey to the caller's account.
    package static let passkeyRegistrationOptions = Endpoint<
        PasskeyRegistrationOptionsRequest, PasskeyCreationOptions
    >(.post, "/v1/webauthn/register/options")
    /// Finishes a passkey registration.
    package static let passkeyRegistrationVerify = Endpoint<PasskeyRegistration, PasskeyRegistrationResult>(
        .post, "/v1/webauthn/register/verify")
}
