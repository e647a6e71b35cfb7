import Foundation
import KeyboundWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The typed client of the Keybound server API (v1).
///
/// It holds the current session's tokens, attaches the access token to authenticated calls,
/// and refreshes it automatically: however many calls find it expired at once, exactly one
/// refresh request goes out and all of them wait for it. Every failure is a ``KeyboundError``
/// (`server` with the problem's code, `throttled`, `sessionExpired`, `network`).
///
/// Given a ``DPoPKey`` (``BiometricLogin`` makes one), every login and refresh carries a DPoP
/// proof (RFC 9449) by it; a server that supports DPoP binds the session to the key
/// (``Session/isDPoPBound``), and the client then sends each request's access token as
/// `Authorization: DPoP` with a fresh proof, answering the server's nonce (`DPoP-Nonce`) as it
/// goes. A server without DPoP ignores the proofs and opens bearer sessions, which work as before.
///
/// Every `POST` carries an `Idempotency-Key`, and a request whose answer was lost (a dropped
/// connection, a 503 in a database failover) is sent again with the same key (``RetryPolicy``):
/// the server answers a repeated POST with its first answer, so a retried sign-up or login
/// creates one account or session, not two.
///
/// ```swift
/// let client = KeyboundClient(baseURL: URL(string: "https://api.example.com")!)
/// try await client.loginWithPassword(username: "ada", password: password, clientID: installID)
/// let me = try await client.me()
/// ```
public actor KeyboundClient {
    /// The session the client holds. Its description never shows the tokens.
    public struct Session: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        /// The short-lived bearer token the client sends as `Authorization: Bearer …`. A secret:
        /// apps rarely need it, since every ``KeyboundClient`` call attaches and refreshes it.
        public let accessToken: String
        /// The single-use token that renews the session (`POST /v1/sessions/refresh`). A secret:
        /// the server rotates it on every refresh, and in token mode ``BiometricLogin`` keeps
        /// the newest one in a biometric-bound item (see ``KeyboundClient/onTokensChanged(_:)``).
        public let refreshToken: String
        /// The session's opaque id on the server; not a secret, safe to log.
        public let sessionID: String
        /// The logged-in user's opaque id on the server; not a secret.
        public let userID: String
        /// When the access token expires, by the client's clock.
        public let accessTokenExpiresAt: Date
        /// Whether the server bound the session to the client's ``DPoPKey`` (`token_type` DPoP):
        /// its tokens then work only with proofs by that key, which stays on this device.
        public let isDPoPBound: Bool

        /// The session and user ids, with the tokens redacted, so a session can be logged.
        public var description: String {
            "Session(sessionID: \(sessionID), userID: \(userID), tokens: <redacted>)"
        }
        /// The same as ``description``: the tokens stay redacted in `debugPrint` too.
        public var debugDescription: String { description }
        /// Shows only the session and user ids to `dump` and debuggers, never the tokens.
        public var customMirror: Mirror {
            Mirror(self, children: ["sessionID": sessionID, "userID": userID], displayStyle: .struct)
        }
    }

    /// The server's root URL.
    public let baseURL: URL
    private let urlSession: URLSession
    private let clock: Clock
    private var session: Session?
    private var refreshInFlight: Task<Session, any Error>?
    private var tokenObservers: [@Sendable (Session?) async -> Void] = []
    /// The key that new sessions are bound to (``bindSessions(to:)``).
    private var dpopKey: DPoPKey?
    /// The key the current session is bound to, when it is.
    private var sessionKey: DPoPKey?
    /// The public JWKs of the keys used so far, by name (reading one from a vault is a Keychain call).
    private var dpopJWKs: [ItemName: ECPublicJWK] = [:]
    /// The latest `DPoP-Nonce` the server sent: the next proof names it.
    private var dpopNonce: String?
    /// When requests are sent again.
    private let retryPolicy: RetryPolicy

    /// A client without a session: log in, or resume from a stored refresh token, before any
    /// authenticated call.
    ///
    /// - Parameters:
    ///   - baseURL: the server's root, e.g. `https://api.example.com`.
    ///   - urlSession: the URL session to use.
    ///   - clock: time, to know when the access token expires and to date DPoP proofs.
    ///   - dpopKey: the key to bind new sessions to (see ``bindSessions(to:)``); nil for bearer
    ///     sessions.
    ///   - retryPolicy: when a request whose answer was lost, or that found the server
    ///     unavailable, is sent again (GETs, and POSTs with their `Idempotency-Key`).
    public init(
        baseURL: URL, urlSession: URLSession = .shared, clock: Clock = .system, dpopKey: DPoPKey? = nil,
        retryPolicy: RetryPolicy = .standard
    ) {
        self.baseURL = baseURL
        self.urlSession = urlSession
        self.clock = clock
        self.dpopKey = dpopKey
        self.retryPolicy = retryPolicy
    }

    /// The current session, if any.
    public var currentSession: Session? { session }

    /// Binds the sessions that later logins, sign-ups and resumed refresh tokens open to `key`
    /// (DPoP, RFC 9449), where the server supports it; nil opens bearer sessions again. The
    /// session held now keeps the key it has.
    public func bindSessions(to key: DPoPKey?) {
        dpopKey = key
    }

    /// Adds an observer called after every change of tokens (login, refresh, logout), so the app
    /// can keep the rotated refresh token in its protected item. Observers stay for the client's
    /// life: register each once.
    public func onTokensChanged(_ observer: @escaping @Sendable (Session?) async -> Void) {
        tokenObservers.append(observer)
    }

    private func notifyTokensChanged(_ session: Session?) async {
        for observer in tokenObservers { await observer(session) }
    }

    // MARK: - Accounts and sessions

    /// Creates an account. Returns its user id.
    /// - Throws: ``KeyboundError/invalidInput`` for a username outside the grammar of ``Username``
    ///   (checked here, before anything is sent).
    public func createAccount(username: String, password: String) async throws -> String {
        let request = CreateAccountRequest(
            username: try Self.username(username), password: password)
        let response: CreateAccountResponse = try await send(API.createAccount, request)
        return response.userID
    }

    /// Logs in with a password and holds the new session.
    /// - Throws: ``KeyboundError/invalidInput`` for a username or client id outside the grammar
    ///   of ``Username`` or ``ClientID`` (checked here, before anything is sent).
    @discardableResult
    public func loginWithPassword(username: String, password: String, clientID: String) async throws
        -> Session
    {
        let request = PasswordLoginRequest(
            username: try Self.username(username), password: password, clientID: try Self.clientID(clientID))
        return try await logIn(API.passwordLogin, request)
    }

    /// Opens a session from a stored refresh token (biometric login, token mode). A session
    /// bound to a DPoP key resumes only with that key as the client's (``bindSessions(to:)``).
    @discardableResult
    public func resume(refreshToken: String) async throws -> Session {
        try await logIn(API.refresh, RefreshRequest(refreshToken: refreshToken))
    }

    /// Logs out: the server ends the session and the client forgets it.
    public func logout() async throws {
        defer { session = nil }
        guard session != nil else { return }
        _ = try await authorized(API.logout)
        await notifyTokensChanged(nil)
    }

    /// Forgets the session locally (for example when the app locks past its validity).
    public func forgetSession() async {
        session = nil
        await notifyTokensChanged(nil)
    }

    /// Who is logged in.
    public func me() async throws -> MeResponse {
        try await authorized(API.me)
    }

    // MARK: - Devices and device login

    /// Registers a device public key. Needs a password login within the server's step-up window
    /// (``MeResponse/stepUpExpiresAt`` says until when).
    ///
    /// - Parameters:
    ///   - publicKey: the device key, SubjectPublicKeyInfo DER.
    ///   - name: the name the user sees in their device list.
    ///   - keyProtection: where the key lives.
    ///   - appAttestation: an App Attest key's id and its attestation over
    ///     ``appAttestChallenge()`` followed by `publicKey` (``BiometricLogin`` makes it when given
    ///     an ``AppAttestService``); the device is then listed as attested. Servers started with
    ///     `--require-app-attest` refuse a binding without one.
    /// - Returns: the device's id.
    public func bindDevice(
        publicKey: Data, name: String, keyProtection: KeyProtection,
        appAttestation: (keyID: Data, attestation: Data)? = nil
    ) async throws -> String {
        let request = BindDeviceRequest(
            publicKey: publicKey, name: name, keyProtection: keyProtection,
            appAttest: appAttestation.map { AppAttestBinding(keyID: $0.keyID, attestation: $0.attestation) })
        let response: BindDeviceResponse = try await authorized(API.bindDevice, request)
        return response.deviceID
    }

    /// A fresh challenge for the App Attest attestation of this session's next device binding
    /// (it replaces any earlier one).
    /// - Returns: the 32 challenge bytes; the attestation covers them followed by the device's
    ///   public key.
    public func appAttestChallenge() async throws -> Data {
        let response: AppAttestChallengeResponse = try await authorized(
            API.createAppAttestChallenge)
        return response.challenge
    }

    /// The user's devices.
    public func devices() async throws -> [DeviceInfo] {
        let response: DeviceListResponse = try await authorized(API.listDevices)
        return response.devices
    }

    /// Revokes a device (its sessions end).
    public func revokeDevice(_ deviceID: String) async throws {
        _ = try await authorized(API.revokeDevice, parameters: [try pathSegment(deviceID)])
    }

    /// Asks for a login challenge for a bound device.
    public func loginChallenge(deviceID: String) async throws -> ChallengeResponse {
        try await send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
    }

    /// Completes a device-key login and holds the new session.
    ///
    /// - Parameters:
    ///   - challengeID: the challenge of ``loginChallenge(deviceID:)``.
    ///   - signature: the device key's signature of the challenge's payload bytes (DER).
    ///   - appAttestAssertion: for a device bound with App Attest, its App Attest key's assertion
    ///     over the payload bytes; servers started with `--require-app-attest` refuse an attested
    ///     device's login without one.
    @discardableResult
    public func loginWithDevice(challengeID: String, signature: Data, appAttestAssertion: Data? = nil)
        async throws -> Session
    {
        let request = DeviceLoginRequest(
            challengeID: challengeID, signature: signature, appAttestAssertion: appAttestAssertion)
        return try await logIn(API.deviceLogin, request)
    }

    // MARK: - Passkeys

    /// Starts a passkey sign-up: the server checks that `username` is free and says what the
    /// authenticator must create. Sent without the session's token, whatever session the client holds.
    ///
    /// - Parameters:
    ///   - username: the new account's name.
    ///   - displayName: the name the authenticator shows (default: the username).
    ///   - clientID: identifies this installation for the new session, as in
    ///     ``loginWithPassword(username:password:clientID:)``; nil: one per session.
    /// - Throws: ``KeyboundError/invalidInput`` for a username or client id outside the grammar of
    ///   ``Username`` or ``ClientID`` (checked before anything is sent); `server` with
    ///   `username_taken` (409) or `throttled`.
    public func passkeySignUpRequest(username: String, displayName: String? = nil, clientID: String? = nil)
        async throws -> PasskeyRegistrationRequest
    {
        let request = PasskeyRegistrationOptionsRequest(
            username: try Self.username(username), displayName: displayName,
            clientID: try clientID.map(Self.clientID))
        let options: PasskeyCreationOptions = try await send(API.passkeyRegistrationOptions, request)
        return PasskeyRegistrationRequest(options)
    }

    /// Finishes a passkey sign-up with the passkey the authenticator created, and holds the new
    /// account's session (creating the passkey verified the user).
    @discardableResult
    public func signUpWithPasskey(_ registration: PasskeyRegistration) async throws -> Session {
        let key = dpopKey
        let result: PasskeyRegistrationResult = try await send(
            API.passkeyRegistrationVerify, registration, credential: .login(key))
        guard let tokens = result.tokens else {
            throw KeyboundError(.unexpected, message: "the server opened no session for the new account")
        }
        return await adopt(tokens, key: key)
    }

    /// Starts adding a passkey to the logged-in account: what the authenticator must create.
    /// Needs a password or passkey login within the server's step-up window.
    public func addPasskeyRequest(displayName: String? = nil) async throws -> PasskeyRegistrationRequest {
        let options: PasskeyCreationOptions = try await authorized(
            API.passkeyRegistrationOptions,
            PasskeyRegistrationOptionsRequest(username: nil, displayName: displayName))
        return PasskeyRegistrationRequest(options)
    }

    /// Registers the passkey the authenticator created for ``addPasskeyRequest(displayName:)``.
    /// - Returns: the new passkey as the account's list shows it.
    public func addPasskey(_ registration: PasskeyRegistration) async throws -> PasskeyInfo {
        let result: PasskeyRegistrationResult = try await authorized(
            API.passkeyRegistrationVerify, registration)
        guard let added = try await passkeys().first(where: { $0.credentialID == result.credentialID }) else {
            throw KeyboundError(.unexpected, message: "the new passkey is not in the account's list")
        }
        return added
    }

    /// Starts a passkey login: what the authenticator must sign.
    /// - Parameters:
    ///   - username: whose passkeys may answer; nil lets the user pick any passkey of the site.
    ///   - clientID: identifies this installation, as in ``loginWithPassword(username:password:clientID:)``.
    /// - Throws: ``KeyboundError/invalidInput`` for a username or client id outside their grammar.
    public func passkeyLoginRequest(username: String? = nil, clientID: String? = nil) async throws
        -> PasskeyAssertionRequest
    {
        let request = PasskeyLoginOptionsRequest(
            username: try username.map(Self.username), clientID: try clientID.map(Self.clientID))
        let options: PasskeyRequestOptions = try await send(API.passkeyLoginOptions, request)
        return PasskeyAssertionRequest(options)
    }

    /// Completes a passkey login with the authenticator's assertion and holds the new session.
    @discardableResult
    public func loginWithPasskey(_ assertion: PasskeyAssertion) async throws -> Session {
        let key = dpopKey
        let result: PasskeyLoginResult = try await send(
            API.passkeyLoginVerify, assertion, credential: .login(key))
        return await adopt(result.tokens, key: key)
    }

    /// The logged-in account's passkeys, oldest first.
    public func passkeys() async throws -> [PasskeyInfo] {
        let response: PasskeyListResponse = try await authorized(API.listPasskeys)
        return response.passkeys
    }

    /// Removes one of the logged-in account's passkeys; it can sign in no more.
    /// - Throws: `server` with `last_passkey` (409) for the last passkey of an account without a
    ///   password.
    public func removePasskey(_ passkeyID: String) async throws {
        _ = try await authorized(API.removePasskey, parameters: [try pathSegment(passkeyID)])
    }

    // MARK: - Approvals and audit

    /// Asks the server for an approval payload for `action`, to be signed by `deviceID`.
    public func requestApproval(deviceID: String, action: ApprovalAction) async throws
        -> ApprovalChallengeResponse
    {
        try await authorized(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: action))
    }

    /// Confirms an approval with the device's signature of its payload.
    public func confirmApproval(_ approvalID: String, signature: Data) async throws -> ConfirmApprovalResponse
    {
        try await authorized(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [try pathSegment(approvalID)])
    }

    /// The user's approvals waiting for a decision, newest first (`GET /v1/approvals?status=pending`).
    /// Each carries the payload its device must sign; show what the payload says
    /// (``TransactionApproval/pending()`` checks and parses it).
    public func pendingApprovals() async throws -> [PendingApprovalInfo] {
        let response: PendingApprovalListResponse = try await authorized(
            API.listApprovals, query: [URLQueryItem(name: "status", value: ApprovalStatus.pending.rawValue)])
        return response.approvals
    }

    /// Refuses a pending approval: it can never be approved afterwards.
    /// - Throws: ``KeyboundError`` with the server's `challenge_used` once it was decided,
    ///   `challenge_expired` after it expired.
    public func denyApproval(_ approvalID: String) async throws -> ApprovalResponse {
        try await authorized(API.denyApproval, parameters: [try pathSegment(approvalID)])
    }

    /// An approval's state.
    public func approval(_ approvalID: String) async throws -> ApprovalResponse {
        try await authorized(API.approvalStatus, parameters: [try pathSegment(approvalID)])
    }

    /// The caller's own audit events.
    public func audit() async throws -> [AuditEvent] {
        let response: AuditListResponse = try await authorized(API.audit)
        return response.events
    }

    // MARK: - Signing in to other apps (OAuth 2.0 / OpenID Connect)

    /// Completes an OAuth authorization request for the logged-in user, as Keybound's sign-in
    /// page does once the user signed in there: a web app, a TV or another device sent the user
    /// to `authorizationURL`, and this app, which holds a session, answers it (docs/oauth.md).
    /// The session's sign-in must be at most 5 minutes old.
    /// - Parameter authorizationURL: the authorization request, `…/oauth/authorize?client_id=…`
    ///   with `redirect_uri`, `response_type=code`, PKCE and the rest in its query.
    /// - Returns: where the browser goes next: the client's redirect URI with `code`, `state` and
    ///   `iss`, or, for a request the server refuses, with `error`.
    /// - Throws: ``KeyboundError/invalidInput`` for a URL without `client_id`, `redirect_uri` and
    ///   `response_type`; `server` with `unknown_client` or `unregistered_redirect_uri` (400:
    ///   nothing may be sent there), or `step_up_required` (403) when the sign-in is older.
    public func authorize(_ authorizationURL: URL) async throws -> URL {
        var values: [String: String] = [:]
        for item in URLComponents(url: authorizationURL, resolvingAgainstBaseURL: false)?.queryItems ?? [] {
            if let value = item.value, !value.isEmpty, values[item.name] == nil { values[item.name] = value }
        }
        guard let clientID = values["client_id"], let redirectURI = values["redirect_uri"],
            let responseType = values["response_type"]
        else {
            throw KeyboundError.invalidInput(
                "an authorization request has client_id, redirect_uri and response_type")
        }
        let answer: OAuthAuthorizeResponse = try await authorized(
            API.oauthAuthorize,
            OAuthAuthorizeRequest(
                clientID: clientID, redirectURI: redirectURI, responseType: responseType,
                scope: values["scope"],
                state: values["state"], nonce: values["nonce"], codeChallenge: values["code_challenge"],
                codeChallengeMethod: values["code_challenge_method"]))
        guard let next = URL(string: answer.redirectTo) else {
            throw KeyboundError(.unexpected, message: "the server's redirect is not a URL")
        }
        return next
    }

    // MARK: - Tokens

    /// Sends a login (or a refresh that opens the client's session), with a proof by the client's
    /// DPoP key when it has one, and holds the session it opens.
    private func logIn<Request>(_ endpoint: Endpoint<Request, TokenResponse>, _ request: Request) async throws
        -> Session
    {
        let key = dpopKey
        let tokens = try await send(endpoint, request, credential: .login(key))
        return await adopt(tokens, key: key)
    }

    /// Holds the session of `tokens`, bound to `key` when the server says so (`token_type` DPoP).
    private func adopt(_ tokens: TokenResponse, key: DPoPKey?) async -> Session {
        let bound = tokens.tokenType == DPoP.scheme && key != nil
        let adopted = Session(
            accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, sessionID: tokens.sessionID,
            userID: tokens.userID,
            accessTokenExpiresAt: clock.now().addingTimeInterval(TimeInterval(tokens.expiresIn)),
            isDPoPBound: bound)
        session = adopted
        sessionKey = bound ? key : nil
        await notifyTokensChanged(adopted)
        return adopted
    }

    /// A valid access token, refreshing (once, for all concurrent callers) when it expired.
    private func accessToken(forceRefresh: Bool) async throws -> String {
        guard let current = session else {
            throw KeyboundError(.sessionExpired, message: "no session: log in first")
        }
        if !forceRefresh && current.accessTokenExpiresAt > clock.now() { return current.accessToken }
        return try await refreshOnce(replacing: current).accessToken
    }

    private func refreshOnce(replacing stale: Session) async throws -> Session {
        if let refreshInFlight { return try await refreshInFlight.value }
        if let session, session.accessToken != stale.accessToken { return session }  // already refreshed
        // The refusal is turned into `sessionExpired` inside the task, so that every caller
        // waiting for this refresh gets it, not only the one that started it.
        // A bound session refreshes with proofs by its own key (RFC 9449 §5).
        let key = stale.isDPoPBound ? sessionKey : nil
        let task = Task { () async throws -> Session in
            do {
                let tokens: TokenResponse = try await send(
                    API.refresh, RefreshRequest(refreshToken: stale.refreshToken), credential: .login(key))
                // A login or logout while the refresh was in flight wins over its result.
                guard session?.accessToken == stale.accessToken else {
                    guard let session else {
                        throw KeyboundError(.sessionExpired, message: "logged out during the refresh")
                    }
                    return session
                }
                return await adopt(tokens, key: key)
            } catch let error as KeyboundError
                where error.code == .server
                && (error.native == .httpStatus(401) || error.serverCode == .dpopProofInvalid)
            {
                if let newer = session, newer.accessToken != stale.accessToken { return newer }
                session = nil
                await notifyTokensChanged(nil)
                throw KeyboundError(
                    .sessionExpired, native: error.native, message: error.message,
                    serverCode: error.serverCode)
            }
        }
        refreshInFlight = task
        defer { refreshInFlight = nil }
        return try await task.value
    }

    /// Sends `body` to `endpoint` with the session's access token, refreshing it first when it
    /// expired, and once more when the server refused it.
    private func authorized<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ body: Request, parameters: [String] = [],
        query: [URLQueryItem] = []
    ) async throws -> Response {
        let token = try await accessToken(forceRefresh: false)
        do {
            return try await send(
                endpoint, body, parameters: parameters, query: query,
                credential: .accessToken(token, sessionKey))
        } catch let error as KeyboundError where error.serverCode == .tokenInvalid {
            // The server no longer takes this token (expired by its clock): refresh once, retry once.
            guard let current = session else { throw KeyboundError(.sessionExpired, message: error.message) }
            let fresh = current.accessToken == token ? try await refreshOnce(replacing: current) : current
            return try await send(
                endpoint, body, parameters: parameters, query: query,
                credential: .accessToken(fresh.accessToken, sessionKey))
        }
    }

    /// ``authorized(_:_:parameters:query:)`` for a route whose request has no body.
    private func authorized<Response>(
        _ endpoint: Endpoint<NoBody, Response>, parameters: [String] = [], query: [URLQueryItem] = []
    ) async throws -> Response {
        try await authorized(endpoint, NoBody(), parameters: parameters, query: query)
    }

    // MARK: - HTTP

    /// What a request carries to say who sends it.
    private enum Credential {
        /// Nothing.
        case none
        /// A login or refresh: a DPoP proof by the key, when there is one.
        case login(DPoPKey?)
        /// A session's access token: as `Bearer`, or, with the key its session is bound to, as
        /// `DPoP` with a proof by that key.
        case accessToken(String, DPoPKey?)

        /// The key that signs the request's proof.
        var key: DPoPKey? {
            switch self {
            case .none: nil
            case .login(let key), .accessToken(_, let key): key
            }
        }
    }

    private func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ body: Request, parameters: [String] = [],
        query: [URLQueryItem] = [], credential: Credential = .none
    ) async throws -> Response {
        let method = endpoint.method.rawValue
        let path = endpoint.path(parameters)
        let url = baseURL.appendingPathComponent(String(path.dropFirst()))
        var request = URLRequest(url: query.isEmpty ? url : url.appending(queryItems: query))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if Request.self != NoBody.self {
            request.httpBody = body.jsonData
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        // One key per call, the same on every attempt of it (``exchange(_:_:accessToken:)``).
        if endpoint.method == .post {
            request.setValue(IdempotencyKey.fresh(), forHTTPHeaderField: IdempotencyKey.header)
        }
        var accessToken: String?
        if case .accessToken(let token, let key) = credential {
            accessToken = token
            request.setValue(
                "\(key == nil ? "Bearer" : DPoP.scheme) \(token)", forHTTPHeaderField: "Authorization")
        }
        var (data, http) = try await exchange(request, credential.key, accessToken: accessToken)
        // RFC 9449 §8, §9: the server wants its nonce in the proof; the answer carried it. Once.
        if credential.key != nil, [400, 401].contains(http.statusCode),
            (try? Problem(jsonData: data))?.code == .useDPoPNonce
        {
            (data, http) = try await exchange(request, credential.key, accessToken: accessToken)
        }
        guard (200..<300).contains(http.statusCode) else {
            throw Self.error(
                status: http.statusCode, body: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After")
            )
        }
        do {
            if let none = NoBody() as? Response { return none }
            return try Response(jsonData: data)
        } catch {
            throw KeyboundError(
                .unexpected, native: .httpStatus(http.statusCode), message: "\(method) \(path): \(error)")
        }
    }

    /// Sends `request`, and again as ``RetryPolicy`` says when it may be sent twice (a GET, or a
    /// POST with its `Idempotency-Key`) and its answer was lost, or was a 503 or a 409
    /// `idempotency_key_in_flight`; each attempt with a new DPoP proof. The last attempt's
    /// answer, or its error, is the result.
    private func exchange(_ request: URLRequest, _ key: DPoPKey?, accessToken: String?) async throws -> (
        Data, HTTPURLResponse
    ) {
        let repeatable =
            request.httpMethod == "GET" || request.value(forHTTPHeaderField: IdempotencyKey.header) != nil
        var retry = 1
        while true {
            let wait: TimeInterval
            do {
                let (data, http) = try await exchangeOnce(request, key, accessToken: accessToken)
                let inFlight =
                    http.statusCode == 409 && (try? Problem(jsonData: data))?.code == .idempotencyKeyInFlight
                guard repeatable, http.statusCode == 503 || inFlight,
                    let delay = retryPolicy.delay(
                        beforeRetry: retry,
                        retryAfter: http.value(forHTTPHeaderField: "Retry-After").flatMap {
                            TimeInterval($0.trimmingCharacters(in: .whitespaces))
                        })
                else { return (data, http) }
                wait = delay
            } catch let failure as AttemptFailure {
                guard repeatable, RetryPolicy.isTransient(failure.underlying),
                    let delay = retryPolicy.delay(beforeRetry: retry, retryAfter: nil)
                else { throw failure.error }
                wait = delay
            }
            try await Task.sleep(nanoseconds: UInt64(wait * 1e9))
            retry += 1
        }
    }

    /// A send that got no HTTP answer: the client's error, and what URLSession said.
    private struct AttemptFailure: Error {
        let error: KeyboundError
        let underlying: any Error
    }

    /// Sends `request` once, with a new DPoP proof by `key` when there is one (naming the
    /// server's latest nonce), and keeps the nonce the answer carries.
    /// - Throws: ``AttemptFailure`` when no HTTP answer came; the proof's errors.
    private func exchangeOnce(_ request: URLRequest, _ key: DPoPKey?, accessToken: String?) async throws -> (
        Data, HTTPURLResponse
    ) {
        var request = request
        let method = request.httpMethod ?? "GET"
        // `htu`: the target URI without query and fragment (RFC 9449 §4.2).
        var components = request.url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: true) }
        components?.query = nil
        components?.fragment = nil
        let target = components?.string ?? ""
        if let key {
            let jwk = try await publicJWK(of: key)
            let proof = try await key.proof(
                jwk: jwk, method: method, uri: target, issuedAt: clock.now(), nonce: dpopNonce,
                accessToken: accessToken)
            request.setValue(proof, forHTTPHeaderField: DPoP.proofHeader)
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await urlSession.data(for: request)
        } catch {
            throw AttemptFailure(
                error: KeyboundError(.network, message: "\(method) \(target): \(error.localizedDescription)"),
                underlying: error)
        }
        guard let http = response as? HTTPURLResponse else {
            throw KeyboundError(.network, message: "\(method) \(target): not an HTTP response")
        }
        if let nonce = http.value(forHTTPHeaderField: DPoP.nonceHeader) { dpopNonce = nonce }
        return (data, http)
    }

    /// The key's public JWK, read from its vault once.
    private func publicJWK(of key: DPoPKey) async throws -> ECPublicJWK {
        if let known = dpopJWKs[key.name] { return known }
        let jwk = try await key.publicJWK()
        dpopJWKs[key.name] = jwk
        return jwk
    }

    /// The Keybound error for a server problem response, with the recovery the problem implies.
    static func error(status: Int, body: Data, retryAfter: String?) -> KeyboundError {
        let problem = try? Problem(jsonData: body)
        let code = problem?.code ?? ProblemCode(rawValue: "http_\(status)")
        let seconds = retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        let recovery: KeyboundError.Recovery
        switch code {
        case .throttled:
            return KeyboundError(
                .throttled, native: .httpStatus(status), message: problem?.detail, serverCode: code,
                retryAfter: seconds)
        // A proof the server refuses that is not about its nonce: the key is not the session's
        // (deleted and made again) or the device's clock is far off; a new login binds afresh.
        case .invalidCredentials, .stepUpRequired, .tokenInvalid, .dpopProofInvalid: recovery = .usePassword
        case .deviceRevoked, .deviceSuspended, .passkeySuspended: recovery = .usePassword
        // The server requires App Attest and this device was bound without it (before the
        // requirement): only a new binding helps. (A refused binding itself is final: see
        // `BiometricLogin.enable()`.)
        case .appAttestRequired: recovery = .reenroll
        // The client answers a nonce request once by itself; a second one in a row: try again.
        case .challengeExpired, .challengeUsed, .unavailable, .useDPoPNonce, .idempotencyKeyInFlight:
            recovery = .retry
        default: recovery = status >= 500 ? .retryLater : .none
        }
        return KeyboundError(
            .server, native: .httpStatus(status), message: problem?.detail ?? "HTTP \(status)",
            serverCode: code, retryAfter: seconds, recovery: recovery)
    }

    /// A username, checked before anything is sent.
    /// - Throws: ``KeyboundError/invalidInput`` outside the grammar of ``Username``.
    private static func username(_ text: String) throws -> Username {
        try KeyboundError.validating { try Username(text) }
    }

    /// A client id, checked before anything is sent.
    /// - Throws: ``KeyboundError/invalidInput`` outside the grammar of ``ClientID``.
    private static func clientID(_ text: String) throws -> ClientID {
        try KeyboundError.validating { try ClientID(text) }
    }

    /// A server id as a path segment: only what the server's id grammar allows ever goes there.
    private func pathSegment(_ id: String) throws -> String {
        guard Grammar.isIdentifier(id) else {
            throw KeyboundError.invalidInput("an id is 1-64 letters, digits, - and _")
        }
        return id
    }
}
