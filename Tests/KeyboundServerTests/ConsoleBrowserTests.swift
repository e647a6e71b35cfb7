#if os(Linux)
    import Foundation
    import KeyboundCrypto
    import KeyboundTestSupport
    import KeyboundWire
    import Testing

    @testable import KeyboundServer

    /// The operator console in a real browser (Debian's headless Chromium, with its DevTools
    /// WebAuthn virtual authenticator): an administrator who signed up with a passkey on the
    /// sign-in page signs in to the console with it, reads the charts of the traffic the test made,
    /// finds a user, revokes their device (whose next login is then refused), locks the account,
    /// and reads their own actions in the audit log; a non-administrator is refused.
    ///
    /// `KEYBOUND_UPDATE_SCREENSHOT=1` writes the screenshots docs/console.md shows.
    @Suite(
        "The operator console in headless Chromium",
        .enabled(
            if: Chromium.executable != nil,
            "chromium is not installed (make deps installs it): the console's browser test did not run"),
        .timeLimit(.minutes(3)))
    struct ConsoleBrowserTests {
        typealias Page = SignInPageBrowserTests

        @Test(
            "an administrator signs in with a passkey, reads the charts, revokes a device, locks an account")
        func theConsoleInTheBrowser() async throws {
            let live = try TestServer { $0.adminListen = ListenAddress(host: "127.0.0.1", port: 0) }
            let browser = try Chromium(executable: try #require(Chromium.executable))
            do {
                try await run(live, browser)
            } catch {
                await browser.close()
                throw error
            }
            await browser.close()
        }

        private func run(_ live: TestServer, _ browser: Chromium) async throws {
            let port = try #require(live.server.port)
            let adminPort = try #require(live.server.adminPort)
            let page = try await ChromiumPage(browser)
            try await page.send("WebAuthn.enable", [JSONMember("enableUI", .bool(false))])
            try await page.send(
                "Emulation.setDeviceMetricsOverride",
                [
                    JSONMember("width", .integer(1100)), JSONMember("height", .integer(900)),
                    JSONMember("deviceScaleFactor", .integer(1)), JSONMember("mobile", .bool(false)),
                ])
            _ = try await Page.addAuthenticator(page)

            // root signs up with a passkey on the public sign-in page, and an operator makes them
            // an administrator.
            try await page.send("Page.navigate", [JSONMember("url", .string("http://localhost:\(port)/"))])
            try await page.wait(
                for: "document.readyState === 'complete' && document.body.dataset.state === 'signed-out'")
            try await page.evaluate("document.getElementById('username').value = 'root'")
            try await Page.click(page, "#sign-up")
            try await Page.settle(page, state: "signed-in", status: "Welcome, root. Your passkey is ready.")
            try AccountAdministration(configuration: live.server.configuration).grant(.admin, to: "root")

            // Traffic: alice logs in with her password and her device; two wrong passwords.
            let (_, key, deviceID) = try await live.client.userWithDevice("alice")
            let challenge = try await live.client.challenge(deviceID)
            #expect(
                try await live.client.deviceLogin(
                    challengeID: challenge.challengeID, signature: try sign(challenge.payload, with: key)
                ).status == 200)
            for _ in 0..<2 {
                let wrong = try await live.client.send(
                    API.passwordLogin,
                    PasswordLoginRequest(
                        username: Username("alice"), password: "not her password", clientID: ClientID("app-1")
                    ))
                #expect(wrong.status == 401)
            }
            try await live.client.createAccount("bob")

            // The console: bob's right password is refused, since he is no administrator.
            try await page.send(
                "Page.navigate", [JSONMember("url", .string("http://localhost:\(adminPort)/"))])
            try await page.wait(
                for: "document.readyState === 'complete' && document.body.dataset.state === 'signed-out'")
            try await page.evaluate(
                """
                document.getElementById('username').value = 'bob';
                document.getElementById('password').value = \(jsString(Client.password));
                """)
            try await Page.click(page, "#sign-in-password")
            try await page.wait(
                for: "document.getElementById('status').textContent.includes('admin role')")
            #expect(try await page.evaluate("sessionStorage.length") == .number("0"))

            // root signs in with the passkey: the overview's charts show the test's traffic.
            try await page.evaluate("document.getElementById('username').value = 'root'")
            try await Page.click(page, "#sign-in-passkey")
            try await page.wait(
                for: "document.body.dataset.state === 'ready' && document.body.dataset.page === 'overview'")
            let totals = try await seriesTotals(page)
            // Passkey: root's sign-up and sign-in; password: alice; device: alice's device.
            #expect(totals["login.passkey"] == 2)
            #expect(totals["login.password"] == 1)
            #expect(totals["login.device"] == 1)
            #expect(totals["failure.password"] == 2)
            #expect(totals["throttled.password"] == 0)
            try await screenshot(page, "console-overview")

            // Users: find alice, revoke her device; its next login is refused.
            try await page.evaluate("location.hash = '#users'")
            try await page.wait(for: "document.body.dataset.page === 'users'")
            try await page.evaluate("document.getElementById('user-query').value = 'ali'")
            try await Page.click(page, "#user-search")
            try await page.wait(for: "document.querySelectorAll('#user-list button').length === 1")
            try await Page.click(page, "#user-list button")
            try await page.wait(for: "document.querySelectorAll('#user-devices td button').length === 1")
            try await Page.click(page, "#user-devices td button")
            try await page.wait(for: "document.getElementById('status').textContent === 'Device revoked.'")
            let next = try await live.client.send(API.createChallenge, ChallengeRequest(deviceID: deviceID))
            #expect(next.problem?.code == .deviceRevoked, "\(next.text)")

            // Lock the account: alice's right password no longer opens a session.
            try await Page.click(page, "#user-lock")
            try await page.wait(for: "document.getElementById('status').textContent === 'Account locked.'")
            try await page.wait(for: "document.getElementById('user-facts').textContent.includes('LOCKED')")
            let locked = try await live.client.send(
                API.passwordLogin,
                PasswordLoginRequest(
                    username: Username("alice"), password: Client.password, clientID: ClientID("app-1")))
            #expect(locked.problem?.code == .accountLocked, "\(locked.text)")
            try await screenshot(page, "console-user")

            // The audit log shows root's actions on alice, under root's id.
            let rootID = try #require(
                try await page.evaluate(
                    "fetch('/admin/v1/me', {headers: {Authorization: 'Bearer ' + sessionStorage.getItem('keybound.console.access')}}).then(r => r.json()).then(j => j.user_id)"
                ).text)
            try await page.evaluate("location.hash = '#audit'")
            try await page.wait(for: "document.body.dataset.page === 'audit'")
            try await page.evaluate("document.getElementById('audit-user').value = 'alice'")
            try await Page.click(page, "#audit-filter")
            try await page.wait(
                for:
                    "[...document.querySelectorAll('#audit-events tr')].some(r => r.textContent.includes('account_locked') && r.textContent.includes(\(jsString(rootID))))"
            )
            #expect(
                try await page.evaluate(
                    "[...document.querySelectorAll('#audit-events tr')].some(r => r.textContent.includes('device_revoked') && r.textContent.includes(\(jsString(rootID))))"
                ) == .bool(true))
        }

        /// The total of each series in the overview's charts, as the page shows them (the keys
        /// under each chart carry their totals).
        private func seriesTotals(_ page: ChromiumPage) async throws -> [String: Int] {
            let shown = try await page.evaluate(
                "JSON.stringify(Object.fromEntries([...document.querySelectorAll('.key')].map(k => [k.dataset.series, Number(k.dataset.total)])))"
            )
            guard case .object(let members) = try JSON.parse(Data((shown.text ?? "{}").utf8)) else {
                return [:]
            }
            var totals: [String: Int] = [:]
            for member in members {
                if case .number(let text) = member.value { totals[member.name] = Int(text) }
            }
            #expect(totals.count == 14, "the series shown: \(totals.keys.sorted())")
            return totals
        }

        /// Captures the page. With `KEYBOUND_UPDATE_SCREENSHOT=1` it becomes docs/images/NAME.png.
        private func screenshot(_ page: ChromiumPage, _ name: String) async throws {
            let height = try await page.evaluate("Math.ceil(document.documentElement.scrollHeight)")
            let shot = try await page.send(
                "Page.captureScreenshot",
                [
                    JSONMember("format", .string("png")), JSONMember("captureBeyondViewport", .bool(true)),
                    JSONMember(
                        "clip",
                        .object([
                            JSONMember("x", .integer(0)), JSONMember("y", .integer(0)),
                            JSONMember("width", .integer(1100)), JSONMember("height", height),
                            JSONMember("scale", .integer(1)),
                        ])),
                ])
            let encoded = try #require(shot.field("data")?.text)
            let png = try #require(Data(base64Encoded: encoded))
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 10_000)
            guard ProcessInfo.processInfo.environment["KEYBOUND_UPDATE_SCREENSHOT"] == "1" else { return }
            try png.write(to: Repository.file("docs/images/\(name).png"))
        }
    }
#endif
