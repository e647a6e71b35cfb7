import Foundation

/// Locks the app when it stays in the background longer than a grace period; coming back
/// needs a verification; a session older than its validity needs a password login instead.
///
/// Time is measured on a ``MonotonicClock``: setting the phone's clock back does not shorten
/// the time in the background or the session's age, and an elapsed time that comes out
/// negative anyway counts as "too long" (locked, or password required).
///
/// ```swift
/// // scenePhase == .background:
/// await appLock.didEnterBackground()
/// // scenePhase == .active:
/// if await appLock.willEnterForeground() == .locked { try await appLock.unlock(reason: "Unlock Acme") }
/// ```
public actor AppLock {
    /// Where the app stands.
    public enum State: String, Sendable, Hashable {
        /// In use.
        case unlocked
        /// Needs a verification.
        case locked
        /// The session is too old: a password login is needed.
        case requiresPassword
    }

    /// Seconds in the background before the app locks.
    public let gracePeriod: TimeInterval
    /// How long a session may be resumed by verification alone.
    public let sessionValidity: TimeInterval
    private let verifier: any UserVerifier
    private let policy: AccessPolicy
    private let clock: MonotonicClock
    private let cache: SecretCache?
    private var backgroundedAt: TimeInterval?
    private var sessionStartedAt: TimeInterval?
    /// The current state.
    public private(set) var state: State = .requiresPassword

    /// An app lock that starts in ``State/requiresPassword``, until ``sessionStarted()``.
    ///
    /// - Parameters:
    ///   - verifier: shows the unlock prompt.
    ///   - gracePeriod: 0…3600 s in the background before locking.
    ///   - sessionValidity: how long after login verification alone may unlock (> 0).
    ///   - policy: what unlocking asks for (default: biometrics or passcode).
    ///   - clock: measures time in the background and the session's age.
    ///   - cache: cleared whenever the app locks or goes to the background.
    /// - Throws: ``KeyboundError/invalidInput`` for durations out of range.
    public init(
        verifier: any UserVerifier, gracePeriod: TimeInterval = 30, sessionValidity: TimeInterval = 12 * 3600,
        policy: AccessPolicy = .biometryOrPasscode, clock: MonotonicClock = .live, cache: SecretCache? = nil
    ) throws {
        guard (0...3600).contains(gracePeriod) else {
            throw KeyboundError.invalidInput("gracePeriod must be 0…3600 s")
        }
        guard sessionValidity > 0, sessionValidity.isFinite else {
            throw KeyboundError.invalidInput("sessionValidity must be positive")
        }
        self.verifier = verifier
        self.gracePeriod = gracePeriod
        self.sessionValidity = sessionValidity
        self.policy = policy
        self.clock = clock
        self.cache = cache
    }

    /// A login (password or biometric) just happened.
    public func sessionStarted() {
        sessionStartedAt = clock.now()
        state = .unlocked
    }

    /// The user logged out.
    public func sessionEnded() async {
        sessionStartedAt = nil
        state = .requiresPassword
        await cache?.clear()
    }

    /// The app went to the background.
    public func didEnterBackground() async {
        backgroundedAt = clock.now()
        await cache?.clear()
    }

    /// The app came back. Returns what it must show.
    @discardableResult
    public func willEnterForeground() -> State {
        defer { backgroundedAt = nil }
        guard state != .requiresPassword else { return state }
        if sessionExpired() {
            state = .requiresPassword
        } else if let backgroundedAt, Self.exceeds(since: backgroundedAt, gracePeriod, now: clock.now()) {
            state = .locked
        }
        return state
    }

    /// Unlocks with a verification.
    /// - Throws: ``KeyboundError/sessionExpired`` when the session is past its validity (the
    ///   state becomes `requiresPassword`); verification errors as the verifier reports them.
    public func unlock(reason: String) async throws {
        guard state != .requiresPassword, !sessionExpired() else {
            state = .requiresPassword
            throw KeyboundError(
                .sessionExpired, message: "the session is past its validity: log in with the password")
        }
        guard state == .locked else { return }
        _ = try await verifier.verify(policy, prompt: VerificationPrompt(reason: reason))
        // The prompt took time: a logout or the session's end while it was up wins.
        guard state == .locked, !sessionExpired() else {
            state = .requiresPassword
            throw KeyboundError(.sessionExpired, message: "the session ended while the prompt was shown")
        }
        state = .unlocked
    }

    private func sessionExpired() -> Bool {
        guard let sessionStartedAt else { return true }
        return Self.exceeds(since: sessionStartedAt, sessionValidity, now: clock.now())
    }

    /// Whether more than `limit` seconds passed since `start`. A negative elapsed time cannot
    /// happen on a monotonic clock; should it anyway, it counts as too long, never as "just now".
    static func exceeds(since start: TimeInterval, _ limit: TimeInterval, now: TimeInterval) -> Bool {
        let elapsed = now - start
        return elapsed < 0 || elapsed > limit
    }
}

/// A short-lived in-memory cache for secrets that were read after a verification, so one
/// screen does not prompt twice. Cleared on lock, on background and on demand.
public actor SecretCache {
    private struct Entry {
        let value: Data
        let storedAt: TimeInterval
    }

    /// How long an entry lives (0…300 s, like a reuse window).
    public let lifetime: TimeInterval
    private let clock: MonotonicClock
    private var entries: [ItemName: Entry] = [:]

    /// An empty cache whose entries live `lifetime` seconds by `clock`.
    /// - Parameters:
    ///   - lifetime: how long an entry lives, 0…300 s (like a reuse window).
    ///   - clock: measures an entry's age (setting the phone's clock back does not keep a secret
    ///     longer).
    /// - Throws: ``KeyboundError/invalidInput`` outside 0…300 s.
    public init(lifetime: TimeInterval = 60, clock: MonotonicClock = .live) throws {
        guard (0...AccessPolicy.maximumReuseDuration).contains(lifetime) else {
            throw KeyboundError.invalidInput("a cache lifetime is 0…300 s")
        }
        self.lifetime = lifetime
        self.clock = clock
    }

    /// Keeps `value` for ``lifetime`` seconds.
    public func put(_ value: Data, for name: ItemName) {
        entries[name] = Entry(value: value, storedAt: clock.now())
    }

    /// The value, if still fresh (an expired entry is dropped).
    public func value(for name: ItemName) -> Data? {
        guard let entry = entries[name] else { return nil }
        guard !AppLock.exceeds(since: entry.storedAt, lifetime, now: clock.now()) else {
            entries[name] = nil
            return nil
        }
        return entry.value
    }

    /// Forgets everything.
    public func clear() { entries.removeAll() }

    /// How many entries are held (fresh or not yet dropped).
    public var count: Int { entries.count }
}
