import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// Story 4: app lock — a grace period in the background, verification to come back, a
/// password login once the session is past its validity. Time is the backend's manual clock,
/// shared by the app lock, the secret cache (as a monotonic clock), the client and the server.
@Suite("Story 4: app lock")
struct AppLockTests {
    @Test func graceLockUnlockCancelAndSessionValidity() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        try await backend.createUser("ada")
        let app = try backend.app(.token, device: phone)
        let cache = try SecretCache(lifetime: 60, clock: backend.monotonicClock)
        let lock = try AppLock(
            verifier: phone, gracePeriod: 30, sessionValidity: 3600, clock: backend.monotonicClock,
            cache: cache)

        // Before any login there is nothing to unlock: a password is needed.
        #expect(await lock.state == .requiresPassword)
        #expect(await lock.willEnterForeground() == .requiresPassword)
        await expectKeyboundError(.sessionExpired, recovery: .usePassword) {
            try await lock.unlock(reason: "Unlock Acme")
        }

        try await app.loginWithPassword(username: "ada", password: Backend.password)
        await lock.sessionStarted()
        #expect(await lock.state == .unlocked)

        // Within the grace period (up to and including 30 s): still unlocked, no prompt.
        await lock.didEnterBackground()
        backend.clock.advance(by: 10)
        #expect(await lock.willEnterForeground() == .unlocked)
        await lock.didEnterBackground()
        backend.clock.advance(by: 30)
        #expect(await lock.willEnterForeground() == .unlocked)
        // Foreground time does not count: only one background stretch at a time.
        backend.clock.advance(by: 600)
        #expect(await lock.willEnterForeground() == .unlocked)

        // Past it: locked.
        await lock.didEnterBackground()
        backend.clock.advance(by: 31)
        #expect(await lock.willEnterForeground() == .locked)

        // The user cancels the prompt: still locked, silently.
        await expectKeyboundError(.userCancel, recovery: .silent) {
            try await lock.unlock(reason: "Unlock Acme")
        }
        #expect(await lock.state == .locked)
        // Someone else's face, twice, then the passcode (the app lock accepts it).
        await phone.present(.noMatch, .noMatch, .userCancel)
        await expectKeyboundError(.userCancel) { try await lock.unlock(reason: "Unlock Acme") }
        #expect(await lock.state == .locked)
        await phone.present(.match)
        try await lock.unlock(reason: "Unlock Acme")
        #expect(await lock.state == .unlocked)
        // The server session was never touched by the lock.
        #expect(try await app.client.me().username == "ada")

        // Locked again, and unlocked with the device passcode after Face ID fails.
        await lock.didEnterBackground()
        backend.clock.advance(by: 120)
        #expect(await lock.willEnterForeground() == .locked)
        await phone.present(.noMatch, .noMatch, .passcode("123456"))
        try await lock.unlock(reason: "Unlock Acme")
        #expect(await lock.state == .unlocked)
        // Unlocking an unlocked app asks nothing.
        try await lock.unlock(reason: "Unlock Acme")
        #expect(await phone.snapshot().queuedOutcomes == 0)

        // Past the session validity (1 h since login): a password login, not a face.
        await lock.didEnterBackground()
        backend.clock.advance(by: 3600)
        #expect(await lock.willEnterForeground() == .requiresPassword)
        await phone.present(.match)
        await expectKeyboundError(.sessionExpired, recovery: .usePassword) {
            try await lock.unlock(reason: "Unlock Acme")
        }
        #expect(await lock.state == .requiresPassword)
        #expect(await phone.snapshot().queuedOutcomes == 1, "no prompt for an expired session")
        await app.client.forgetSession()
        #expect(await app.client.currentSession == nil)

