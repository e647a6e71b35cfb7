import Foundation
import Keybound
import Testing

/// LocalAuthentication reports no enrollment state while biometrics are locked out or turned
/// off for the app. That must not read as an enrollment change, or a lockout would destroy
/// every `biometryCurrentSet` token.
@Suite("Invalidation markers and unknown enrollment state")
struct InvalidationStateTests {
    /// A plain dictionary store: enough to hold the markers and one item.
    final class MemoryStore: SecureStore, @unchecked Sendable {
        // Safe: tests use it from one task at a time, and every access holds the lock.
        private let lock = NSLock()
        private var items: [String: Data] = [:]

        func store(_ value: Data, as name: ItemName, policy: AccessPolicy, verification: Verification?)
            async throws
        {
            lock.withLock { items[name.rawValue] = value }
        }
        func read(_ name: ItemName, verification: Verification?) async throws -> Data {
            guard let value = lock.withLock({ items[name.rawValue] }) else {
                throw KeyboundError.itemNotFound
            }
            return value
        }
        func update(_ value: Data, as name: ItemName, verification: Verification?) async throws {
            try lock.withLock {
                guard items[name.rawValue] != nil else { throw KeyboundError.itemNotFound }
                items[name.rawValue] = value
            }
        }
        func delete(_ name: ItemName) async throws {
            _ = lock.withLock { items.removeValue(forKey: name.rawValue) }
        }
        func exists(_ name: ItemName) async throws -> Bool { lock.withLock { items[name.rawValue] != nil } }
    }

    /// Reports whatever availability the test sets.
    final class SettableVerifier: UserVerifier, @unchecked Sendable {
        // Safe: every access holds the lock.
        private let lock = NSLock()
        private var current: VerificationAvailability

        init(_ availability: VerificationAvailability) { current = availability }
        func set(_ availability: VerificationAvailability) { lock.withLock { current = availability } }
        func availability() async -> VerificationAvailability { lock.withLock { current } }
        func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
            throw KeyboundError.userCancel
        }
    }

    static func state(_ state: Data?, _ error: KeyboundError? = nil) -> VerificationAvailability {
        VerificationAvailability(
            biometryType: .faceID, biometryError: error, isPasscodeSet: true, enrollmentState: state)
    }

    @Test("Lockout and 'not available' keep the item; nothing enrolled or a new state invalidates it")
    func unknownStateIsNoChange() async throws {
        let verifier = SettableVerifier(Self.state(Data([1])))
        let store = ProtectedStore(store: MemoryStore(), verifier: verifier)
        try await store.store(Data("token".utf8), as: "refresh-token", policy: .biometryCurrentSet)

        verifier.set(Self.state(nil, .biometryLockout))
        #expect(try await store.status("refresh-token") == .present)
        verifier.set(Self.state(nil, .biometryNotAvailable))
        #expect(try await store.status("refresh-token") == .present)
        verifier.set(Self.state(nil, .biometryNotEnrolled))
        #expect(try await store.status("refresh-token") == .invalidated)
        verifier.set(Self.state(Data([2])))
        #expect(try await store.status("refresh-token") == .invalidated)
        await #expect(throws: KeyboundError.invalidated) {
            try await store.read("refresh-token", verification: nil)
        }
        // The marker's word alone deletes nothing: this backend still holds the item (as a real
        // Keychain may hold a dead one), so item and marker stay, and it stays invalidated.
        #expect(try await store.store.exists("refresh-token"))
        #expect(try await store.status("refresh-token") == .invalidated)
    }
}
