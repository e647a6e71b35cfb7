import Foundation
import KeyboundWire

extension Application {
    /// The route table of the API listener, in path order: Server API v1 (each route declared
    /// in KeyboundWire's ``API``, docs/openapi.yaml), the OAuth 2.0 / OpenID Connect provider
    /// (``OAuthPaths``, docs/oauth.md), the sign-in page and the OpenAPI document.
    /// Routes marked `answersAtOnce` only read (``Route/answersAtOnce``); issuing a login
    /// challenge, for a device or a passkey, writes nothing (``LoginChallenge``,
    /// ``PasskeyChallenge``).
    static let routes: [Route] = [
        Route(SignInPage.html),
        Route(document: OAuthPaths.appleAppSiteAssociation, Application.appleAppSiteAssociation),
        Route(document: OAuthPaths.assetLinks, Application.assetLinks),
        Route(document: OAuthPaths.authorizationServer, Application.providerMetadataDocument),
        Route(document: OAuthPaths.openIDConfiguration, Application.providerMetadataDocument),
        Route(API.health, answersAtOnce: true, Application.health),
        Route(method: "GET", pattern: "/openapi.yaml", answersAtOnce: true) { _, _ in OpenAPIDocument.response
        },
        Route(oauth: "POST", OAuthPaths.backchannelAuthentication, Application.backchannelAuthentication),
        Route(oauth: "GET", OAuthPaths.authorize, answersAtOnce: true, Application.authorizationPage),
        Route(oauth: "POST", OAuthPaths.authorize, idempotent: false, Application.authorizationForm),
        Route(oauth: "POST", OAuthPaths.introspect, Application.introspect),
        Route(document: OAuthPaths.jwks, Application.jwksDocument),
        Route(oauth: "POST", OAuthPaths.revoke, Application.revoke),
        Route(
            oauth: "POST", OAuthPaths.token, rendering: { try $0.tokenAnswer($2, $1, on: $3) },
            Application.token),
        Route(oauth: "GET", OAuthPaths.userinfo, Application.userinfo),
        Route(oauth: "POST", OAuthPaths.userinfo, Application.userinfo),
        Route(SignInPage.style),
        Route(SignInPage.script),
        Route(API.createAccount, location: { _ in API.me.template }, Application.createAccount),
        Route(API.createAppAttestChallenge, Application.createAppAttestChallenge),
        Route(API.listApprovals, Application.listApprovals),
        Route(
            API.createApproval, location: { API.approvalStatus.path($0.approvalID) },
            Application.createApproval),
        Route(API.approvalStatus, Application.approvalStatus),
        Route(API.confirmApproval, Application.confirmApproval),
        Route(API.denyApproval, Application.denyApproval),
        Route(API.audit, Application.auditEvents),
        Route(API.createChallenge, answersAtOnce: true, Application.createChallenge),
        Route(API.listDevices, Application.listDevices),
        Route(API.bindDevice, location: { API.revokeDevice.path($0.deviceID) }, Application.bindDevice),
        Route(API.revokeDevice, Application.revokeDevice),
        Route(API.me, answersAtOnce: true, Application.me),
        Route(API.oauthAuthorize, Application.completeAuthorization),
        Route(API.listPasskeys, Application.listPasskeys),
        Route(API.removePasskey, Application.removePasskey),
        Route(API.logout, Application.logout),
        Route(API.deviceLogin, Application.deviceLogin),
        Route(API.passwordLogin, Application.passwordLogin),
        Route(API.refresh, Application.refresh),
        Route(API.passkeyLoginOptions, answersAtOnce: true, Application.passkeyLoginOptions),
        Route(API.passkeyLoginVerify, Application.passkeyLoginVerify),
        Route(API.passkeyRegistrationOptions, Application.passkeyRegistrationOptions),
        Route(API.passkeyRegistrationVerify, Application.passkeyRegistrationVerify),
    ]

    /// The route table of the metrics listener (`--metrics-listen`): `/metrics` is not served on
    /// the API port, since it shows lockouts and token reuse as they happen.
    static let metricsRoutes: [Route] = [
        Route(method: "GET", pattern: "/metrics") { app, _ in
            HTTPResponse(
                status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                body: Data(app.metrics.render().utf8))
        }
    ]

    /// `GET /healthz`: the database takes writes (503 while, after a failover, no primary does).
    func health(_ context: RequestContext) throws -> HealthResponse {
        try database.checkWritable()
        return HealthResponse()
    }
}
