import Foundation

/// The sign-in page (`GET /`): passkey sign-up and sign-in, and the signed-in user's passkeys and
/// devices, in plain HTML, JavaScript and CSS (``SignInPageFiles``) that talk to this server's API.
enum SignInPage {
    /// Only this server's own files may run or style the page, and only this server may be
    /// called: no inline script, no other origin, no framing (so no clickjacking of the passkey
    /// prompts), no form posts.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The response for one of the page's paths (`/`, `/sign-in.js`, `/sign-in.css`).
    static func response(for path: String) -> HTTPResponse {
        let (text, type): (String, String) =
            switch path {
            case "/sign-in.js": (SignInPageFiles.script, "text/javascript; charset=utf-8")
            case "/sign-in.css": (SignInPageFiles.style, "text/css; charset=utf-8")
            default: (SignInPageFiles.html, "text/html; charset=utf-8")
            }
        return HTTPResponse(
            status: 200,
            headers: [
                "Content-Type": type, "Content-Security-Policy": contentSecurityPolicy,
                "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                "Cross-Origin-Opener-Policy": "same-origin", "Cache-Control": "no-cache",
            ],
            body: Data(text.utf8))
    }
}

/// The sign-in page's files (`Resources/sign-in`), served by ``SignInPage``: `html` (index.html,
/// at `/`), `script` (sign-in.js) and `style` (sign-in.css), compiled in at build time by the
/// EmbedFiles plugin.
enum SignInPageFiles {}
