import Foundation
import Keybound
import KeyboundServer
import KeyboundWire
import Testing

/// The client's single-flight refresh, counted on the server: however many calls find the
/// access token expired at once, exactly one `POST /v1/sessions/refresh` goes out.
@Suite("Single-flight refresh")
struct RefreshTests {
    static let callers = 100

    /// Runs `callers` concurrent `me()` calls; returns each one's outcome.
    static func concurrentMe(_ client: KeyboundClient) async -> [Result<MeResponse, any Error>] {
        await withTaskGroup(of: Result<MeResponse, any Error>.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    do { return .success(try await client.me()) } catch { return .failure(error) }
                }
            }
            var results: [Result<MeResponse, any Error>] = []
            for await result in group { results.append(result) }
            return results
        }
    }

    static func loggedIn(_ backend: Backend) async throws -> KeyboundClient {
        try await backend.createUser("ada")
        let client = backend.client()
        try await client.loginWithPassword(username: "ada", password: Backend.password, clientID: "phone-1")
        return client
    }

    /// The client knows the token expired (its clock says so) and refreshes before calling.
    @Test func oneRefreshForAHundredCallersWhenTheClientSeesTheTokenExpired() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let client = try await Self.loggedIn(backend)
        let before = try #require(await client.currentSession)
        let refreshesBefore = try await backend.requests(API.refresh)

        backend.clock.advance(by: 16 * 60)  // server and client: the 15-minute token is over
        let results = await Self.concurrentMe(client)

        let users = try results.map { try $0.get() }
        #expect(users.count == Self.callers)
        #expect(Set(users.map(\.userID)) == [before.userID])
        #expect(Set(users.map(\.sessionID)) == [before.sessionID], "a refresh keeps the session")
        #expect(try await backend.requests(API.refresh) - refreshesBefore == 1)
        #expect(try await backend.requests(API.refresh, status: 200) == 1)
        #expect(try await backend.requests(API.me, status: 401) == 0, "no call went out stale")
        let after = try #require(await client.currentSession)
        #expect(after.accessToken != before.accessToken)
        #expect(after.refreshToken != before.refreshToken)
    }

    /// Only the server knows (its clock moved, the client's did not): every call is refused
    /// once with `token_invalid`, and still only one refresh goes out before they retry.
    @Test func oneRefreshForAHundredCallersWhenOnlyTheServerSeesTheTokenExpired() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        try await backend.createUser("ada")
        let client = KeyboundClient(baseURL: backend.baseURL, urlSession: backend.urlSession, clock: .system)
        try await client.loginWithPassword(username: "ada", password: Backend.password, clientID: "phone-1")
        let userID = try #require(await client.currentSession).userID

        backend.clock.advance(by: 16 * 60)  // the server only
        let results = await Self.concurrentMe(client)

        let users = try results.map { try $0.get() }
        #expect(Set(users.map(\.userID)) == [userID])
        #expect(try await backend.requests(API.refresh) == 1)
        #expect(try await backend.requests(API.me, status: 200) == Self.callers)
    }

    /// The refresh itself is refused (the session was ended elsewhere): all callers learn that
    /// the session is over, and the refused refresh was still sent once only.
    @Test func aRefusedRefreshFailsEveryCallerWithSessionExpiredAfterOneRefresh() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let client = try await Self.loggedIn(backend)
        // The same installation logs in again from elsewhere (a restored backup): the first
        // session, and with it its refresh token, is revoked.
        try await backend.client().loginWithPassword(
            username: "ada", password: Backend.password, clientID: "phone-1")

        backend.clock.advance(by: 16 * 60)
        let results = await Self.concurrentMe(client)

        #expect(results.count == Self.callers)
        for result in results {
            switch result {
            case .success(let me): Issue.record("a call succeeded on a revoked session: \(me)")
            case .failure(let error):
                let keybound = error as? KeyboundError
                #expect(keybound?.code == .sessionExpired, "\(error)")
                #expect(keybound?.recovery == .usePassword, "\(error)")
            }
        }
        #expect(try await backend.requests(API.refresh) == 1)
        #expect(try await backend.requests(API.refresh, status: 401) == 1)
        #expect(await client.currentSession == nil)
    }

    /// The same, when only the server knows the access token is dead (revoked, not expired).
    @Test func aRevokedSessionFailsEveryCallerWithSessionExpiredAfterOneRefresh() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let client = try await Self.loggedIn(backend)
        try await backend.client().loginWithPassword(
            username: "ada", password: Backend.password, clientID: "phone-1")

        let results = await Self.concurrentMe(client)

        for result in results {
            if case .failure(let error) = result {
                #expect((error as? KeyboundError)?.code == .sessionExpired, "\(error)")
            } else {
                Issue.record("a call succeeded on a revoked session")
            }
        }
        #expect(try await backend.requests(API.refresh) == 1)
        #expect(await client.currentSession == nil)
    }
}
