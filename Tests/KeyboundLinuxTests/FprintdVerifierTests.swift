#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    /// FprintdVerifier against fprintd itself, on a private system bus with libfprint's virtual
    /// reader. Serialized: fprintd lets one client claim the reader, and each test has its own
    /// fprintd anyway, but starting three daemons per test in parallel on two cores only slows all.
    @Suite("FprintdVerifier", .fprintd, .serialized)
    struct FprintdVerifierTests {
        /// A verifier on the private fprintd. Its timeout is the longest there is: the whole suite on
        /// two cores can hold fprintd, libfprint and the mocked polkit back for tens of seconds; a
        /// test that means to time out says so.
        private func verifier(_ fprintd: PrivateFprintd, timeout: TimeInterval = 300) throws
            -> FprintdVerifier
        {
            try FprintdVerifier(user: fprintd.user, busAddress: fprintd.address, timeout: timeout)
        }

        /// Verifies while a finger with the print `id` touches the reader, once fprintd waits for it.
        private func verify(
            _ verifier: FprintdVerifier, _ policy: AccessPolicy, touching id: String,
            _ fprintd: PrivateFprintd
        ) async throws -> Verification {
            async let touched: Void = fprintd.touch(id)
            let verification = try await verifier.verify(policy, prompt: prompt)
            try await touched
            return verification
        }

        @Test func theEnrolledFingerMatches() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            let verification = try await verify(
                try verifier(fprintd), .biometryAny, touching: "print-a", fprintd)
            #expect(verification.factors == [.biometry])
        }

        @Test func anotherFingerIsAuthenticationFailed() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await verify(try verifier(fprintd), .biometryCurrentSet, touching: "print-b", fprintd)
            }
            // The reader is released: the right finger matches next.
            let verification = try await verify(
                try verifier(fprintd), .biometryCurrentSet, touching: "print-a", fprintd)
            #expect(verification.factors == [.biometry])
        }

        @Test func noFingerEnrolledIsBiometryNotEnrolled() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            let availability = try await verifier(fprintd).availability()
            #expect(availability.biometryType == .touchID)
            #expect(availability.biometryError == .biometryNotEnrolled)
            #expect(availability.enrollmentState == nil)
            await expectKeyboundError(.biometryNotEnrolled, recovery: .enrollBiometrics) {
                try await verifier(fprintd).verify(.biometryAny, prompt: prompt)
            }
        }

        @Test func enrollingAnotherFingerChangesTheEnrollmentState() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            let before = try await verifier(fprintd).availability()
            #expect(before.canUseBiometry)
            #expect(before.enrollmentState != nil)
            #expect(try await verifier(fprintd).availability().enrollmentState == before.enrollmentState)
            try fprintd.enroll("left-index-finger", print: "print-c")
            let after = try await verifier(fprintd).availability()
            #expect(after.enrollmentState != nil)
            #expect(after.enrollmentState != before.enrollmentState)
        }

        @Test func cancellingTheTaskStopsTheScan() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            let verifier = try verifier(fprintd)
            let waiting = Task { try await verifier.verify(.biometryAny, prompt: prompt) }
            try await Task.sleep(for: .milliseconds(500))
            waiting.cancel()
            await expectKeyboundError(.appCancel, recovery: .silent) { try await waiting.value }
            // The reader was stopped and released: a finger now verifies.
            #expect(
                try await verify(verifier, .biometryAny, touching: "print-a", fprintd).factors == [.biometry])
        }

        @Test func noFingerInTimeIsSystemCancel() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            await expectKeyboundError(.systemCancel) {
                try await verifier(fprintd, timeout: 1).verify(.biometryAny, prompt: prompt)
            }
        }

        @Test func noFprintdIsBiometryNotAvailable() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            fprintd.stopFprintd()
            let availability = try await verifier(fprintd).availability()
            #expect(availability.biometryType == .none)
            #expect(availability.biometryError == .biometryNotAvailable)
            await expectKeyboundError(.biometryNotAvailable, recovery: .usePassword) {
                try await verifier(fprintd).verify(.biometryAny, prompt: prompt)
            }
            let nowhere = try FprintdVerifier(busAddress: "unix:path=\(fprintd.folder.path)/no-bus")
            await expectKeyboundError(.biometryNotAvailable) {
                try await nowhere.verify(.biometryAny, prompt: prompt)
            }
        }

        @Test func theFingerprintVerifierSaysWhatItCannotDo() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            await expectKeyboundError(.notSupported) {
                try await verifier(fprintd).verify(.devicePasscode, prompt: prompt)
            }
            #expect(try await verifier(fprintd).verify(.noVerification, prompt: prompt).factors == [])
            for policy in [AccessPolicy.userPresence, .biometryOrPasscode] {
                #expect(
                    try await verify(try verifier(fprintd), policy, touching: "print-a", fprintd).factors == [
                        .biometry
                    ])
            }
            // What a fingerprint cannot protect: the TPM and the sealed store refuse it.
            #expect(throws: KeyboundError.notSupported) {
                try TPMKeyVault.checkSupported(.biometryCurrentSet)
            }
            #expect(throws: KeyboundError.notSupported) {
                try SecretServiceStore.checkSupported(.biometryAny)
            }
        }

        /// What a match costs: claiming the reader, starting and stopping a verification and
        /// releasing it (D-Bus round trips to fprintd), and libfprint's match on the virtual
        /// reader. Printed on every run (docs/linux.md, "Costs").
        @Test func aMatchCostsAFewCallsToFprintd() async throws {
            let fprintd = try PrivateFprintd()
            defer { fprintd.stop() }
            try fprintd.enroll("right-index-finger", print: "print-a")
            let verifier = try verifier(fprintd)
            let rounds = 10
            let elapsed = try await ContinuousClock().measure {
                for _ in 0..<rounds {
                    _ = try await verify(verifier, .biometryAny, touching: "print-a", fprintd)
                }
            }
            let milliseconds =
                (Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
                / Double(rounds)
            print(
                "FprintdVerifier on fprintd's virtual reader: \(String(format: "%.1f", milliseconds)) ms per match "
                    + "(\(rounds) rounds, the finger there at once)")
        }

        /// The table of docs/linux.md, "Errors": FprintdVerifier, from fprintd's results and errors.
        @Test func fprintdResultsMapToKeyboundErrors() throws {
            #expect(try FprintdSession.outcome("verify-match", done: true) != nil)
            #expect(try FprintdSession.outcome("verify-retry-scan", done: false) == nil)
            for (result, code) in [
                ("verify-no-match", KeyboundError.Code.authenticationFailed),
                ("verify-retry-scan", .authenticationFailed), ("verify-disconnected", .biometryNotAvailable),
                ("verify-unknown-error", .unexpected),
            ] {
                #expect(throws: KeyboundError(code)) { try FprintdSession.outcome(result, done: true) }
            }
            for (name, code, recovery) in [
                (
                    "net.reactivated.Fprint.Error.NoEnrolledPrints", KeyboundError.Code.biometryNotEnrolled,
                    KeyboundError.Recovery.enrollBiometrics
                ),
                ("net.reactivated.Fprint.Error.NoSuchDevice", .biometryNotAvailable, .usePassword),
                ("org.freedesktop.DBus.Error.ServiceUnknown", .biometryNotAvailable, .usePassword),
                ("net.reactivated.Fprint.Error.AlreadyInUse", .unexpected, .retryLater),
                ("net.reactivated.Fprint.Error.PermissionDenied", .notSupported, .none),
                ("net.reactivated.Fprint.Error.Internal", .unexpected, .none),
            ] {
                let error = FprintdSession.error(DBusFailure(name: name, message: "m"))
                #expect(error.code == code, "\(name): \(error)")
                #expect(error.recovery == recovery, "\(name): \(error)")
            }
        }
    }
#endif
