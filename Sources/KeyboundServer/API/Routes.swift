import Foundation
import KeyboundWire

extension Application {
    /// The route table of Server API v1 (see docs/openapi.yaml).
    static let routes: [Route] = [
        Route(method: "GET", pattern: "/healthz", answersAtOnce: true) { app, _ in try app.health() },
        Route(method: "GET", pattern: "/openapi.yaml", answersAtOnce: true) { _, _ in
            HTTPResponse(
                status: 200, headers: ["Content-Type": "application/yaml; charset=utf-8"],
                body: Data(OpenAPIDocument.yaml.utf8))
        },
        Route(method: "POST", pattern: "/v1/accounts") { app, context in try app.createAccount(context) },
        Route(method: "POST", pattern: "/v1/sessions/password") { app, context in
            try app.passwordLogin(context)
        },
        Route(method: "POST", pattern: "/v1/sessions/refresh") { app, context in try app.refresh(context) },
        Route(method: "DELETE", pattern: "/v1/sessions/current") { app, context in try app.logout(context) },
        Route(method: "GET", pattern: "/v1/me", answersAtOnce: true) { app, context in try app.me(context) },
        Route(method: "POST", pattern: "/v1/devices") { app, context in try app.bindDevice(context) },
        Route(method: "GET", pattern: "/v1/devices") { app, context in try app.listDevices(context) },
        Route(method: "DELETE", pattern: "/v1/devices/{id}") { app, context in try app.revokeDevice(context)
        },
        // Issuing a login challenge writes nothing (``LoginChallenge``).
        Route(method: "POST", pattern: "/v1/challenges", answersAtOnce: true) { app, context in
            try app.createChallenge(context)
        },
        Route(method: "POST", pattern: "/v1/sessions/device") { app, context in try app.deviceLogin(context)
        },
        Route(method: "POST", pattern: "/v1/approvals") { app, context in try app.createApproval(context) },
        Route(method: "POST", pattern: "/v1/approvals/{id}/confirm") { app, context in
            try app.confirmApproval(context)
        },
        Route(method: "GET", pattern: "/v1/approvals/{id}") { app, context in try app.approvalStatus(context)
        },
        Route(method: "GET", pattern: "/v1/audit") { app, context in try app.auditEvents(context) },
        // Passkeys and App Attest.
        Route(method: "POST", pattern: "/v1/webauthn/register/options") { app, context in
            try app.passkeyRegistrationOptions(context)
        },
        Route(method: "POST", pattern: "/v1/webauthn/register/verify") { app, context in
            try app.passkeyRegistrationVerify(context)
        },
        // Issuing a passkey login challenge reads and writes nothing (``PasskeyChallenge``).
        Route(method: "POST", pattern: "/v1/webauthn/login/options", answersAtOnce: true) { app, context in
            try app.passkeyLoginOptions(context)
        },
        Route(method: "POST", pattern: "/v1/webauthn/login/verify") { app, context in
            try app.passkeyLoginVerify(context)
        },
        Route(method: "GET", pattern: "/v1/passkeys") { app, context in try app.listPasskeys(context) },
        Route(method: "DELETE", pattern: "/v1/passkeys/{id}") { app, context in try app.removePasskey(context)
        },
        Route(method: "POST", pattern: "/v1/app-attest/challenges") { app, context in
            try app.createAppAttestChallenge(context)
        },
        // The sign-in page (docs/server.md, "The sign-in page").
        Route(method: "GET", pattern: "/", answersAtOnce: true) { _, _ in SignInPage.response(for: "/") },
        Route(method: "GET", pattern: "/sign-in.js", answersAtOnce: true) { _, _ in
            SignInPage.response(for: "/sign-in.js")
        },
        Route(method: "GET", pattern: "/sign-in.css", answersAtOnce: true) { _, _ in
            SignInPage.response(for: "/sign-in.css")
        },
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

    func health() throws -> HTTPResponse {
        _ = try database.read { try $0.query("SELECT 1", []) }
        return .json(200, HealthResponse())
    }
}

/// The input rules only the server checks, once at the edge. (The grammars the SDK checks too,
/// usernames, client ids and opaque ids, are KeyboundWire's `Username`, `ClientID` and `Grammar`.)
enum Validate {
    /// Passwords: 8–1024 characters, no composition rules. Characters are Unicode code points, as
    /// JSON Schema's `minLength`/`maxLength` count them in docs/openapi.yaml (a count of grapheme
    /// clusters would refuse a password the spec allows: eight combining marks are one cluster).
    static func newPassword(_ password: String) throws {
        guard (8...1024).contains(password.unicodeScalars.count) else {
            throw APIError.invalid("password must be 8-1024 characters")
        }
    }

    /// A password given at login: only the upper bound is checked (the hash does the rest).
    static func loginPassword(_ password: String) throws {
        guard password.unicodeScalars.count <= 1024 else {
            throw APIError.invalid("password must be at most 1024 characters")
        }
    }

    /// Device names: 1–64 code points (as the spec counts them), no control characters.
    static func deviceName(_ name: String) throws {
        guard (1...64).contains(name.unicodeScalars.count),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw APIError.invalid("name must be 1-64 characters without control characters") }
    }
}
