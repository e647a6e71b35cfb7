import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundServer
import KeyboundVerifier
import KeyboundWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Chapter 8 of the demo: the rest of Acme's stack uses what Keybound proved. Acme's web app signs
// Grace in through OpenID Connect with her passkey, its back end verifies the tokens offline, and
// the phone's own session is bound to a Secure Enclave key with DPoP, so a copy of its token is
// worth nothing.

extension DemoStory {
    /// The web app's client registration.
    private static let webRedirect = "https://web.acme.example/callback"

    /// Starts the server with the provider on: its issuer is its own loopback URL, so a port is
    /// picked before it starts (another one if that one was taken meanwhile).
    static func startWithIssuer(_ configuration: inout Configuration) throws -> Server {
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            configuration.port = port
            configuration.issuer = "http://127.0.0.1:\(port)"
            do {
                let server = try Server(configuration: configuration)
                try server.start()
                return server
            } catch let error as ServerError where error.kind == .addressInUse {
                lastError = error
            }
        }
        throw lastError ?? DemoFailure(description: "no free port")
    }

    func openIDConnect(
        configuration: Configuration, baseURL: URL, device: EmulatedDevice,
        passkeys: EmulatedPasskeyAuthenticator
    ) async throws {
        narrator.chapter("8. OpenID Connect for the web app, DPoP for the phone")
        let issuer = configuration.issuer ?? baseURL.absoluteString
        var registration = OAuthClientRegistration(name: "Acme web", redirectURIs: [Self.webRedirect])
        registration.confidential = true
        let web = try ProviderAdministration(configuration: configuration).addClient(registration)
        let secret = try requireValue(web.secret, "a confidential client should get a secret")
        narrator.step(
            "The operator registers Acme's web app: keybound client add \"Acme web\" --confidential",
            "client \(web.clientID.prefix(8))…, its secret shown once and stored as its hash")

        // The web app sends Grace's browser to the authorization endpoint, with PKCE.
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        var request = try requireValue(
            URLComponents(string: issuer + OAuthPaths.authorize), "the issuer's URL")
        request.queryItems = [
            ("response_type", "code"), ("client_id", web.clientID), ("redirect_uri", Self.webRedirect),
            ("scope", "openid profile"), ("state", "acme-web-1"), ("nonce", "n-acme-web-1"),
            ("code_challenge", Base64URL.encode(Digest.sha256(Data(verifier.utf8)))),
            ("code_challenge_method", "S256"),
        ].map { URLQueryItem(name: $0.0, value: $0.1) }
        let authorizationURL = try requireValue(request.url, "the authorization request's URL")
        let page = try await Self.get(authorizationURL)
        try check(
            page.status == 200 && page.text.contains("Sign in to continue to <strong>Acme web</strong>"),
            "the authorization endpoint should answer the sign-in page for Acme web")
        narrator.step(
            "Acme's web app sends Grace's browser to \(OAuthPaths.authorize) (code flow, PKCE S256, state, nonce)",
            "the sign-in page: \"Sign in to continue to Acme web\"")

        // The page signs her in with her passkey, then completes the request.
        let browser = PasskeyLogin(client: KeyboundClient(baseURL: baseURL), authenticator: passkeys)
        await device.present(.match)
        try await browser.signIn()
        let redirect = try await browser.client.authorize(authorizationURL)
        let callback = Dictionary(
            (URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.queryItems ?? []).map {
                ($0.name, $0.value ?? "")
            }, uniquingKeysWith: { first, _ in first })
        let code = try requireValue(callback["code"], "the redirect should carry a code")
        try check(
            redirect.absoluteString.hasPrefix(Self.webRedirect) && callback["state"] == "acme-web-1"
                && callback["iss"] == issuer,
            "the redirect should go to the registered URI with the state and the issuer")
        narrator.step(
            "Grace taps 'Sign in with a passkey' on the page; Face ID matches",
            "back at \(Self.webRedirect) with a code, state and iss (RFC 9207)")

        // The web app's back end exchanges the code and verifies what it got, offline.
        let tokens = try await Self.exchange(
            code: code, verifier: verifier, issuer: issuer, clientID: web.clientID, secret: secret)
        let keys = try JWKS(
            json: try await Self.get(try requireValue(URL(string: issuer + OAuthPaths.jwks), "")).body)
        let access = try AccessTokenVerifier(issuer: issuer, audience: issuer, keys: keys).verify(
            try requireValue(tokens[member: "access_token"]?.stringValue, "an access token"))
        let idToken = try JWTVerification.verify(
            try requireValue(tokens[member: "id_token"]?.stringValue, "an ID token"), type: "JWT",
            keys: keys.keySet)
        try check(
            access.subject == idToken[member: "sub"]?.stringValue && access.authenticationMethods == ["user"]
                && idToken[member: "nonce"]?.stringValue == "n-acme-web-1",
            "the tokens should name Grace, her passkey (amr user) and the web app's nonce")
        narrator.step(
            "The web app's back end exchanges the code (client_secret_basic, the PKCE verifier)",
            "an ID token and an RFC 9068 access token, ES256 under the issuer's JWKS, verified offline: "
                + "sub \(access.subject.prefix(8))…, amr [user] (a passkey with user verification)")

        // The phone's own session: bound to a non-biometric Secure Enclave key with DPoP.
        let phone = try flow(.token, baseURL: baseURL, device: device)
        try await phone.loginWithPassword(username: username, password: password)
        let session = try requireValue(await phone.client.currentSession, "the phone should hold a session")
        try check(session.isDPoPBound, "the phone's session should be DPoP-bound")
        try check(try await phone.client.me().username == username, "the phone's own requests should work")
        narrator.step(
            "Ada's phone logs in; the SDK proves every request with a Secure Enclave key (no Face ID per request)",
            "token_type DPoP: the session is bound to that key, and the app's requests go through")
        let copied = try await Self.get(
            try requireValue(URL(string: issuer + API.me.template), ""),
            authorization: "Bearer " + session.accessToken)
        let copiedAsDPoP = try await Self.get(
            try requireValue(URL(string: issuer + API.me.template), ""),
            authorization: "DPoP " + session.accessToken)
        try check(copied.status == 401 && copiedAsDPoP.status == 401, "a copied token should be refused")
        narrator.step(
            "Someone copies the phone's access token and calls GET /v1/me with it, as Bearer and as DPoP",
            "401 both times: without a proof by the key in the phone's secure element the token is useless")
    }

    func requireValue<T>(_ value: T?, _ what: String) throws -> T {
        guard let value else { throw DemoFailure(description: what) }
        return value
    }

    /// A GET, as a browser or another service sends it.
    static func get(_ url: URL, authorization: String? = nil) async throws -> (
        status: Int, body: Data, text: String
    ) {
        var request = URLRequest(url: url)
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        let (body, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, body, String(decoding: body, as: UTF8.self))
    }

    /// The web app's code exchange: `POST /oauth/token`.
    private static func exchange(
        code: String, verifier: String, issuer: String, clientID: String, secret: String
    )
        async throws -> JSONValue
    {
        let (status, tokens) = try await postForm(
            issuer + OAuthPaths.token,
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", webRedirect),
                ("code_verifier", verifier),
            ], clientID: clientID, secret: secret)
        guard status == 200 else {
            throw DemoFailure(description: "the code exchange failed: \(status) \(text(tokens))")
        }
        return tokens
    }

    /// A confidential client's POST to an OAuth endpoint: form-encoded (RFC 6749 Appendix B),
    /// authenticated with HTTP Basic (`client_secret_basic`).
    /// - Returns: the status and the JSON answer.
    static func postForm(_ url: String, _ pairs: [(String, String)], clientID: String, secret: String)
        async throws -> (status: Int, json: JSONValue)
    {
        guard let url = URL(string: url) else { throw DemoFailure(description: "not a URL: \(url)") }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue(
            "Basic " + Data("\(clientID):\(secret)".utf8).base64EncodedString(),
            forHTTPHeaderField: "Authorization")
        request.httpBody = Data(
            pairs.map { formEncoded($0.0) + "=" + formEncoded($0.1) }.joined(separator: "&").utf8)
        let (body, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard let json = try? JSON.parse(body) else {
            throw DemoFailure(
                description:
                    "\(url.path) answered \(status) without JSON: \(String(decoding: body, as: UTF8.self))")
        }
        return (status, json)
    }

    /// `json` as compact JSON text, for a failure's description.
    static func text(_ json: JSONValue) -> String { String(decoding: JSON.serialize(json), as: UTF8.self) }

    /// `text` percent-encoded for a form: everything but the unreserved characters.
    private static func formEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: formSafe) ?? text
    }

    private static let formSafe = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

/// A free TCP port on 127.0.0.1, from the kernel (bound to port 0, then released).
func freeLoopbackPort() throws -> UInt16 {
    #if canImport(Glibc)
        let socketType = Int32(SOCK_STREAM.rawValue)
    #else
        let socketType = SOCK_STREAM
    #endif
    let descriptor = socket(AF_INET, socketType, 0)
    guard descriptor >= 0 else { throw DemoFailure(description: "no socket for a free port") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
            bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
        }
    }
    guard bound else { throw DemoFailure(description: "no free loopback port") }
    return UInt16(bigEndian: address.sin_port)
}
