import Foundation
import Keybound
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// An app holding a Keybound session completes another app's OAuth authorization request
/// (``KeyboundClient/authorize(_:)``), as the sign-in page does after a sign-in there.
@Suite("The SDK completes authorization requests")
struct AuthorizeTests {
    /// - Parameter dpopBound: the app's session is bound to a DPoP key, as `BiometricLogin`'s
    ///   are by default.
    @Test(arguments: [false, true]) func anAppWithASessionAnswersAnAuthorizationRequest(dpopBound: Bool)
        async throws
    {
        let provider = try ProviderBackend()
        defer { provider.shutDown() }
        let (backend, issuer) = (provider.backend, provider.issuer)
        let web = try provider.administration.addClient(
            OAuthClientRegistration(name: "TV app", redirectURIs: ["https://tv.example/callback"]))
        let client = backend.client()
        if dpopBound {
            await client.bindSessions(to: try await DPoPKey.prepare(in: try makePhone(), name: "tv.dpop-key"))
        }
        _ = try await client.createAccount(username: "ada", password: Backend.password)
        try await client.loginWithPassword(username: "ada", password: Backend.password, clientID: "phone")
        #expect(await client.currentSession?.isDPoPBound == dpopBound)
        func request(_ clientID: String, _ redirectURI: String) throws -> URL {
            var parts = try #require(URLComponents(string: issuer + "/oauth/authorize"))
            parts.queryItems = [
                URLQueryItem(name: "client_id", value: clientID),
                URLQueryItem(name: "redirect_uri", value: redirectURI),
                URLQueryItem(name: "response_type", value: "code"),
                URLQueryItem(name: "scope", value: "openid"),
                URLQueryItem(name: "state", value: "tv-1"),
                URLQueryItem(name: "code_challenge", value: Base64URL.encode(Data(repeating: 7, count: 32))),
                URLQueryItem(name: "code_challenge_method", value: "S256"),
            ]
            return try #require(parts.url)
        }
        let next = try await client.authorize(try request(web.clientID, "https://tv.example/callback"))
        let answer = try #require(URLComponents(url: next, resolvingAgainstBaseURL: false))
        #expect(answer.host == "tv.example")
        let items = Dictionary(
            uniqueKeysWithValues: (answer.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(items["code"]?.isEmpty == false)
        #expect(items["state"] == "tv-1")
        #expect(items["iss"] == issuer)

        for (clientID, redirectURI, code) in [
            (web.clientID, "https://attacker.example/callback", ProblemCode.unregisteredRedirectURI),
            ("cli_unknown", "https://tv.example/callback", .unknownClient),
        ] {
            do {
                _ = try await client.authorize(try request(clientID, redirectURI))
                Issue.record("\(redirectURI) for \(clientID) was answered")
            } catch let error as KeyboundError {
                #expect(error.serverCode == code)
            }
        }
        // Five minutes after the sign-in, the user signs in again first.
        backend.clock.advance(by: 301)
        do {
            _ = try await client.authorize(try request(web.clientID, "https://tv.example/callback"))
            Issue.record("an old sign-in answered an authorization request")
        } catch let error as KeyboundError {
            #expect(error.serverCode == .stepUpRequired)
        }
        let bare = try #require(URL(string: issuer + "/oauth/authorize"))
        await #expect(throws: KeyboundError.invalidInput("")) { _ = try await client.authorize(bare) }
    }
}
