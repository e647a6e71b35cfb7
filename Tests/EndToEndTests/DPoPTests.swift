import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// DPoP end to end (RFC 9449; docs/server.md, "DPoP"): the SDK on an emulated iPhone binds its
/// sessions to a key in the device's secure element that signs without a prompt, every request
/// carries a proof by it, and the tokens, copied off the phone, are worth nothing.
@Suite("DPoP: sessions bound to the phone")
struct DPoPEndToEndTests {
    /// `GET /v1/me` as a client without the key would send it: the copied access token under
    /// `scheme`, no proof.
    static func meWithout(_ backend: Backend, token: String, scheme: String) async throws -> Int {
        var request = URLRequest(url: backend.baseURL.appendingPathComponent("v1/me"))
        request.setValue("\(scheme) \(token)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await backend.urlSession.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test(arguments: [BiometricLogin.Mode.deviceKey, .token])
    func sessionsAreBoundAndCopiedTokensAreUseless(_ mode: BiometricLogin.Mode) async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try await backend.enabledApp(mode, device: phone)
        // The password login's session is bound to a key of the phone's secure element, made
        // with no user verification: nothing was prompted for it.
        let first = try #require(await app.client.currentSession)
        #expect(first.isDPoPBound)
        let dpopKey = try ItemName("acme-\(mode.rawValue).dpop-key")
        #expect(await phone.snapshot().keys.contains(dpopKey.rawValue))
        _ = try await app.client.me()

        // The next launch: Face ID, then a session bound to the same key (a new one signed by the
        // device key, or the same one, refreshed with the stored token).
        let relaunched = try backend.app(mode, device: phone)
        await phone.present(.match)
        let session = try await relaunched.unlock()
        #expect(session.isDPoPBound)
        #expect((session.sessionID == first.sessionID) == (mode == .token))
        #expect(try await relaunched.client.me().sessionID == session.sessionID)
        #expect(try await relaunched.client.devices().isEmpty == (mode == .token))

        // The tokens copied off the phone: the access token as Bearer or DPoP without a proof,
        // the refresh token from a client without the key. All refused; the phone's session
        // goes on (the refresh token's copy did not even end it).
        #expect(try await Self.meWithout(backend, token: session.accessToken, scheme: "Bearer") == 401)
        #expect(try await Self.meWithout(backend, token: session.accessToken, scheme: "DPoP") == 401)
        await expectKeyboundError(.server, recovery: .usePassword, serverCode: .dpopProofInvalid) {
            try await backend.client().resume(refreshToken: session.refreshToken)
        }
        // A client with a key of its own, on another device, fares no better.
        let otherPhone = try makePhone()
        let elsewhere = backend.client()
        await elsewhere.bindSessions(
            to: try await DPoPKey.prepare(in: otherPhone, name: "thief.dpop-key"))
        await expectKeyboundError(.server, recovery: .usePassword, serverCode: .dpopProofInvalid) {
            try await elsewhere.resume(refreshToken: session.refreshToken)
        }
        #expect(try await relaunched.client.me().sessionID == session.sessionID)
        // Past the access token's life, the client refreshes with a proof, bound as before.
        backend.clock.advance(by: 16 * 60)
        #expect(try await relaunched.client.me().sessionID == session.sessionID)
        let refreshed = try #require(await relaunched.client.currentSession)
        #expect(refreshed.isDPoPBound && refreshed.accessToken != session.accessToken)
    }

    @Test func theClientAnswersTheServersNonceOnceAndKeepsTheLatest() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try backend.app(.deviceKey, device: phone)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        // The first proof had no nonce to name: one 400 use_dpop_nonce, then the login.
        #expect(try await backend.requests(API.passwordLogin, status: 400) == 1)
        #expect(try await backend.requests(API.passwordLogin, status: 200) == 1)
        for _ in 0..<3 { _ = try await app.client.me() }
        // Every later request names the nonce the last answer carried: no retries.
        #expect(try await backend.requests(API.me, status: 200) == 3)
        #expect(try await backend.requests(API.me, status: 401) == 0)
        // Ten minutes idle: the nonce is stale; the client takes the new one and goes on.
        backend.clock.advance(by: 601)
        _ = try await app.client.me()
        #expect(try await backend.requests(API.me, status: 401) == 1)
        #expect(try await backend.requests(API.me, status: 200) == 4)
    }

    @Test func withoutDPoPTheSessionsAreBearerSessions() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try await backend.enabledApp(.deviceKey, device: phone, dpop: false)
        let session = try #require(await app.client.currentSession)
        #expect(!session.isDPoPBound)
        #expect(await !phone.snapshot().keys.contains("acme-deviceKey.dpop-key"))
        #expect(try await Self.meWithout(backend, token: session.accessToken, scheme: "Bearer") == 200)
    }
}
