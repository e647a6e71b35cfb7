#if os(Linux)
    import Foundation
    import KeyboundCrypto
    import KeyboundVerifier
    import KeyboundWire
    import Testing

    @testable import KeyboundServer

    /// The browser leg of the OAuth code flow, in headless Chromium: a web app sends the user to
    /// `GET /oauth/authorize`; the sign-in page says which app asks, signs the user in with a
    /// passkey of the DevTools virtual authenticator (or a password), and sends the browser back
    /// to the app's loopback redirect URI with the code, which the app's back end exchanges.
    ///
    /// `KEYBOUND_OAUTH_SCREENSHOTS=DIR` writes what the browser showed at each step there;
    /// `KEYBOUND_UPDATE_SCREENSHOT=1` writes the authorization page to docs/images/oauth-sign-in.png.
    @Suite(
        "OAuth sign-in in headless Chromium",
        .enabled(
            if: Chromium.executable != nil,
            "chromium is not installed (make deps installs it): the OAuth browser test did not run"),
        .timeLimit(.minutes(3)))
    struct OAuthBrowserTests {
        /// The web app: its callback records each query it receives and says so on a page.
        final class WebApp: Sendable {
            let callbacks = Locked<[[String: String]]>([])
            let daemon: HTTPDaemon

            init() throws {
                let callbacks = callbacks
                daemon = try HTTPDaemon(
                    options: HTTPDaemonOptions(
                        host: "127.0.0.1", port: 0, threads: 1, handlerThreads: 1,
                        connectionTimeoutSeconds: 10,
                        requestTimeoutSeconds: 10, connectionLimit: 16, perClientConnectionLimit: 0,
                        bodyLimit: 1024,
                        tlsKeyPEM: nil, tlsCertificatePEM: nil)
                ) { request in
                    // The browser asks for /favicon.ico too.
                    guard request.path == "/callback" else { return HTTPResponse(status: 404) }
                    callbacks.withLock { $0.append(request.query) }
                    return HTTPResponse(
                        status: 200, headers: ["Content-Type": "text/html; charset=utf-8"],
                        body: Data(
                            "<!doctype html><title>Example app</title><h1 id=\"app\">Example app got a code</h1>"
                                .utf8))
                }
            }

            var redirectURI: String { "http://127.0.0.1:\(daemon.port)/callback" }
        }

        @Test("a web app signs its user in through the sign-in page, with a passkey and with a password")
        func signInToAWebApp() async throws {
            let oauth = try OAuthFixture(.live)
            let port = try #require(oauth.test.server.port)
            let app = try WebApp()
            defer { app.daemon.stop(gracePeriod: 1) }
            // Registered without a port: a loopback redirect URI matches any (RFC 8252 §7.3).
            var registration = OAuthClientRegistration(
                name: "Example app", redirectURIs: ["http://127.0.0.1/callback"])
            registration.scopes = []
            let client = try oauth.administration.addClient(registration)
            let browser = try Chromium(executable: try #require(Chromium.executable))
            do {
                try await run(oauth, app, client, browser, origin: "http://localhost:\(port)")
            } catch {
                await browser.close()
                throw error
            }
            await browser.close()
        }

        private func run(
            _ oauth: OAuthFixture, _ app: WebApp, _ client: OAuthClientInfo, _ browser: Chromium,
            origin: String
        ) async throws {
            let page = try await ChromiumPage(browser)
            try await page.send("WebAuthn.enable", [JSONMember("enableUI", .bool(false))])
            _ = try await SignInPageBrowserTests.addAuthenticator(page)

            // 1. The app sends the browser to the authorization endpoint.
            let pkce = PKCE()
            try await navigate(page, to: origin + authorizationPath(client, app, pkce, state: "s-passkey"))
            #expect(
                try await page.evaluate("document.getElementById('continue-to').textContent")
                    == .string("Sign in to continue to Example app."))
            try await screenshot(page, "1-authorize")

            // 2. A passkey sign-up on the page; the page sends the browser on to the app.
            try await page.evaluate("document.getElementById('username').value = 'alice'")
            try await SignInPageBrowserTests.click(page, "#sign-up")
            let first = try await landing(page, app, count: 1)
            try await screenshot(page, "2-back-at-the-app")
            #expect(first["state"] == "s-passkey")
            #expect(first["iss"] == testIssuer)

            // 3. The app's back end exchanges the code: the ID token says a passkey signed in.
            let passkeyTokens = try await exchange(oauth, client, first, app, pkce)
            #expect(passkeyTokens.amr == ["user"])

            // 4. A second request while the page's session lives: "Continue", no new ceremony.
            let again = PKCE()
            try await navigate(page, to: origin + authorizationPath(client, app, again, state: "s-continue"))
            try await page.wait(for: "document.body.dataset.state === 'signed-in'")
            #expect(try await page.evaluate("document.getElementById('continue').hidden") == .bool(false))
            try await SignInPageBrowserTests.click(page, "#continue")
            let second = try await landing(page, app, count: 2)
            #expect(second["state"] == "s-continue")
            #expect(try await exchange(oauth, client, second, app, again).subject == passkeyTokens.subject)

            // 5. Another user, with a password: sign out first.
            try await oauth.client.createAccount("bob")
            let third = PKCE()
            try await navigate(page, to: origin + authorizationPath(client, app, third, state: "s-password"))
            try await SignInPageBrowserTests.click(page, "#sign-out")
            try await SignInPageBrowserTests.settle(page, state: "signed-out", status: "Signed out.")
            try await page.evaluate(
                """
                document.getElementById('password-sign-in').open = true;
                document.getElementById('username').value = 'bob';
                document.getElementById('password').value = \(jsString(Client.password));
                """)
            try await screenshot(page, "3-password")
            try await SignInPageBrowserTests.click(page, "#sign-in-password")
            let fourth = try await landing(page, app, count: 3)
            let passwordTokens = try await exchange(oauth, client, fourth, app, third)
            #expect(passwordTokens.amr == ["pwd"])
            #expect(passwordTokens.subject != passkeyTokens.subject)
        }

        private func authorizationPath(_ client: OAuthClientInfo, _ app: WebApp, _ pkce: PKCE, state: String)
            -> String
        {
            OAuthPaths.authorize + "?"
                + OAuthParameters.encode([
                    ("response_type", "code"), ("client_id", client.clientID),
                    ("redirect_uri", app.redirectURI),
                    ("scope", "openid profile"), ("state", state), ("nonce", "n-" + state),
                    ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
                ])
        }

        private func navigate(_ page: ChromiumPage, to url: String) async throws {
            try await page.send("Page.navigate", [JSONMember("url", .string(url))])
            try await page.wait(
                for: "document.readyState === 'complete' && document.body.dataset.state !== undefined"
                    + " && document.body.dataset.state !== 'busy'")
        }

        /// Waits until the browser is back at the app with its `count`th callback.
        private func landing(_ page: ChromiumPage, _ app: WebApp, count: Int) async throws -> [String: String]
        {
            try await page.wait(
                for:
                    "location.href.startsWith(\(jsString(app.redirectURI))) && document.getElementById('app') !== null"
            )
            let callbacks = app.callbacks.withLock { $0 }
            #expect(callbacks.count == count)
            let query = try #require(callbacks.last)
            #expect(query["error"] == nil, "\(query)")
            return query
        }

        /// The app's back end: exchanges the code and checks the ID token against the JWKS.
        private func exchange(
            _ oauth: OAuthFixture, _ client: OAuthClientInfo, _ callback: [String: String], _ app: WebApp,
            _ pkce: PKCE
        ) async throws -> (subject: String, amr: [String]) {
            let code = try #require(callback["code"])
            let reply = try await oauth.exchange(
                code, clientID: client.clientID, pkce: pkce, redirectURI: app.redirectURI)
            #expect(reply.status == 200, "\(reply.text)")
            let tokens = try JSON.parse(reply.body)
            let idToken = try #require(tokens[string: "id_token"])
            let claims = try JWTVerification.verify(idToken, type: "JWT", keys: try await oauth.keys().keySet)
            #expect(claims[string: "aud"] == client.clientID)
            #expect(claims[string: "nonce"] == "n-" + (callback["state"] ?? ""))
            guard case .array(let amr)? = claims[member: "amr"] else { throw TestFailure("no amr") }
            return (try #require(claims[string: "sub"]), amr.compactMap(\.stringValue))
        }

        private func screenshot(_ page: ChromiumPage, _ name: String) async throws {
            let environment = ProcessInfo.processInfo.environment
            let directory = environment["KEYBOUND_OAUTH_SCREENSHOTS"]
            let update = environment["KEYBOUND_UPDATE_SCREENSHOT"] == "1" && name == "1-authorize"
            guard directory != nil || update else { return }
            let shot = try await page.send("Page.captureScreenshot", [JSONMember("format", .string("png"))])
            let encoded = try #require(shot.field("data")?.text)
            let png = try #require(Data(base64Encoded: encoded))
            if let directory {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                try png.write(to: URL(fileURLWithPath: directory).appendingPathComponent(name + ".png"))
            }
            if update { try png.write(to: Repository.file("docs/images/oauth-sign-in.png")) }
        }
    }
#endif
