#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundLinux
    import KeyboundTestSupport
    import Testing

    /// `DeviceBackends.linux`'s verifier with a reader: fprintd on its virtual reader (a private
    /// system bus, polkit mocked) beside the TPM's PIN. Which of the two answers a policy, and that
    /// the app lock takes a finger where one is enrolled and the PIN where the reader is gone.
    @Suite("LinuxVerifier with a fingerprint reader", .softwareTPM, .fprintd, .serialized)
    struct LinuxVerifierTests {
        /// A TPM with the PIN set, fprintd with one finger enrolled, and the verifier over both,
        /// counting how often it told the app to show "touch the reader".
        private final class Setup: Sendable {
            let tpm: TPMFixture
            let fprintd: PrivateFprintd
            let fingerPrompts = Mutex(0)

            init() async throws {
                tpm = try TPMFixture()
                try await tpm.vault.setPIN(pin)
                fprintd = try PrivateFprintd()
                try fprintd.enroll("right-index-finger", print: "print-a")
            }

            func device() throws -> DeviceBackends {
                let tpm = self.tpm
                return try DeviceBackends.linux(
                    vault: tpm.vault, service: "com.acme.kiosk", secretServiceBus: "unix:path=/nonexistent",
                    // The longest timeout: two busy cores can hold fprintd back for tens of seconds.
                    fingerprint: try FprintdVerifier(
                        user: fprintd.user, busAddress: fprintd.address, timeout: 300),
                    fingerprintPrompt: { [fingerPrompts] _ in fingerPrompts.withLock { $0 += 1 } },
                    enterPIN: { _ in tpm.nextPIN() })
            }

            func stop() {
                fprintd.stop()
                tpm.stop()
            }
        }

        @Test func theAppLockTakesTheEnrolledFingerAndRefusesAnother() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let verifier = try setup.device().verifier
            let availability = await verifier.availability()
            #expect(availability.biometryType == .touchID)
            #expect(availability.canUseBiometry)
            #expect(availability.isPasscodeSet)
            #expect(availability.enrollmentState != nil)

            let time = ManualMonotonicClock()
            // The app lock's default policy: biometryOrPasscode.
            let lock = try AppLock(verifier: verifier, gracePeriod: 30, clock: time.clock)
            await lock.sessionStarted()
            await lock.didEnterBackground()
            time.advance(120)
            #expect(await lock.willEnterForeground() == .locked)
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                async let touched: Void = setup.fprintd.touch("print-b")
                try await lock.unlock(reason: "Unlock Acme")
                try await touched
            }
            #expect(await lock.state == .locked)
            async let touched: Void = setup.fprintd.touch("print-a")
            try await lock.unlock(reason: "Unlock Acme")
            try await touched
            #expect(await lock.state == .unlocked)
            #expect(setup.fingerPrompts.withLock { $0 } == 2)
        }

        @Test func thePINAnswersWhatTheTPMHoldsEvenWithAReader() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let verifier = try setup.device().verifier
            // The device passcode: the PIN, which a TPM key needs; no finger is asked for.
            setup.tpm.type("135799")
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await verifier.verify(.devicePasscode, prompt: prompt)
            }
            setup.tpm.type(pin)
            let verification = try await verifier.verify(.devicePasscode, prompt: prompt)
            #expect(verification.factors == [.passcode])
            #expect(setup.fingerPrompts.withLock { $0 } == 0)
            // It signs with a PIN-bound key; a finger's verification would not.
            _ = try await setup.tpm.vault.createKey("device-key", policy: .devicePasscode)
            _ = try await setup.tpm.vault.sign(
                Data("payload".utf8), with: "device-key", verification: verification)
            async let touched: Void = setup.fprintd.touch("print-a")
            let finger = try await verifier.verify(.biometryAny, prompt: prompt)
            try await touched
            #expect(finger.factors == [.biometry])
            await expectKeyboundError(.authenticationFailed) {
                _ = try await setup.tpm.vault.sign(
                    Data("payload".utf8), with: "device-key", verification: finger)
            }

            // Without fprintd a policy the PIN satisfies falls to it; a finger-only one does not.
            setup.fprintd.stopFprintd()
            #expect(try await verifier.verify(.biometryOrPasscode, prompt: prompt).factors == [.passcode])
            await expectKeyboundError(.biometryNotAvailable) {
                try await verifier.verify(.biometryCurrentSet, prompt: prompt)
            }
            #expect(setup.fingerPrompts.withLock { $0 } == 1)
        }
    }
#endif
