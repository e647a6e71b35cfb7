import Foundation
import KeyboundWire
import Testing

@testable import Keybound

/// A verifier whose prompt stays up until the test lets it finish.
private actor HeldPromptVerifier: UserVerifier {
    private var waiting: CheckedContinuation<Void, Never>?
    private var shown: CheckedContinuation<Void, Never>?

    func availability() -> VerificationAvailability {
        VerificationAvailability(
            biometryType: .faceID, biometryError: nil, isPasscodeSet: true, enrollmentState: nil)
    }

    func verify(_ policy: AccessPolicy, prompt: VerificationPrompt) async throws -> Verification {
        shown?.resume()
        shown = nil
        await withCheckedContinuation { waiting = $0 }
        return Verification(id: "held", factors: [.biometry], verifiedAt: Date(), reuseDuration: 0)
    }

    /// Waits until the prompt is on screen.
    func waitUntilShown() async {
        if waiting != nil { return }
        await withCheckedContinuation { shown = $0 }
    }

    func finishPrompt() {
        waiting?.resume()
        waiting = nil
    }
}

@Suite struct ClientAndFlowSafetyTests {
    @Test func aLogoutWhileTheUnlockPromptIsUpWins() async throws {
        let verifier = HeldPromptVerifier()
        let lock = try AppLock(verifier: verifier, gracePeriod: 0)
        await lock.sessionStarted()
        await lock.didEnterBackground()
        try await Task.sleep(nanoseconds: 5_000_000)
        #expect(await lock.willEnterForeground() == .locked)
        let unlocking = Task { try await lock.unlock(reason: "Unlock") }
        await verifier.waitUntilShown()
        await lock.sessionEnded()  // logout (or remote revocation) while Face ID is showing
        await verifier.finishPrompt()
        await #expect(throws: KeyboundError.sessionExpired) { try await unlocking.value }
        #expect(await lock.state == .requiresPassword)
    }

    /// The SDK checks usernames and client ids with the server's grammar (KeyboundWire's
    /// `Username`, `ClientID`) before anything is sent: nothing listens on this port, so a request
    /// would fail as `network`.
    @Test func badUsernamesAndClientIDsAreRefusedBeforeSending() async throws {
        let client = KeyboundClient(baseURL: try #require(URL(string: "http://127.0.0.1:9")))
        await #expect(throws: KeyboundError.invalidInput) {
            try await client.createAccount(username: "ada lovelace", password: "long enough")
        }
        await #expect(throws: KeyboundError.invalidInput) {
            try await client.loginWithPassword(username: "ada", password: "long enough", clientID: "my phone")
        }
        await #expect(throws: KeyboundError.invalidInput) {
            try await client.revokeDevice("../accounts")
        }
    }

    @Test func sessionsAndSecretMessagesNeverPrintTheirSecrets() {
        let session = KeyboundClient.Session(
            accessToken: "ACCESS-SECRET", refreshToken: "REFRESH-SECRET", sessionID: "ses_1", userID: "usr_1",
            accessTokenExpiresAt: Date(), isDPoPBound: false)
        let tokens = TokenResponse(
            accessToken: "ACCESS-SECRET", refreshToken: "REFRESH-SECRET", expiresIn: 900, sessionID: "ses_1",
            userID: "usr_1")
        let login = PasswordLoginRequest(username: "ada", password: "PASSWORD-SECRET", clientID: "phone")
        var dumped = ""
        dump(session, to: &dumped)
        dump(tokens, to: &dumped)
        dump(login, to: &dumped)
        let printed = [
            "\(session)", String(reflecting: session), "\(tokens)", String(reflecting: tokens), "\(login)",
            "\(RefreshRequest(refreshToken: "REFRESH-SECRET"))",
            "\(CreateAccountRequest(username: "ada", password: "PASSWORD-SECRET"))", dumped,
        ]
        for text in printed {
            #expect(!text.contains("SECRET"), "\(text)")
        }
        #expect("\(session)".contains("ses_1"))
        #expect("\(login)".contains("ada"))
    }
}
