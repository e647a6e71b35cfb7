import Foundation
import KeyboundWire

/// The operator console's API (docs/console.md), served on ``Configuration/adminListen`` only.
/// Its sign-in takes the API's own login messages; every other route needs a bearer token of an
/// administrator's session, and every change a password or passkey login within five minutes.
enum ConsoleAPI {
    /// Sign-in with a password: the API's password login, for administrators only.
    static let passwordLogin = Endpoint<PasswordLoginRequest, TokenResponse>(
        .post, "/admin/v1/sessions/password")
    /// Starts a passkey sign-in on the console's origin.
    static let passkeyLoginOptions = Endpoint<PasskeyLoginOptionsRequest, PasskeyRequestOptions>(
        .post, "/admin/v1/webauthn/login/options")
    /// Finishes it: for administrators only.
    static let passkeyLoginVerify = Endpoint<PasskeyAssertion, PasskeyLoginResult>(
        .post, "/admin/v1/webauthn/login/verify")

    /// Every route that needs an administrator's token, as (method, path): the tests refuse a
    /// non-administrator on each.
    static var adminOnly: [(method: String, path: String)] {
        Application.adminRoutes.filter { route in
            !route.pattern.hasPrefix("/admin/v1/sessions/password")
                && !route.pattern.hasPrefix("/admin/v1/webauthn")
                && route.pattern.hasPrefix("/admin/v1/")
        }.map { ($0.method, $0.pattern) }
    }
}

extension Application {
    /// The route table of the console's listener: its page, sign-in, and the administrators' API.
    static let adminRoutes: [Route] = [
        Route(ConsolePage.html),
        Route(ConsolePage.script),
        Route(ConsolePage.style),
        Route(ConsoleAPI.passwordLogin, Application.passwordLogin),
        Route(ConsoleAPI.passkeyLoginOptions, Application.passkeyLoginOptions),
        Route(ConsoleAPI.passkeyLoginVerify, Application.passkeyLoginVerify),
        Route(console: "DELETE", "/admin/v1/sessions/current", Application.consoleLogout),
        Route(console: "GET", "/admin/v1/me", Application.consoleMe),
        Route(console: "GET", "/admin/v1/overview", Application.consoleOverview),
        Route(console: "GET", "/admin/v1/audit", Application.consoleAudit),
        Route(console: "GET", "/admin/v1/users", Application.consoleUsers),
        Route(console: "GET", "/admin/v1/users/{id}", Application.consoleUser),
        Route(console: "POST", "/admin/v1/users/{id}/lock") { $0.consoleLock(true) },
        Route(console: "POST", "/admin/v1/users/{id}/unlock") { $0.consoleLock(false) },
        Route(console: "DELETE", "/admin/v1/users/{id}/sessions", Application.consoleEndSessions),
        Route(console: "DELETE", "/admin/v1/users/{id}/throttles", Application.consoleClearThrottles),
        Route(console: "DELETE", "/admin/v1/devices/{id}", Application.consoleRevokeDevice),
        Route(console: "DELETE", "/admin/v1/passkeys/{id}", Application.consoleRemovePasskey),
        Route(console: "DELETE", "/admin/v1/sessions/{id}", Application.consoleRevokeSession),
        Route(console: "GET", "/admin/v1/oauth-clients", Application.consoleClients),
        Route(console: "POST", "/admin/v1/oauth-clients", Application.consoleAddClient),
        Route(console: "DELETE", "/admin/v1/oauth-clients/{id}", Application.consoleRemoveClient),
        Route(console: "GET", "/admin/v1/webhooks", Application.consoleWebhooks),
        Route(console: "POST", "/admin/v1/webhooks", Application.consoleAddWebhook),
        Route(console: "DELETE", "/admin/v1/webhooks/{id}", Application.consoleRemoveWebhook),
        Route(console: "GET", "/admin/v1/webhooks/{id}/deliveries", Application.consoleDeliveries),
        Route(console: "POST", "/admin/v1/webhook-deliveries/{id}/retry", Application.consoleRetryDelivery),
    ]
}

extension Route {
    /// A console API route: its handler answers with the response itself.
    init(
        console method: String, _ pattern: String,
        _ handler: @escaping @Sendable (Application) -> (RequestContext) throws -> HTTPResponse
    ) {
        self.init(method: method, pattern: pattern) { application, context in
            try handler(application)(context)
        }
    }
}

/// The console's page (`GET /` on the console's listener): plain HTML, JavaScript and CSS
/// (`Resources/console`, compiled in by the EmbedFiles plugin as ``ConsolePageFiles``), under the
/// sign-in page's strict policy: no inline script, nothing from another origin.
enum ConsolePage {
    /// `GET /`.
    static let html = SignInPage.File(
        path: "/", text: ConsolePageFiles.html, contentType: "text/html; charset=utf-8")
    /// Its script: `ROUTES`, the sign-in routes it calls as the server declares them, then
    /// webauthn.js (shared with the sign-in page), then console.js.
    static let script = SignInPage.File(
        path: "/console.js",
        text: SignInPage.routesScript([
            ("passwordLogin", ConsoleAPI.passwordLogin),
            ("passkeyLoginOptions", ConsoleAPI.passkeyLoginOptions),
            ("passkeyLoginVerify", ConsoleAPI.passkeyLoginVerify),
        ]) + SignInPageFiles.webauthn + ConsolePageFiles.script,
        contentType: "text/javascript; charset=utf-8")
    /// Its style sheet.
    static let style = SignInPage.File(
        path: "/console.css", text: ConsolePageFiles.style, contentType: "text/css; charset=utf-8")
}

/// The console's files (`Resources/console`): `html` (index.html), `script` (console.js) and
/// `style` (console.css), compiled in at build time by the EmbedFiles plugin.
enum ConsolePageFiles {}