        // The password path restarts the clock.
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        await lock.sessionStarted()
        #expect(await lock.state == .unlocked)
        #expect(try await app.client.me().authMethod == .password)
    }

    /// A locked app whose session runs out while the prompt waits: unlock says so.
    @Test func aLockedAppPastValidityThrowsSessionExpiredOnUnlock() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let lock = try AppLock(
            verifier: phone, gracePeriod: 0, sessionValidity: 600, clock: backend.monotonicClock)
        await lock.sessionStarted()
        await lock.didEnterBackground()
        backend.clock.advance(by: 1)
        #expect(await lock.willEnterForeground() == .locked)
        backend.clock.advance(by: 600)
        await phone.present(.match)
        await expectKeyboundError(.sessionExpired) { try await lock.unlock(reason: "Unlock Acme") }
        #expect(await lock.state == .requiresPassword)
        #expect(await phone.snapshot().queuedOutcomes == 1)
        await lock.sessionEnded()
        #expect(await lock.state == .requiresPassword)
    }

    /// Setting the phone's clock back while the app is in the background does not skip the
    /// lock: the lock measures time on a monotonic clock, and should that ever run backwards,
    /// a negative time away counts as too long.
    @Test func aClockThatGoesBackDoesNotSkipTheLock() async throws {
        let phone = try makePhone()
        let ticks = Mutex<TimeInterval>(1_000)
        let clock = MonotonicClock { ticks.withLock { $0 } }
        let cache = try SecretCache(lifetime: 60, clock: clock)
        let lock = try AppLock(
            verifier: phone, gracePeriod: 30, sessionValidity: 3600, clock: clock, cache: cache)
        await lock.sessionStarted()

        await lock.didEnterBackground()
        ticks.withLock { $0 -= 3600 }
        #expect(await lock.willEnterForeground() == .requiresPassword, "the session's age is unknown")

        ticks.withLock { $0 += 3600 }
        await lock.sessionStarted()
        ticks.withLock { $0 += 10 }
        await lock.didEnterBackground()
        ticks.withLock { $0 -= 1 }
        await cache.put(Data("card 4242".utf8), for: "acme.card")
        #expect(await lock.willEnterForeground() == .locked)
        ticks.withLock { $0 -= 1 }
        #expect(await cache.value(for: "acme.card") == nil, "a secret is not kept longer either")
    }

    /// The live clock is the system's continuous clock, not the wall clock.
    @Test func theLiveClockMovesForward() async throws {
        let first = MonotonicClock.live.now()
        try await Task.sleep(nanoseconds: 2_000_000)
        #expect(MonotonicClock.live.now() > first)
    }

    @Test func secretCacheEntriesExpireAndAreClearedOnBackgroundAndLogout() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let cache = try SecretCache(lifetime: 60, clock: backend.monotonicClock)
        let lock = try AppLock(
            verifier: phone, gracePeriod: 30, sessionValidity: 3600, clock: backend.monotonicClock,
            cache: cache)
        await lock.sessionStarted()

        // Expiry: fresh for its lifetime, gone after it (and dropped on read).
        await cache.put(Data("card 4242".utf8), for: "acme.card")
        backend.clock.advance(by: 59)
        #expect(await cache.value(for: "acme.card") == Data("card 4242".utf8))
        backend.clock.advance(by: 2)
        #expect(await cache.value(for: "acme.card") == nil)
        #expect(await cache.count == 0)

        // Background clears everything at once, even fresh entries and within the grace period.
        await cache.put(Data("card 4242".utf8), for: "acme.card")
        await cache.put(Data("iban DE00".utf8), for: "acme.iban")
        #expect(await cache.count == 2)
        await lock.didEnterBackground()
        #expect(await cache.count == 0)
        #expect(await cache.value(for: "acme.card") == nil)
        #expect(await lock.willEnterForeground() == .unlocked)

        // Logout clears it too.
        await cache.put(Data("card 4242".utf8), for: "acme.card")
        await lock.sessionEnded()
        #expect(await cache.count == 0)

        // Lifetimes are bounded like reuse windows.
        #expect(throws: KeyboundError.invalidInput) { try SecretCache(lifetime: 301) }
        #expect(throws: KeyboundError.invalidInput) { try SecretCache(lifetime: -1) }
    }
}
