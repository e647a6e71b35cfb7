#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    /// The folders Linux-PAM loads modules from on Debian and elsewhere.
    private let moduleFolders = [
        "/usr/lib/x86_64-linux-gnu/security", "/lib/x86_64-linux-gnu/security",
        "/usr/lib/aarch64-linux-gnu/security", "/lib/aarch64-linux-gnu/security", "/usr/lib64/security",
        "/lib64/security", "/usr/lib/security", "/lib/security",
    ]

    private func pamModule(_ name: String) -> String? {
        moduleFolders.map { "\($0)/\(name)" }.first { FileManager.default.fileExists(atPath: $0) }
    }

    private func dbLoad() -> URL? { executable("db_load") ?? executable("db5.3_load") }

    extension Trait where Self == ComponentRequirement {
        /// The test needs Linux-PAM's pam_userdb and pam_faillock and Berkeley DB's db_load
        /// (`make test-deps`: libpam-modules, db-util); without them it is skipped, with one warning.
        static var pam: ComponentRequirement {
            ComponentRequirement(tests: "the PAM tests") {
                for module in ["pam_userdb.so", "pam_faillock.so", "pam_permit.so"]
                where pamModule(module) == nil {
                    return "\(module) is not installed (run `make test-deps`: libpam-modules)"
                }
                guard dbLoad() != nil else {
                    return "db_load is not installed (run `make test-deps`: db-util)"
                }
                guard PAMTransaction.currentUserName() != nil else { return "this user has no name" }
                return nil
            }
        }
    }

    /// A PAM stack of the test's own, in a temporary configuration directory: pam_userdb checks
    /// the password against a Berkeley DB made with db_load, pam_faillock (its tally in the same
    /// temporary folder) denies after 3 failures for 10 minutes, as Debian's manual page sets it
    /// up. The user is this process's (pam_faillock tracks only users the system knows).
    final class PAMFixture: Sendable {
        static let password = "correct horse battery"
        static let service = "keybound-test"
        let folder: URL
        let user: String
        private let typed: Mutex<[String]>
        private let requests = Mutex<[PAMVerifier.Request]>([])

        /// - Parameter stack: the service file's `auth` lines instead of the default stack.
        init(typed: [String] = [PAMFixture.password], stack: String? = nil) throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-pam-\(UUID().uuidString.prefix(8))")
            let tally = folder.appendingPathComponent("faillock")
            try FileManager.default.createDirectory(at: tally, withIntermediateDirectories: true)
            user = PAMTransaction.currentUserName() ?? "root"
            self.typed = Mutex(typed)
            guard let dbLoad = dbLoad() else { throw KeyboundError(.notSupported, message: "no db_load") }
            // db_load -T reads keys and values on alternate lines; pam_userdb compares the value.
            try runTool(
                dbLoad, ["-T", "-t", "hash", folder.appendingPathComponent("users.db").path],
                input: Data("\(user)\n\(Self.password)\n".utf8), in: folder)
            let faillock = "pam_faillock.so dir=\(tally.path) deny=3 unlock_time=600 even_deny_root"
            let auth =
                stack ?? """
                    auth required \(faillock) preauth
                    auth [success=1 default=bad] pam_userdb.so db=\(folder.appendingPathComponent("users").path)
                    auth [default=die] \(faillock) authfail
                    auth sufficient \(faillock) authsucc
                    """
            try Data("\(auth)\naccount required pam_permit.so\n".utf8).write(
                to: folder.appendingPathComponent(Self.service))
        }

        /// The passwords the user types next (the last one again when the list runs out).
        func type(_ passwords: String...) { typed.withLock { $0 = passwords } }

        /// What the stack asked so far.
        var asked: [PAMVerifier.Request] { requests.withLock { $0 } }

        /// A verifier for `user` (default: this process's) whose user types the queued passwords.
        func verifier(user: String? = nil, service: String = PAMFixture.service) throws -> PAMVerifier {
            try PAMVerifier(service: service, user: user ?? self.user, configurationDirectory: folder) {
                [typed, requests] request in
                requests.withLock { $0.append(request) }
                return typed.withLock { queue in queue.count > 1 ? queue.removeFirst() : queue.first ?? "" }
            }
        }

        func remove() { try? FileManager.default.removeItem(at: folder) }
    }

    /// PAMVerifier against Linux-PAM itself: real modules, a stack of the test's own. Serialized:
    /// every PAM transaction of the process runs on one queue, so tests in parallel would only
    /// wait there for each other's failure delays, and the cost measured would include them.
    @Suite("PAMVerifier", .pam, .serialized)
    struct PAMVerifierTests {
        @Test func theRightPasswordVerifies() async throws {
            let fixture = try PAMFixture()
            defer { fixture.remove() }
            let verification = try await fixture.verifier().verify(.devicePasscode, prompt: prompt)
            #expect(verification.factors == [.passcode])
            // pam_userdb asked once, for a hidden answer, with the app's reason beside PAM's text.
            let asked = fixture.asked
            #expect(asked.count == 1)
            #expect(asked.first?.echo == false)
            #expect(asked.first?.message.isEmpty == false)
            #expect(asked.first?.prompt.reason == prompt.reason)
        }

        @Test func aWrongPasswordIsAuthenticationFailed() async throws {
            let fixture = try PAMFixture(typed: ["not the password"])
            defer { fixture.remove() }
            let refused = await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await fixture.verifier().verify(.devicePasscode, prompt: prompt)
            }
            #expect(refused?.native == .pam(7))  // PAM_AUTH_ERR
            // One failure is not a lockout: the right password still verifies.
            fixture.type(PAMFixture.password)
            #expect(
                try await fixture.verifier().verify(.devicePasscode, prompt: prompt).factors == [.passcode])
        }

        @Test func afterThreeFailuresFaillockRefusesEvenTheRightPassword() async throws {
            let fixture = try PAMFixture(typed: ["wrong"])
            defer { fixture.remove() }
            let verifier = try fixture.verifier()
            for _ in 1...3 {
                await expectKeyboundError(.authenticationFailed) {
                    try await verifier.verify(.devicePasscode, prompt: prompt)
                }
            }
            fixture.type(PAMFixture.password)
            let locked = await expectKeyboundError(.throttled, recovery: .retryLater) {
                try await verifier.verify(.devicePasscode, prompt: prompt)
            }
            #expect(locked?.native == .pam(7))
            #expect(locked?.retryAfter == 600)  // pam_faillock's unlock_time, as it says it
            // pam_faillock said so before the password was asked, and the app's dialog saw it.
            #expect(fixture.asked.last?.notices.isEmpty == false)
            // The lock is pam_faillock's tally: another stack without it accepts the password.
            let withoutFaillock = try PAMFixture(
                stack: "auth required pam_userdb.so db=\(fixture.folder.appendingPathComponent("users").path)"
            )
            defer { withoutFaillock.remove() }
            #expect(
                try await withoutFaillock.verifier().verify(.devicePasscode, prompt: prompt).factors == [
                    .passcode
                ])
        }

        @Test func anUnknownUserIsNotSupported() async throws {
            let fixture = try PAMFixture()
            defer { fixture.remove() }
            let unknown = await expectKeyboundError(.notSupported, recovery: KeyboundError.Recovery.none) {
                try await fixture.verifier(user: "keybound-no-such-user").verify(
                    .devicePasscode, prompt: prompt)
            }
            #expect(unknown?.native == .pam(10))  // PAM_USER_UNKNOWN
            #expect(unknown?.message?.contains("keybound-no-such-user") == true)
        }

        @Test func cancellingThePromptIsUserCancel() async throws {
            let fixture = try PAMFixture()
            defer { fixture.remove() }
            let cancelling = try PAMVerifier(
                service: PAMFixture.service, user: fixture.user, configurationDirectory: fixture.folder
            ) { _ in throw KeyboundError.userCancel }
            await expectKeyboundError(.userCancel, recovery: .silent) {
                try await cancelling.verify(.devicePasscode, prompt: prompt)
            }
        }

        @Test func aMissingModuleOrServiceIsAClearError() async throws {
            let fixture = try PAMFixture(stack: "auth required pam_keybound_no_such_module.so")
            defer { fixture.remove() }
            let missing = await expectKeyboundError(.notSupported) {
                try await fixture.verifier().verify(.devicePasscode, prompt: prompt)
            }
            #expect(missing?.message?.contains(PAMFixture.service) == true, "\(String(describing: missing))")
            // A service with no file in the directory (and no `other` there either).
            let noService = await expectKeyboundError(.notSupported) {
                try await fixture.verifier(service: "keybound-no-such-service").verify(
                    .devicePasscode, prompt: prompt)
            }
            #expect(noService?.native == .pam(26))  // PAM_ABORT
            #expect(fixture.asked.isEmpty)
        }

        @Test func thePAMVerifierSaysWhatItCannotDo() async throws {
            let fixture = try PAMFixture()
            defer { fixture.remove() }
            let verifier = try fixture.verifier()
            let availability = await verifier.availability()
            #expect(availability.biometryType == .none)
            #expect(availability.biometryError == .biometryNotAvailable)
            #expect(availability.isPasscodeSet)
            #expect(availability.enrollmentState == nil)
            // As TPMPINVerifier: biometrics-only is biometryNotAvailable, without a prompt.
            await expectKeyboundError(.biometryNotAvailable, recovery: .usePassword) {
                try await verifier.verify(.biometryCurrentSet, prompt: prompt)
            }
            #expect(fixture.asked.isEmpty)
            for policy in [AccessPolicy.devicePasscode, .userPresence, .biometryOrPasscode] {
                #expect(try await verifier.verify(policy, prompt: prompt).factors == [.passcode])
            }
            #expect(try await verifier.verify(.noVerification, prompt: prompt).factors == [])
            #expect(fixture.asked.count == 3)
            await expectKeyboundError(.invalidInput) { try PAMVerifier(service: "../etc/passwd") { _ in "" } }
        }

        /// PAM binds nothing to the key: a PIN-bound TPM key refuses its verification, so a
        /// patched app that skips or fakes the PAM check gains nothing over the PIN.
        @Test(.softwareTPM) func aPAMVerificationDoesNotUnlockAPINBoundKey() async throws {
            let fixture = try PAMFixture()
            defer { fixture.remove() }
            let tpm = try TPMFixture()
            defer { tpm.stop() }
            try await tpm.vault.setPIN(pin)
            _ = try await tpm.vault.createKey("device-key", policy: .devicePasscode)
            let verification = try await fixture.verifier().verify(.devicePasscode, prompt: prompt)
            await expectKeyboundError(.authenticationFailed) {
                try await tpm.vault.sign(Data("payload".utf8), with: "device-key", verification: verification)
            }
        }

        /// What a verification costs: one PAM transaction (pam_userdb and pam_faillock here), and
        /// the delay Linux-PAM adds after a failure. Printed on every run (docs/linux.md, "Costs").
        @Test func aVerificationCostsOnePAMTransaction() async throws {
            let fixture = try PAMFixture()
            defer { fixture.remove() }
            let verifier = try fixture.verifier()
            let rounds = 20
            let clock = ContinuousClock()
            let right = try await clock.measure {
                for _ in 0..<rounds { _ = try await verifier.verify(.devicePasscode, prompt: prompt) }
            }
            fixture.type("wrong")
            var refused = false
            let wrong = await clock.measure {
                do { _ = try await verifier.verify(.devicePasscode, prompt: prompt) } catch { refused = true }
            }
            #expect(refused, "the wrong password verified")
            func milliseconds(_ duration: Duration, _ count: Int) -> Double {
                (Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
                    / Double(count)
            }
            print(
                "PAMVerifier (pam_faillock + pam_userdb): \(String(format: "%.2f", milliseconds(right, rounds))) ms "
                    + "per verification (\(rounds) rounds), \(String(format: "%.0f", milliseconds(wrong, 1))) ms "
                    + "for a wrong password (Linux-PAM's delay after a failure)")
        }

        /// The table of docs/linux.md, "Errors": PAMVerifier, from Linux-PAM's codes.
        @Test(arguments: [
            // AUTH_ERR
            (Int32(7), false, KeyboundError.Code.authenticationFailed, KeyboundError.Recovery.retry),
            (7, true, .throttled, .retryLater),  // AUTH_ERR after a module refused before asking
            (11, false, .throttled, .retryLater),  // MAXTRIES
            (10, false, .notSupported, KeyboundError.Recovery.none),  // USER_UNKNOWN
            (9, false, .notSupported, KeyboundError.Recovery.none),  // AUTHINFO_UNAVAIL
            (13, false, .notSupported, KeyboundError.Recovery.none),  // ACCT_EXPIRED
            (12, false, .notSupported, KeyboundError.Recovery.none),  // NEW_AUTHTOK_REQD
            (6, false, .notSupported, KeyboundError.Recovery.none),  // PERM_DENIED
            (28, false, .notSupported, KeyboundError.Recovery.none),  // MODULE_UNKNOWN
            (3, false, .notSupported, KeyboundError.Recovery.none),  // SERVICE_ERR
            (26, false, .notSupported, KeyboundError.Recovery.none),  // ABORT (no file for the service)
            (4, false, .unexpected, KeyboundError.Recovery.none),  // SYSTEM_ERR
            (19, false, .unexpected, KeyboundError.Recovery.none),  // CONV_ERR no closure caused
            (24, false, .unexpected, .retryLater),  // TRY_AGAIN
        ])
        func pamCodesMapToKeyboundErrors(
            _ code: Int32, _ refusedBeforeAsking: Bool, _ expected: KeyboundError.Code,
            _ recovery: KeyboundError.Recovery
        ) {
            let error = PAMResult(code).error(
                service: "keybound", configurationDirectory: nil, user: "alice",
                refusedBeforeAsking: refusedBeforeAsking, notices: [])
            #expect(error.code == expected, "\(error)")
            #expect(error.recovery == recovery, "\(error)")
            #expect(error.native == .pam(code))
            #expect(KeyboundError.NativeCode.pam(code).description == "PAM(\(code))")
        }
    }
#endif
