import Foundation
import KeyboundCrypto
import KeyboundWire

// The authorization endpoint (RFC 6749 §4.1, PKCE RFC 7636, OpenID Connect Core §3.1.2): its user
// step is the sign-in page, which signs the user in (passkey or password) and completes the
// request through `POST /v1/oauth/authorize` — as a native app holding a session can.

/// An authorization request that passed every check.
struct AuthorizationRequest {
    let client: OAuthClient
    let redirectURI: String
    /// The scopes asked for, each once, in the order given.
    let scopes: [String]
    let state: String?
    let nonce: String?
    /// The PKCE S256 challenge.
    let codeChallenge: String
}

/// What the checks of an authorization request decided.
enum AuthorizationCheck {
    case valid(AuthorizationRequest)
    /// The client or the redirect URI is unknown: the answer may go nowhere but to the user
    /// (RFC 6749 §4.1.2.1: never redirect to an unverified URI).
    case misdirected(ProblemCode, String)
    /// Refused, the error addressed to the client's redirect URI.
    case refused(redirectTo: String)
}

extension Application {
    /// How long a code may wait for its exchange, in seconds.
    static let codeLifetime = 60
    /// The sign-in behind an authorization may be this many seconds old at most.
    static let authorizationWindow = 300

    /// Checks an authorization request in the order that decides where its answer may go: the
    /// client and its redirect URI first (an error then goes to nobody but the user), then
    /// everything else (an error then goes back to the client, with `state` and `iss`).
    func checkAuthorization(_ request: OAuthAuthorizeRequest, repeated: Set<String> = []) throws
        -> AuthorizationCheck
    {
        guard !repeated.contains("client_id"), !repeated.contains("redirect_uri") else {
            return .misdirected(.invalidRequest, "client_id and redirect_uri may be given once each.")
        }
        guard let client = try database.read({ try loadClient($0, id: request.clientID) }) else {
            return .misdirected(.unknownClient, "No client with this client_id is registered here.")
        }
        guard client.allowsRedirect(to: request.redirectURI) else {
            return .misdirected(
                .unregisteredRedirectURI, "This redirect_uri is not one the client registered.")
        }
        func refuse(_ error: String, _ description: String) -> AuthorizationCheck {
            .refused(redirectTo: errorRedirect(request, error, description))
        }
        if let name = repeated.first {
            return refuse("invalid_request", "the parameter \(name) is given more than once")
        }
        guard request.responseType == "code" else {
            return refuse("unsupported_response_type", "only response_type=code is supported")
        }
        guard request.codeChallengeMethod == "S256", let challenge = request.codeChallenge,
            challenge.utf8.count == 43, Base64URL.decode(challenge)?.count == 32
        else {
            return refuse(
                "invalid_request", "PKCE is required: code_challenge_method=S256 and its code_challenge")
        }
        var scopes: [String] = []
        for scope in (request.scope ?? "").split(separator: " ").map(String.init)
        where !scopes.contains(scope) {
            guard OAuthClient.standardScopes.contains(scope) || client.extraScopes.contains(scope) else {
                return refuse("invalid_scope", "the client may not ask for \(scope)")
            }
            scopes.append(scope)
        }
        for (name, value) in [("state", request.state), ("nonce", request.nonce)]
        where (value?.utf8.count ?? 0) > 512 {
            return refuse("invalid_request", "\(name) is at most 512 bytes")
        }
        return .valid(
            AuthorizationRequest(
                client: client, redirectURI: request.redirectURI, scopes: scopes, state: request.state,
                nonce: request.nonce, codeChallenge: challenge))
    }

    /// The client's redirect URI with an error (RFC 6749 §4.1.2.1), `state` and `iss`.
    private func errorRedirect(_ request: OAuthAuthorizeRequest, _ error: String, _ description: String)
        -> String
    {
        redirect(
            request.redirectURI,
            [("error", error), ("error_description", description)]
                + (request.state.map { [("state", $0)] } ?? []))
    }

    /// `redirectURI` with `parameters` and the issuer (RFC 9207) added to its query.
    private func redirect(_ redirectURI: String, _ parameters: [(String, String)]) -> String {
        let all = parameters + [("iss", configuration.issuer ?? "")]
        return redirectURI + (redirectURI.contains("?") ? "&" : "?") + OAuthParameters.encode(all)
    }

