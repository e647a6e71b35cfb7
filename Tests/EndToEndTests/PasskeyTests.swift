import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// Passkeys end to end: the SDK's flow and the emulated platform authenticator against the real
/// server over loopback.
@Suite("Passkeys end to end")
struct PasskeyTests {
    static let relyingPartyID = "acme.example"

    /// A server that is the relying party `acme.example`; the emulated iPhone writes the origin
    /// `https://acme.example`, as Apple's platform authenticator does for an app of that domain.
    static func backend() throws -> Backend {
        try Backend {
            $0.relyingPartyID = relyingPartyID
            $0.origins = ["https://\(relyingPartyID)"]
        }
    }

    /// The app's passkey flow at launch: a new client. A new sign-in from the same client id ends
    /// that client's previous session.
    static func app(
        _ backend: Backend, _ authenticator: EmulatedPasskeyAuthenticator, clientID: String = "phone-passkey"
    ) -> PasskeyLogin {
        PasskeyLogin(
            client: backend.client(), authenticator: authenticator, clientID: clientID,
            clock: backend.clientClock)
    }

    @Test("sign up, sign in, add a second passkey, remove one")
    func signUpSignInAddAndRemove() async throws {
        let backend = try Self.backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let phonePasskeys = try EmulatedPasskeyAuthenticator(device: phone)

        await phone.present(.match)
        let signUp = Self.app(backend, phonePasskeys)
        let first = try await signUp.signUp(username: "grace")
        let me = try await signUp.client.me()
        #expect(me.username == "grace" && me.authMethod == .passkey && me.sessionID == first.sessionID)
        #expect(try await phonePasskeys.passkeys().map(\.userName) == ["grace"])

        // Relaunch: no username, no password; the passkey on the phone answers.
        let relaunched = Self.app(backend, phonePasskeys)
        await phone.present(.match)
        try await relaunched.signIn()
        #expect(try await relaunched.client.me().userID == me.userID)

        // Within the step-up window of that sign-in, a second device's passkey joins the account.
        let laptop = try makePhone(biometry: .touchID)
        let laptopPasskeys = try EmulatedPasskeyAuthenticator(device: laptop)
        await laptop.present(.match)
        let added = try await PasskeyLogin(
            client: relaunched.client, authenticator: laptopPasskeys, clock: backend.clientClock
        ).addPasskey()
        let listed = try await relaunched.passkeys()
        #expect(listed.count == 2 && listed.contains(added))
        await laptop.present(.match)
        let laptopApp = Self.app(backend, laptopPasskeys, clientID: "laptop-passkey")
        try await laptopApp.signIn()

        // On the laptop, Grace removes the phone's passkey: the sessions it opened end, and it
        // signs in no more.
        let phoneCredential = try #require(try await phonePasskeys.passkeys().first?.credentialID)
        let phoneEntry = try #require(listed.first { $0.credentialID == phoneCredential })
        try await laptopApp.removePasskey(phoneEntry.passkeyID)
        let remaining = try await laptopApp.passkeys()
        #expect(remaining.map(\.passkeyID) == [added.passkeyID])
        await expectKeyboundError(.sessionExpired) { try await relaunched.client.me() }
        await phone.present(.match)
        await expectKeyboundError(.server, serverCode: .unknownCredential) {
            try await Self.app(backend, phonePasskeys).signIn()
        }
        // The account has no password: its last passkey stays.
        await expectKeyboundError(.server, serverCode: .lastPasskey) {
            try await laptopApp.removePasskey(added.passkeyID)
        }
    }

