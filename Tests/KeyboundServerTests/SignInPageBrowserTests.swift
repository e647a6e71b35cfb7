#if os(Linux)
    import Foundation
    import KeyboundCrypto
    import KeyboundTestSupport
    import KeyboundWebAuthn
    import KeyboundWire
    import Testing

    @testable import KeyboundServer

    /// The sign-in page in a real browser: Debian's headless Chromium with its DevTools WebAuthn
    /// virtual authenticator (CTAP2, internal, resident keys, user verification) signs up, signs
    /// out, signs in, adds a passkey, lists and removes passkeys and devices, through the page and
    /// the server's own endpoints, at `http://localhost:PORT` (Chromium refuses WebAuthn on
    /// 127.0.0.1). Real browser credentials are then replayed and tampered with, straight against
    /// the endpoints.
    ///
    /// `make deps` installs Chromium; without it this suite is skipped with a line saying so.
    /// `KEYBOUND_UPDATE_SCREENSHOT=1` writes the screenshot the README shows to
    /// docs/images/sign-in.png.
    @Suite(
        "The sign-in page in headless Chromium",
        .enabled(
            if: Chromium.executable != nil,
            "chromium is not installed (make deps installs it): the real-browser passkey test did not run"),
        .timeLimit(.minutes(3)))
    struct SignInPageBrowserTests {
        /// A CTAP2 platform authenticator that holds resident keys and verifies its user.
        static func addAuthenticator(_ page: ChromiumPage) async throws -> String {
            let added = try await page.send(
                "WebAuthn.addVirtualAuthenticator",
                [
                    JSONMember(
                        "options",
                        .object([
                            JSONMember("protocol", .string("ctap2")),
                            JSONMember("transport", .string("internal")),
                            JSONMember("hasResidentKey", .bool(true)),
                            JSONMember("hasUserVerification", .bool(true)),
                            JSONMember("isUserVerified", .bool(true)),
                            JSONMember("automaticPresenceSimulation", .bool(true)),
                        ]))
                ])
            guard let id = added.field("authenticatorId")?.text else {
                throw Chromium.Failure("no authenticator")
            }
            return id
        }

        static func click(_ page: ChromiumPage, _ selector: String) async throws {
            try await page.evaluate("document.querySelector(\(jsString(selector))).click()")
        }

        /// Waits until the page has finished what the last click started, and says `message`.
        static func settle(_ page: ChromiumPage, state: String, status: String) async throws {
            try await page.wait(
                for:
                    "document.body.dataset.state === \(jsString(state)) && document.getElementById('status').textContent === \(jsString(status))"
            )
        }

        static func count(_ page: ChromiumPage, _ list: String) async throws -> Int {
            guard
                case .number(let text) = try await page.evaluate(
                    "document.querySelectorAll('#\(list) li').length"),
                let count = Int(text)
            else { return -1 }
            return count
        }

        @Test("sign up, sign out, sign in, add a passkey, list and remove passkeys and devices")
        func passkeysInTheBrowser() async throws {
            let live = try TestServer()
            let port = try #require(live.server.port)
            let origin = "http://localhost:\(port)"
            let browser = try Chromium(executable: try #require(Chromium.executable))
            do {
                try await run(live, browser, origin: origin)
            } catch {
                await browser.close()
                throw error
            }
            await browser.close()
        }

        private func run(_ live: TestServer, _ browser: Chromium, origin: String) async throws {
            let page = try await ChromiumPage(browser)
            try await page.send("WebAuthn.enable", [JSONMember("enableUI", .bool(false))])
            let first = try await Self.addAuthenticator(page)
            try await page.send("Page.navigate", [JSONMember("url", .string(origin + "/"))])
            try await page.wait(
                for: "document.readyState === 'complete' && document.body.dataset.state === 'signed-out'")
            #expect(
                try await page.evaluate("typeof PublicKeyCredential.parseCreationOptionsFromJSON")
                    == .string("function"))

            // Sign up: a new account whose first passkey lives in the first authenticator.
            try await page.evaluate("document.getElementById('username').value = 'alice'")
            try await Self.click(page, "#sign-up")
            try await Self.settle(page, state: "signed-in", status: "Welcome, alice. Your passkey is ready.")
            #expect(try await page.evaluate("document.getElementById('who').textContent") == .string("alice"))
            #expect(try await Self.count(page, "passkeys") == 1)

            // Sign out, then sign in with no username: the discoverable passkey names alice.
            try await Self.click(page, "#sign-out")
            try await Self.settle(page, state: "signed-out", status: "Signed out.")
            try await page.evaluate("document.getElementById('username').value = ''")
            try await Self.click(page, "#sign-in")
            try await Self.settle(page, state: "signed-in", status: "Signed in as alice.")
            #expect(
                try await page.evaluate("document.getElementById('how').textContent.startsWith('by passkey')")
                    == .bool(true))

            // A second passkey, in a second authenticator (the first holds alice's already and is
            // excluded); then sign out and in again, with only the second one present.
            try await page.send(
                "WebAuthn.removeVirtualAuthenticator", [JSONMember("authenticatorId", .string(first))])
            let second = try await Self.addAuthenticator(page)
            // From here until the page reloads, the page runs as in a browser without WebAuthn's
            // JSON helpers (parse…FromJSON, toJSON): its own conversions must do.
            try await page.evaluate(
                """
                PublicKeyCredential.parseCreationOptionsFromJSON = undefined;
                PublicKeyCredential.parseRequestOptionsFromJSON = undefined;
                PublicKeyCredential.prototype.toJSON = undefined;
                """)
            try await Self.click(page, "#add-passkey")
            try await Self.settle(page, state: "signed-in", status: "Passkey added.")
            #expect(try await Self.count(page, "passkeys") == 2)
            try await Self.click(page, "#sign-out")
            try await Self.settle(page, state: "signed-out", status: "Signed out.")
            try await page.evaluate("document.getElementById('username').value = 'alice'")
            try await Self.click(page, "#sign-in")
            try await Self.settle(page, state: "signed-in", status: "Signed in as alice.")

            // A device bound by an app of alice's (through the API, with the page's fresh passkey
            // session), then shown by the page.
            guard let token = try await page.evaluate("sessionStorage.getItem('keybound.access')").text else {
                throw Chromium.Failure("no access token in the page")
            }
            let bound = try await live.client.send(
                API.bindDevice,
                BindDeviceRequest(
                    publicKey: try P256SigningKey().publicKey.spkiDER, name: "Alice's iPhone",
                    keyProtection: .secureEnclave),
                token: token)
            #expect(bound.status == 201, "\(bound.text)")
            try await page.evaluate("document.getElementById('username').value = ''")
            try await page.send("Page.reload")
            try await page.wait(
                for:
                    "document.body.dataset.state === 'signed-in' && document.querySelectorAll('#devices li').length === 1"
            )
            try await screenshot(page)

            // Remove the first passkey (not the one this session came from, which the second
            // authenticator holds), then revoke the device.
            let passkeys = try await live.client.send(API.listPasskeys, token: token).decode(
                PasskeyListResponse.self)
            let current = try await Self.credentialIDs(page, second)
            let firstPasskey = try #require(passkeys.passkeys.first { !current.contains($0.credentialID) })
            try await Self.click(
                page, "#passkeys li[data-passkey-id=\(jsString(firstPasskey.passkeyID))] button")
            try await Self.settle(page, state: "signed-in", status: "Passkey removed.")
            #expect(try await Self.count(page, "passkeys") == 1)
            try await Self.click(page, "#devices li button")
            try await Self.settle(page, state: "signed-in", status: "Device revoked.")
            #expect(
                try await page.evaluate(
                    "document.querySelector('#devices li').textContent.includes('revoked')")
                    == .bool(true))
            let remaining = try await live.client.send(API.listPasskeys, token: token).decode(
                PasskeyListResponse.self)
            #expect(remaining.passkeys.map(\.credentialID) == current)

            try await replayAndTamper(page, live)
            try await exportedCredential(page, live, authenticator: second, origin: origin)
        }

        /// A real assertion from the browser, posted by hand: once it signs in, again it is a
        /// replay; with its client data or signature changed it is refused; never a 5xx.
        private func replayAndTamper(_ page: ChromiumPage, _ live: TestServer) async throws {
            let script = """
                (async () => {
                  const options = await (await fetch('/v1/webauthn/login/options', {method: 'POST',
                    headers: {'Content-Type': 'application/json'}, body: '{}'})).json();
                  const credential = await navigator.credentials.get({
                    publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey)});
                  return JSON.stringify(credential.toJSON());
                })()
                """
            let assertions = try await (0..<3).asyncMap { _ in
                let text = try await page.evaluate(script).text
                return try JSON.parse(Data(try #require(text).utf8))
            }
            let genuine = JSON.serialize(assertions[0])
            #expect(try await live.client.passkeyLogin(genuine).status == 200)
            expectProblem(try await live.client.passkeyLogin(genuine), 409, .challengeUsed)

            // The client data of another ceremony under this signature, and a flipped signature bit.
            let otherClientData = try #require(
                assertions[2].field("response")?.field("clientDataJSON")?.text)
            expectProblem(
                try await live.client.passkeyLogin(
                    replacing("clientDataJSON", in: assertions[1], with: otherClientData)),
                401, .signatureInvalid)
            let signatureText = try #require(assertions[2].field("response")?.field("signature")?.text)
            var signature = try #require(Base64URL.decode(signatureText))
            signature[signature.startIndex + 8] ^= 0x01
            let flipped = try await live.client.passkeyLogin(
                replacing("signature", in: assertions[2], with: Base64URL.encode(signature)))
            #expect((400..<500).contains(flipped.status), "\(flipped.text)")
        }

        /// Chromium's own passkey, exported with its private key (`WebAuthn.getCredentials`),
        /// signs ceremonies that differ from a genuine one in one field each: another origin,
        /// another RP ID, no user verification, a challenge never issued, a counter that did not
        /// rise. Each is refused with its check's 4xx; the genuine one signs in.
        private func exportedCredential(
            _ page: ChromiumPage, _ live: TestServer, authenticator: String, origin: String
        )
            async throws
        {
            let exported = try await page.send(
                "WebAuthn.getCredentials", [JSONMember("authenticatorId", .string(authenticator))])
            guard case .array(let credentials)? = exported.field("credentials"),
                let credential = credentials.first,
                let id = credential.field("credentialId")?.text.flatMap({ Data(base64Encoded: $0) }),
                let pkcs8 = credential.field("privateKey")?.text.flatMap({ Data(base64Encoded: $0) }),
                let handle = credential.field("userHandle")?.text.flatMap({ Data(base64Encoded: $0) }),
                case .number(let countText)? = credential.field("signCount"), let count = UInt32(countText)
            else { throw Chromium.Failure("no exported credential") }
            var passkey = TestAuthenticator(
                key: try P256SigningKey(rawRepresentation: Self.scalar(pkcs8)), credentialId: id)
            passkey.rpId = "localhost"
            passkey.origin = origin
            let client = live.client
            func challenge() async throws -> Data { try await client.loginOptions().challenge }

            var phishing = passkey
            phishing.origin = "https://login.evil.example"
            expectProblem(
                try await client.passkeyLogin(
                    phishing.assertion(challenge: challenge(), signCount: count + 1, userHandle: handle)),
                401, .originNotAllowed)
            var otherRP = passkey
            otherRP.rpId = "evil.example"
            expectProblem(
                try await client.passkeyLogin(
                    otherRP.assertion(challenge: challenge(), signCount: count + 1, userHandle: handle)),
                401, .rpIDMismatch)
            expectProblem(
                try await client.passkeyLogin(
                    passkey.assertion(
                        challenge: challenge(), flags: [.userPresent], signCount: count + 1,
                        userHandle: handle)),
                401, .userVerificationMissing)
            expectProblem(
                try await client.passkeyLogin(
                    passkey.assertion(
                        challenge: SecureRandom.bytes(32), signCount: count + 1, userHandle: handle)),
                401, .challengeMismatch)
            // The genuine one signs in; after it, a counter that is not above its own is a clone's.
            let genuine = try await client.passkeyLogin(
                passkey.assertion(challenge: challenge(), signCount: count + 1, userHandle: handle))
            #expect(genuine.status == 200, "\(genuine.text)")
            expectProblem(
                try await client.passkeyLogin(
                    passkey.assertion(challenge: challenge(), signCount: count, userHandle: handle)),
                401, .clonedAuthenticator)
        }

        /// The private scalar of a PKCS #8 P-256 key: the 32 bytes after ECPrivateKey's version 1
        /// (`02 01 01 04 20`).
        static func scalar(_ pkcs8: Data) throws -> Data {
            let bytes = [UInt8](pkcs8)
            let marker: [UInt8] = [0x02, 0x01, 0x01, 0x04, 0x20]
            guard
                let start = (0...(bytes.count - marker.count - 32)).first(where: {
                    Array(bytes[$0..<$0 + marker.count]) == marker
                })
            else { throw Chromium.Failure("not a PKCS #8 P-256 key") }
            return Data(bytes[start + marker.count..<start + marker.count + 32])
        }

        /// The credential ids an authenticator holds (`WebAuthn.getCredentials` exports them).
        static func credentialIDs(_ page: ChromiumPage, _ authenticator: String) async throws -> [Data] {
            let exported = try await page.send(
                "WebAuthn.getCredentials", [JSONMember("authenticatorId", .string(authenticator))])
            guard case .array(let credentials)? = exported.field("credentials") else {
                throw Chromium.Failure("no credentials")
            }
            return credentials.compactMap {
                $0.field("credentialId")?.text.flatMap { Data(base64Encoded: $0) }
            }
        }

        /// Captures the signed-in page. With `KEYBOUND_UPDATE_SCREENSHOT=1` it becomes
        /// docs/images/sign-in.png, the picture in the README.
        private func screenshot(_ page: ChromiumPage) async throws {
            // The page's width, down to just below its card.
            let height = try await page.evaluate(
                "Math.ceil(document.querySelector('main').getBoundingClientRect().bottom)")
            let shot = try await page.send(
                "Page.captureScreenshot",
                [
                    JSONMember("format", .string("png")),
                    JSONMember(
                        "clip",
                        .object([
                            JSONMember("x", .integer(0)), JSONMember("y", .integer(0)),
                            JSONMember("width", .integer(900)),
                            JSONMember("height", height), JSONMember("scale", .integer(1)),
                        ])),
                ])
            let encoded = try #require(shot.field("data")?.text)
            let png = try #require(Data(base64Encoded: encoded))
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 10_000)
            guard ProcessInfo.processInfo.environment["KEYBOUND_UPDATE_SCREENSHOT"] == "1" else { return }
            let target = Repository.file("docs/images/sign-in.png")
            try FileManager.default.createDirectory(
                at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            try png.write(to: target)
        }
    }

    /// `text` as a JavaScript (JSON) string literal.
    func jsString(_ text: String) -> String { String(decoding: JSON.serialize(.string(text)), as: UTF8.self) }

#endif