    /// `GET /oauth/authorize`: a request whose client and redirect URI check out gets the sign-in
    /// page, which completes it; an unknown client or redirect URI gets a page that says so (400);
    /// any other error goes back to the client's redirect URI (302).
    func authorizationPage(_ context: RequestContext) throws -> HTTPResponse {
        guard configuration.issuer != nil else { throw APIError.notFound }
        let (query, repeated) = OAuthParameters.values(of: context.request)
        let request = OAuthAuthorizeRequest(
            clientID: query["client_id"] ?? "", redirectURI: query["redirect_uri"] ?? "",
            responseType: query["response_type"] ?? "", scope: query["scope"], state: query["state"],
            nonce: query["nonce"], codeChallenge: query["code_challenge"],
            codeChallengeMethod: query["code_challenge_method"])
        switch try checkAuthorization(request, repeated: repeated) {
        case .misdirected(_, let reason):
            return SignInPage.errorPage(status: 400, title: "This sign-in link is not valid", detail: reason)
        case .refused(let location):
            return HTTPResponse(status: 302, headers: ["Location": location, "Cache-Control": "no-store"])
        case .valid where (query["prompt"] ?? "").split(separator: " ").contains("none"):
            // The page always asks the user to sign in: it cannot answer without them (OIDC Core §3.1.2.6).
            let location = errorRedirect(request, "login_required", "signing in needs the user")
            return HTTPResponse(status: 302, headers: ["Location": location, "Cache-Control": "no-store"])
        case .valid(let valid):
            return SignInPage.authorizationPage(clientName: valid.client.name)
        }
    }

    /// `POST /oauth/authorize` (OpenID Connect Core §3.1.2.1: form serialization): the same
    /// request as a query, where the sign-in page reads it (303 to `GET /oauth/authorize`), once
    /// its client and redirect URI check out; otherwise the page that says which does not.
    func authorizationForm(_ context: RequestContext) throws -> HTTPResponse {
        guard configuration.issuer != nil else { throw APIError.notFound }
        let pairs: [(String, String)]
        do { pairs = try OAuthParameters.form(context.request) } catch let error as OAuthError {
            return SignInPage.errorPage(
                status: 400, title: "This sign-in request is not valid", detail: error.description)
        }
        let (values, repeated) = OAuthParameters.values(of: pairs)
        if case .misdirected(_, let reason) = try checkAuthorization(
            OAuthAuthorizeRequest(
                clientID: values["client_id"] ?? "", redirectURI: values["redirect_uri"] ?? "",
                responseType: "",
                scope: nil, state: nil, nonce: nil, codeChallenge: nil, codeChallengeMethod: nil),
            repeated: repeated)
        {
            return SignInPage.errorPage(status: 400, title: "This sign-in link is not valid", detail: reason)
        }
        // Repeats of what the endpoint reads are refused there, with the client's redirect URI known.
        let query = OAuthParameters.encode(
            pairs.filter { !$0.1.isEmpty && OAuthParameters.read.contains($0.0) })
        return HTTPResponse(
            status: 303,
            headers: ["Location": OAuthPaths.authorize + "?" + query, "Cache-Control": "no-store"])
    }

    /// `POST /v1/oauth/authorize`: completes an authorization request for the caller, whose
    /// sign-in must be at most 5 minutes old. The answer is where the browser goes next: the
    /// redirect URI with a code (single use, 60 s), `state` and `iss`, or with an error.
    /// - Throws: ``APIError`` 400 for an unknown client or redirect URI, 403 `step_up_required`
    ///   for an older sign-in.
    func completeAuthorization(_ context: RequestContext, _ body: RequestBody<OAuthAuthorizeRequest>) throws
        -> OAuthAuthorizeResponse
    {
        guard configuration.issuer != nil else { throw APIError.notFound }
        // 401 comes before any complaint about the body. Checked, not used up: a DPoP proof is
        // used up by the write below, in the code's transaction (once, not twice).
        let caller = try checkCaller(context)
        let request = try body.decode()
        let authorization: AuthorizationRequest
        switch try checkAuthorization(request) {
        case .misdirected(let code, let reason): throw APIError(400, code, reason)
        case .refused(let location): return OAuthAuthorizeResponse(redirectTo: location)
        case .valid(let valid): authorization = valid
        }
        guard context.now < caller.authTime.adding(seconds: Self.authorizationWindow) else {
            throw APIError(
                403, .stepUpRequired,
                "Signing in to an app needs a sign-in within the last 5 minutes; sign in again.")
        }
        let code = SecureRandomBytes.token()
        return try authenticatedWrite(context) { connection, caller in
            try connection.execute(
                """
                INSERT INTO oauth_codes (hash, client_id, redirect_uri, user_id, auth_method, auth_time, scope, nonce,
                    code_challenge, expires_at, used_at, session_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)
                """,
                [
                    .text(TokenHash.of(code)), .text(authorization.client.id),
                    .text(authorization.redirectURI),
                    .text(caller.userID), .text(caller.authMethod.rawValue), .date(caller.authTime),
                    .text(authorization.scopes.joined(separator: " ")), authorization.nonce.sql,
                    .text(authorization.codeChallenge), .date(context.now.adding(seconds: Self.codeLifetime)),
                ])
            try audit(
                connection, context, .oauthAuthorized, userID: caller.userID, sessionID: caller.sessionID)
            return OAuthAuthorizeResponse(
                redirectTo: redirect(
                    authorization.redirectURI,
                    [("code", code)] + (authorization.state.map { [("state", $0)] } ?? [])))
        }
    }
}