    @Test("a locked-out sensor cannot sign in, and sends nothing")
    func lockedOutSensorCannotSignIn() async throws {
        let backend = try Self.backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let passkeys = try EmulatedPasskeyAuthenticator(device: phone)
        await phone.present(.match)
        try await Self.app(backend, passkeys).signUp(username: "grace")
        let verifiesBefore = try await backend.requests(API.passkeyLoginVerify)

        let app = Self.app(backend, passkeys)
        await phone.present(.noMatch, .noMatch, .noMatch)
        await expectKeyboundError(.authenticationFailed) { try await app.signIn() }
        await phone.present(.noMatch, .noMatch, .userCancel)
        await expectKeyboundError(.userCancel, recovery: .silent) { try await app.signIn() }
        await phone.present(.noMatch)
        await expectKeyboundError(.biometryLockout, recovery: .usePasscode) { try await app.signIn() }
        await phone.present(.match)
        await expectKeyboundError(.biometryLockout) { try await app.signIn() }
        #expect(await app.client.currentSession == nil)
        #expect(try await backend.requests(API.passkeyLoginVerify) == verifiesBefore)

        // The device passcode clears the lockout; Face ID signs in again.
        await phone.present(.passcode("123456"))
        _ = try await phone.verify(.devicePasscode, prompt: VerificationPrompt(reason: "Unlock Face ID"))
        await phone.present(.match)
        try await app.signIn()
        #expect(try await app.client.me().authMethod == .passkey)
    }

    @Test("an enrollment change kills the passkey before any prompt; a new one on the phone signs in")
    func enrollmentChangeInvalidatesThePasskey() async throws {
        let backend = try Self.backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let passkeys = try EmulatedPasskeyAuthenticator(device: phone)
        await phone.present(.match)
        let signUp = Self.app(backend, passkeys)
        try await signUp.signUp(username: "grace")
        let verifiesBefore = try await backend.requests(API.passkeyLoginVerify)

        // Someone adds a face: the passkey's key is destroyed with the enrollment, as a key's is.
        try await phone.enroll()
        await phone.present(.match)
        let app = Self.app(backend, passkeys, clientID: "phone-passkey-relaunched")
        await expectKeyboundError(.invalidated, recovery: .reenroll) { try await app.signIn() }
        #expect(await phone.snapshot().queuedOutcomes == 1, "no prompt was shown")
        #expect(try await backend.requests(API.passkeyLoginVerify) == verifiesBefore)
        #expect(try await passkeys.passkeys().isEmpty)

        // Within the step-up window of the sign-up session, the re-enrolled face (the match still
        // queued) makes a new one.
        let added = try await PasskeyLogin(
            client: signUp.client, authenticator: passkeys, clock: backend.clientClock
        ).addPasskey()
        #expect(try await signUp.passkeys().count == 2)
        await phone.present(.match)
        try await app.signIn()
        #expect(try await app.client.me().username == "grace")
        #expect(try await passkeys.passkeys().map(\.credentialID) == [added.credentialID])
    }

    @Test("adding a passkey after the step-up window asks for a sign-in first, before any prompt")
    func addingNeedsARecentSignIn() async throws {
        let backend = try Self.backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        await phone.present(.match)
        let app = Self.app(backend, try EmulatedPasskeyAuthenticator(device: phone))
        try await app.signUp(username: "grace")
        backend.clock.advance(by: 6 * 60)
        let laptop = try makePhone(biometry: .touchID)
        await laptop.present(.match)
        let adding = PasskeyLogin(
            client: app.client, authenticator: try EmulatedPasskeyAuthenticator(device: laptop),
            clock: backend.clientClock)
        await expectKeyboundError(.server, recovery: .usePassword, serverCode: .stepUpRequired) {
            try await adding.addPasskey()
        }
        #expect(await laptop.snapshot().queuedOutcomes == 1, "no prompt was shown")
    }

    @Test("the server's excludeCredentials reach the authenticator: no second passkey on one phone")
    func excludedCredentialsReachTheAuthenticator() async throws {
        let backend = try Self.backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let passkeys = try EmulatedPasskeyAuthenticator(device: phone)
        await phone.present(.match)
        let app = Self.app(backend, passkeys)
        try await app.signUp(username: "grace")
        let registeredBefore = try await backend.requests(API.passkeyRegistrationVerify)

        // Within the step-up window, the same phone is asked for another passkey of the account:
        // the options list the phone's passkey, and the authenticator refuses, as a platform
        // authenticator answers InvalidStateError.
        await phone.present(.match)
        await expectKeyboundError(.duplicateItem) { try await app.addPasskey() }
        #expect(try await passkeys.passkeys().count == 1)
        #expect(try await app.passkeys().count == 1)
        #expect(try await backend.requests(API.passkeyRegistrationVerify) == registeredBefore)
    }
}
