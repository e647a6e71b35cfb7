import Foundation
import KeyboundWire

/// The sign-in page (`GET /`): passkey sign-up and sign-in, and the signed-in user's passkeys and
/// devices, in plain HTML, JavaScript and CSS (``SignInPageFiles``) that talk to this server's API.
enum SignInPage {
    /// Only this server's own files may run or style the page, and only this server may be
    /// called: no inline script, no other origin, no framing (so no clickjacking of the passkey
    /// prompts), no form posts.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// One of the page's files, at its path.
    struct File: Sendable {
        let path: String
        let text: String
        let contentType: String

        /// The file, with the page's security headers.
        var response: HTTPResponse {
            HTTPResponse(
                status: 200,
                headers: [
                    "Content-Type": contentType, "Content-Security-Policy": SignInPage.contentSecurityPolicy,
                    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                    "Cross-Origin-Opener-Policy": "same-origin", "Cache-Control": "no-cache",
                ],
                body: Data(text.utf8))
        }
    }

    /// A page that tells the user why a sign-in link cannot be followed (an OAuth request whose
    /// client or redirect URI is unknown: it is never redirected, RFC 6749 §4.1.2.1).
    static func errorPage(status: Int, title: String, detail: String) -> HTTPResponse {
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
            <link rel="stylesheet" href="\(style.path)"></head>
            <body><main><h1>\(escape(title))</h1><p>\(escape(detail))</p></main></body></html>

            """
        var response = File(path: "", text: html, contentType: "text/html; charset=utf-8").response
        response.status = status
        response.headers["Cache-Control"] = "no-store"
        return response
    }

    /// The page for a valid authorization request (`GET /oauth/authorize`): it says which app the
    /// user signs in to, and its script then completes the request.
    static func authorizationPage(clientName: String) -> HTTPResponse {
        let placeholder = #"<p id="continue-to" class="continue" hidden></p>"#
        let filled =
            #"<p id="continue-to" class="continue">Sign in to continue to <strong>"#
            + escape(clientName) + "</strong>.</p>"
        var response = File(
            path: "", text: SignInPageFiles.html.replacingOccurrences(of: placeholder, with: filled),
            contentType: "text/html; charset=utf-8"
        ).response
        response.headers["Cache-Control"] = "no-store"
        return response
    }

    /// `text` with the characters HTML gives a meaning escaped.
    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    /// `GET /`: the page.
    static let html = File(path: "/", text: SignInPageFiles.html, contentType: "text/html; charset=utf-8")
    /// Its script: `ROUTES`, the API routes it calls as the server declares them (``API``), then
    /// webauthn.js (what it shares with the console's script), then sign-in.js.
    static let script = File(
        path: "/sign-in.js", text: routesScript(routes) + SignInPageFiles.webauthn + SignInPageFiles.script,
        contentType: "text/javascript; charset=utf-8")

    /// The routes the page calls, by the name its script uses.
    static let routes: [(name: String, route: any EndpointDescription)] = [
        ("listDevices", API.listDevices), ("revokeDevice", API.revokeDevice), ("me", API.me),
        ("listPasskeys", API.listPasskeys), ("removePasskey", API.removePasskey), ("logout", API.logout),
        ("refresh", API.refresh), ("passwordLogin", API.passwordLogin),
        ("oauthAuthorize", API.oauthAuthorize),
        ("passkeyLoginOptions", API.passkeyLoginOptions),
        ("passkeyLoginVerify", API.passkeyLoginVerify),
        ("passkeyRegistrationOptions", API.passkeyRegistrationOptions),
        ("passkeyRegistrationVerify", API.passkeyRegistrationVerify),
    ]

    /// `const ROUTES = {"me": {"method": "GET", "path": "/v1/me"}, …};` and a line that says where
    /// it comes from.
    static func routesScript(_ routes: [(name: String, route: any EndpointDescription)]) -> String {
        let members = routes.map { entry in
            JSONMember(
                entry.name,
                .object([
                    JSONMember("method", .string(entry.route.method.rawValue)),
                    JSONMember("path", .string(entry.route.template)),
                ]))
        }
        return "// The API routes this page calls, as the server declares them.\n"
            + "const ROUTES = \(String(decoding: JSON.serialize(.object(members)), as: UTF8.self));\n\n"
    }
    /// Its style sheet.
    static let style = File(
        path: "/sign-in.css", text: SignInPageFiles.style, contentType: "text/css; charset=utf-8")
}

/// The sign-in page's files (`Resources/sign-in`), served by ``SignInPage``: `html` (index.html,
/// at `/`), `script` (sign-in.js) and `style` (sign-in.css), and `webauthn`
/// (`Resources/shared/webauthn.js`, which the console's script starts with too), compiled in at
/// build time by the EmbedFiles plugin.
enum SignInPageFiles {}
