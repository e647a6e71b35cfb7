#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    /// What TPMKeyVault refuses before it talks to any TPM, and how it says there is none.
    @Suite("TPMKeyVault capabilities and errors")
    struct TPMCapabilityTests {
        /// A vault whose TCTI reaches nothing: a refusal that comes before the TPM shows here.
        private func unreachableVault() throws -> TPMKeyVault {
            try TPMKeyVault(
                directory: FileManager.default.temporaryDirectory.appendingPathComponent(
                    "keybound-tpm-none-\(UUID().uuidString.prefix(8))"),
                connection: try TPMConnection(tcti: "device:/dev/keybound-no-such-tpm"))
        }

        @Test func thePoliciesTheTPMEnforcesAreAccepted() throws {
            try TPMKeyVault.checkSupported(.devicePasscode)
            try TPMKeyVault.checkSupported(.noVerification)
            try TPMKeyVault.checkSupported(
                AccessPolicy(accessibility: .whenUnlockedThisDeviceOnly, constraints: [.devicePasscode]))
            try TPMKeyVault.checkSupported(
                AccessPolicy(
                    accessibility: .afterFirstUnlockThisDeviceOnly, constraints: [.devicePasscode],
                    reuseDuration: 300))
        }

        @Test(arguments: [
            AccessPolicy.biometryCurrentSet, .biometryAny, .userPresence, .biometryOrPasscode,
        ])
        func biometricPoliciesAreRefusedNotWeakened(_ policy: AccessPolicy) async throws {
            let vault = try unreachableVault()
            defer { try? FileManager.default.removeItem(at: vault.directory) }
            let error = await expectKeyboundError(.notSupported, recovery: KeyboundError.Recovery.none) {
                try await vault.createKey("device-key", policy: policy)
            }
            #expect(error?.message?.contains("fingerprint") == true)
        }

        @Test func whatTheTPMCannotSeeIsRefused() async throws {
            let vault = try unreachableVault()
            defer { try? FileManager.default.removeItem(at: vault.directory) }
            // The screen lock: a key without a PIN that should only sign while unlocked …
            for accessibility in [
                AccessPolicy.Accessibility.whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly,
            ] {
                let policy = try AccessPolicy(accessibility: accessibility, constraints: [])
                await expectKeyboundError(.notSupported) { try await vault.createKey("k", policy: policy) }
            }
            // … or a reuse window, which would let a PIN-bound one sign after the screen locked.
            let windowed = try AccessPolicy.devicePasscode.reusing(for: 60)
            await expectKeyboundError(.notSupported) { try await vault.createKey("k", policy: windowed) }
            // An application password, or two constraints.
            let application = try AccessPolicy(constraints: [.applicationPassword])
            await expectKeyboundError(.notSupported) { try await vault.createKey("k", policy: application) }
            let both = try AccessPolicy(
                constraints: [.devicePasscode, .applicationPassword], combination: .and)
            await expectKeyboundError(.notSupported) { try await vault.createKey("k", policy: both) }
            // An accessibility that lets material leave the device is a mistake, as on Apple.
            let portable = try AccessPolicy(accessibility: .afterFirstUnlock, constraints: [])
            await expectKeyboundError(.invalidInput) { try await vault.createKey("k", policy: portable) }
        }

        @Test func noTPMIsNotSupported() async throws {
            let vault = try unreachableVault()
            defer { try? FileManager.default.removeItem(at: vault.directory) }
            let missing = await expectKeyboundError(.notSupported) {
                try await vault.createKey("dpop", policy: .noVerification)
            }
            #expect(missing?.message?.contains("/dev/keybound-no-such-tpm does not exist") == true)
            // Nothing listens on the port: the TCTI cannot connect.
            let port = try LoopbackPorts.claimPair()
            defer {
                LoopbackPorts.release(port)
                LoopbackPorts.release(port + 1)
            }
            let nobody = try TPMKeyVault(
                directory: vault.directory, connection: .swtpm(port: port))
            let unreachable = await expectKeyboundError(.notSupported) { try await nobody.setPIN("246810") }
            #expect(unreachable?.message?.contains("cannot be reached through swtpm:host=127.0.0.1") == true)
            // What needs no TPM still answers.
            #expect(!(try await vault.keyExists("dpop")))
            await expectKeyboundError(.itemNotFound) { try await vault.publicKey("dpop") }
        }

        @Test func theTCTIIsValidated() throws {
            #expect(TPMConnection.kernelResourceManager.tcti == "device:/dev/tpmrm0")
            #expect(TPMConnection.kernelResourceManager.devicePath == "/dev/tpmrm0")
            #expect(TPMConnection.swtpm(port: 2321).tcti == "swtpm:host=127.0.0.1,port=2321")
            #expect(TPMConnection.swtpm(port: 2321).devicePath == nil)
            #expect(try TPMConnection(tcti: "device").devicePath == "/dev/tpmrm0")
            #expect(try TPMConnection(tcti: "device:/dev/tpm0").devicePath == "/dev/tpm0")
            #expect(throws: KeyboundError.invalidInput) { try TPMConnection(tcti: "") }
            #expect(throws: KeyboundError.invalidInput) { try TPMConnection(tcti: "swtpm:\u{0}") }
        }

        /// The table of docs/linux.md, "Errors", from the TPM's own codes.
        @Test(arguments: [
            // TPM_RC_AUTH_FAIL (session 1): a wrong PIN, counted toward the lockout.
            (
                UInt32(0x98E), TPMResponse.Operation.authorize, KeyboundError.Code.authenticationFailed,
                KeyboundError.Recovery.retry
            ),
            // TPM_RC_BAD_AUTH (session 1): a wrong value for an object exempt from the lockout.
            (0x9A2, .use, .authenticationFailed, .retry),
            // TPM_RC_AUTH_FAIL when the primary key is made: the owner hierarchy has a password.
            (0x98E, .createPrimary, .notSupported, KeyboundError.Recovery.none),
            // TPM_RC_LOCKOUT.
            (0x921, .authorize, .throttled, .retryLater),
            // TPM_RC_INTEGRITY (parameter 1) at load: another TPM's blob, or this one was cleared.
            (0x1DF, .load, .invalidated, .reenroll),
            // TPM_RC_POLICY_FAIL (session 1): the key's PIN object is gone.
            (0x99D, .use, .invalidated, .reenroll),
            // TPM_RC_ECC_POINT (parameter 1) at ECDH_ZGen: not our ciphertext.
            (0x1E7, .decrypt, .invalidInput, KeyboundError.Recovery.none),
            // TPM_RC_INITIALIZE: TPM2_Startup was never sent.
            (0x100, .createPrimary, .notSupported, KeyboundError.Recovery.none),
            // TPM_RC_OBJECT_MEMORY: someone else's objects fill the slots.
            (0x902, .load, .unexpected, .retryLater),
            // TSS2_TCTI_RC_IO_ERROR: the TPM went away.
            (0xA000A, .use, .notSupported, KeyboundError.Recovery.none),
            // TSS2_ESYS_RC_BAD_VALUE: our mistake, not the user's.
            (0x7000B, .use, .unexpected, KeyboundError.Recovery.none),
        ])
        func tpmCodesMapToKeyboundErrors(
            _ code: UInt32, _ operation: TPMResponse.Operation, _ expected: KeyboundError.Code,
            _ recovery: KeyboundError.Recovery
        ) {
            let error = TPMResponse(code).error(during: operation, tcti: "swtpm:port=1", lockoutInterval: 7)
            #expect(error.code == expected, "\(error)")
            #expect(error.recovery == recovery, "\(error)")
            #expect(error.native == .tss2(code))
            if expected == .throttled { #expect(error.retryAfter == 7) }
        }

        @Test func theNativeCodeReadsAsTheTSSWritesIt() {
            #expect(KeyboundError.NativeCode.tss2(0x921).description == "TSS2_RC(0x921)")
            #expect(KeyboundError.NativeCode.tss2(0xA000A).value == 0xA000A)
            let error = TPMResponse(0x98E).error(during: .authorize, tcti: "x")
            #expect(error.description.hasPrefix("KeyboundError.authenticationFailed [TSS2_RC(0x98E)]"))
        }
    }
#endif
