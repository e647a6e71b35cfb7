#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundCrypto
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    /// What TPMKeyVault promises (docs/linux.md, "Capabilities"), each against a swtpm of its own.
    @Suite("TPMKeyVault on swtpm", .softwareTPM)
    struct TPMKeyVaultTests {
        @Test func aPINBoundKeySignsOnlyAfterTheTPMCheckedThePIN() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            let spki = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            let message = Data("challenge".utf8)

            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            #expect(verification.factors == [.passcode])
            let signature = try await fixture.vault.sign(
                message, with: "device-key", verification: verification)
            // DER, as SecKeyCreateSignature(.ecdsaSignatureMessageX962SHA256) gives it, over SHA-256
            // of the message: KeyboundCrypto's verifier (OpenSSL) accepts it with the SPKI.
            let publicKey = try P256PublicKey(spkiDER: spki)
            #expect(publicKey.isValidSignature(try P256Signature(derRepresentation: signature), for: message))
            #expect(try await fixture.vault.isValidSignature(signature, for: message, by: "device-key"))
            #expect(
                !(try await fixture.vault.isValidSignature(
                    signature, for: Data("other".utf8), by: "device-key")))

            // Without a verification, with one no TPM verifier made, and with this one spent.
            await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await fixture.vault.sign(message, with: "device-key", verification: nil)
            }
            let foreign = Verification(
                id: "00112233445566778899aabbccddeeff", factors: [.passcode], verifiedAt: fixture.time.now,
                reuseDuration: 300)
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.sign(message, with: "device-key", verification: foreign)
            }
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.sign(message, with: "device-key", verification: verification)
            }
            // None of these reached the TPM as a PIN: nothing was counted against the user.
            #expect(try fixture.tpm.lockoutCounter() == 0)
        }

        @Test func aWrongPINIsRefusedByTheTPMItself() async throws {
            let fixture = try TPMFixture(typed: ["135799"])
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)

            let refused = await expectKeyboundError(.authenticationFailed, recovery: .retry) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            // TPM_RC_AUTH_FAIL for session 1 (0x98E): the TPM checked, and counted.
            #expect(refused?.native == .tss2(0x98E))
            #expect(try fixture.tpm.lockoutCounter() == 1)

            // A patched verifier hands the vault a wrong PIN anyway: the TPM refuses to sign.
            let forged = Verification(
                id: "ffeeddccbbaa99887766554433221100", factors: [.passcode], verifiedAt: fixture.time.now,
                reuseDuration: 0,
                context: TPMPINProof(
                    authValue: try TPMKeyVault.pinAuthValue("135799"), verifiedAt: fixture.time.now,
                    reuseDuration: 0))
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.sign(Data("x".utf8), with: "device-key", verification: forged)
            }
            #expect(try fixture.tpm.lockoutCounter() == 2)
        }

        @Test func repeatedWrongPINsReachTheTPMLockout() async throws {
            // The TPM's own defaults, as a fresh swtpm has them: 3 tries, then 1000 s per try.
            let fixture = try TPMFixture(tpm: try SoftwareTPM(maxTries: 3, recoveryTime: 1000))
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            fixture.type(pin)
            let earlier = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)

            fixture.type("111111", "222222", "333333", pin)
            for _ in 1...3 {
                await expectKeyboundError(.authenticationFailed) {
                    try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
                }
            }
            // Locked out: the right PIN too, and a verification made before, at its use.
            let lockout = await expectKeyboundError(.throttled, recovery: .retryLater) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            #expect(lockout?.native == .tss2(0x921))  // TPM_RC_LOCKOUT
            #expect(lockout?.retryAfter == 1000)
            await expectKeyboundError(.throttled) {
                try await fixture.vault.sign(Data("x".utf8), with: "device-key", verification: earlier)
            }
            #expect(try fixture.tpm.lockoutCounter() == 3)

            // The owner of the lockout authorization clears it; the PIN works again.
            try fixture.tpm.clearLockout()
            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            _ = try await fixture.vault.sign(Data("x".utf8), with: "device-key", verification: verification)
        }

        @Test func keyExistsAndPublicKeyNeedNeitherThePINNorTheTPM() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            let spki = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            let signature = try await fixture.vault.sign(
                Data("m".utf8), with: "device-key", verification: verification)

            fixture.tpm.stop()
            #expect(try await fixture.vault.keyExists("device-key"))
            #expect(!(try await fixture.vault.keyExists("other-key")))
            #expect(try await fixture.vault.publicKey("device-key") == spki)
            #expect(
                try await fixture.vault.isValidSignature(signature, for: Data("m".utf8), by: "device-key"))
            #expect(try await fixture.vault.isPINSet())
            // What does need the TPM says it cannot be reached.
            await expectKeyboundError(.notSupported) {
                try await fixture.vault.encrypt(Data("m".utf8), for: "device-key")
            }
        }

        @Test func deleteRemovesTheKey() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "dpop", verification: nil)
            try await fixture.vault.deleteKey("dpop")
            #expect(!(try await fixture.vault.keyExists("dpop")))
            await expectKeyboundError(.itemNotFound) { try await fixture.vault.publicKey("dpop") }
            await expectKeyboundError(.itemNotFound) {
                try await fixture.vault.sign(Data("m".utf8), with: "dpop", verification: nil)
            }
            await expectKeyboundError(.itemNotFound) {
                try await fixture.vault.encrypt(Data("m".utf8), for: "dpop")
            }
            try await fixture.vault.deleteKey("dpop")  // deleting what is not there succeeds
        }

        @Test func aKeyCopiedToAnotherTPMCannotBeUsed() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            let verification = try await fixture.verifier.verify(
                try .devicePasscode.reusing(for: 0), prompt: prompt)
            let otherTPM = try SoftwareTPM()
            defer { otherTPM.stop() }

            // The TPM itself: the blob does not load under the other TPM's storage key. (One
            // connection, closed before the vault's: swtpm serves one at a time.)
            let record = try JSONDecoder().decode(
                KeyRecord.self,
                from: Data(contentsOf: fixture.directory.appendingPathComponent("key-dpop.json")))
            let refused = try Self.loadError(record.blob, on: otherTPM)
            #expect(refused.code == .invalidated)
            #expect(refused.native == .tss2(0x1DF))  // TPM_RC_INTEGRITY, for the private area

            // The vault: the whole directory (both keys, the PIN object) on another machine's TPM.
            let copy = try fixture.copy(to: otherTPM)
            let moved = await expectKeyboundError(.invalidated, recovery: .reenroll) {
                try await copy.sign(Data("m".utf8), with: "dpop", verification: nil)
            }
            #expect(moved?.message?.contains("made by another TPM") == true)
            // Gone from then on, as an invalidated Secure Enclave key is: moved aside, not deleted.
            #expect(!(try await copy.keyExists("dpop")))
            #expect(!(try await copy.keyExists("device-key")))
            #expect(!(try await copy.isPINSet()))
            let aside = try FileManager.default.contentsOfDirectory(atPath: copy.directory.path)
                .filter { $0.hasPrefix("stale-") }
            #expect(aside.count == 1)
            // A new key there works; at home the keys still work.
            _ = try await copy.createKey("dpop", policy: .noVerification)
            _ = try await copy.sign(Data("m".utf8), with: "dpop", verification: nil)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "dpop", verification: nil)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "device-key", verification: verification)
        }

        /// What the TPM answers when `blob` is loaded under its storage key, on a connection of
        /// this test's own, flushed and closed on return.
        private static func loadError(_ blob: TPMBlob, on tpm: SoftwareTPM) throws -> KeyboundError {
            let connection = try ESYSConnection(tcti: tpm.tcti)
            let primary = try connection.createStoragePrimary()
            do {
                _ = try connection.load(blob, under: primary.handle)
            } catch let error as KeyboundError {
                return error
            }
            throw KeyboundError(.unexpected, message: "the other TPM loaded the blob")
        }

        @Test func clearingTheTPMInvalidatesEveryKey() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            // TPM2_Clear (with the lockout authorization): a new owner seed, a new storage key.
            try fixture.tpm.run("tpm2_clear", [])
            await expectKeyboundError(.invalidated, recovery: .reenroll) {
                try await fixture.vault.sign(Data("m".utf8), with: "dpop", verification: nil)
            }
            #expect(!(try await fixture.vault.keyExists("dpop")))
            #expect(!(try await fixture.vault.keyExists("device-key")))
            await expectKeyboundError(.passcodeNotSet) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            // A new key is made under the new storage key and works.
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "dpop", verification: nil)
        }

        @Test func anOwnerPasswordItWasNotGivenIsNotSupported() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try fixture.tpm.run("tpm2_changeauth", ["--object-context=owner", "owner-secret"])
            let refused = await expectKeyboundError(.notSupported) {
                try await fixture.vault.createKey("dpop", policy: .noVerification)
            }
            #expect(refused?.message?.contains("owner hierarchy has an authorization value") == true)
        }

        /// Through tss2's pcap TCTI, which records every command and response: the PIN (and its
        /// hash, the authorization value) is proved in a salted session and encrypted when it is
        /// set or changed, so neither appears on the bus.
        @Test func thePINNeverCrossesTheBusInTheClear() async throws {
            let tpm = try SoftwareTPM()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-tpm-vault-\(UUID().uuidString.prefix(8))")
            defer {
                tpm.stop()
                try? FileManager.default.removeItem(at: directory)
                unlink(SoftwareTPM.capturePath)
            }
            let vault = try TPMKeyVault(
                directory: directory, connection: try TPMConnection(tcti: "pcap:\(tpm.tcti)"))
            var captured = Data()
            // The pcap TCTI starts its file again at each connection: collect after each operation.
            func collect() {
                captured += FileManager.default.contents(atPath: SoftwareTPM.capturePath) ?? Data()
            }

            try await vault.setPIN(pin)
            collect()
            let spki = try await vault.createKey("device-key", policy: .devicePasscode)
            collect()
            let verifier = TPMPINVerifier(vault: vault) { _ in pin }
            let verification = try await verifier.verify(try .devicePasscode.reusing(for: 0), prompt: prompt)
            collect()
            _ = try await vault.sign(Data("m".utf8), with: "device-key", verification: verification)
            collect()
            try await vault.changePIN(from: pin, to: "864200")
            collect()

            // The capture holds the traffic: the new key's public X coordinate came back in clear.
            #expect(captured.range(of: Data(spki.suffix(64).prefix(32))) != nil)
            for secret in [pin, "864200"] {
                #expect(captured.range(of: Data(secret.utf8)) == nil, "\(secret) crossed the bus")
                #expect(captured.range(of: try TPMKeyVault.pinAuthValue(secret)) == nil)
            }
        }

        @Test func aKeyWithoutAPINSignsWithoutAVerification() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            let spki = try await fixture.vault.createKey("dpop", policy: .noVerification)
            let signature = try await fixture.vault.sign(
                Data("request".utf8), with: "dpop", verification: nil)
            let publicKey = try P256PublicKey(spkiDER: spki)
            #expect(
                publicKey.isValidSignature(
                    try P256Signature(derRepresentation: signature), for: Data("request".utf8)))
            // Two signatures of one message differ (a fresh nonce each time) and both verify.
            let again = try await fixture.vault.sign(Data("request".utf8), with: "dpop", verification: nil)
            #expect(again != signature)
            #expect(try await fixture.vault.isValidSignature(again, for: Data("request".utf8), by: "dpop"))
            // A new key of the same name replaces the old one.
            let replaced = try await fixture.vault.createKey("dpop", policy: .noVerification)
            #expect(replaced != spki)
            #expect(
                !(try await fixture.vault.isValidSignature(signature, for: Data("request".utf8), by: "dpop")))
        }

        @Test func anyoneEncryptsOnlyThePINDecrypts() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("seal", policy: .devicePasscode)
            _ = try await fixture.vault.createKey("other", policy: .devicePasscode)
            let secret = Data("refresh-token-\(UUID())".utf8)
            let sealed = try await fixture.vault.encrypt(secret, for: "seal")
            #expect(sealed.count == 65 + 12 + secret.count + 16)
            #expect(try await fixture.vault.encrypt(secret, for: "seal") != sealed)  // a fresh ephemeral key

            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.decrypt(sealed, with: "seal", verification: nil)
            }
            let verification = try await fixture.verifier.verify(
                try AccessPolicy.devicePasscode.reusing(for: 60), prompt: prompt)
            #expect(
                try await fixture.vault.decrypt(sealed, with: "seal", verification: verification) == secret)
            await expectKeyboundError(.invalidInput) {
                try await fixture.vault.decrypt(sealed, with: "other", verification: verification)
            }
            var altered = sealed
            altered[altered.count - 1] ^= 1
            await expectKeyboundError(.invalidInput) {
                try await fixture.vault.decrypt(altered, with: "seal", verification: verification)
            }
            // A point that is not on the curve: the TPM refuses it.
            var offCurve = sealed
            offCurve[64] ^= 1
            await expectKeyboundError(.invalidInput) {
                try await fixture.vault.decrypt(offCurve, with: "seal", verification: verification)
            }
            await expectKeyboundError(.invalidInput) {
                try await fixture.vault.decrypt(Data("short".utf8), with: "seal", verification: verification)
            }

            // A key without a PIN decrypts without a verification.
            _ = try await fixture.vault.createKey("open", policy: .noVerification)
            let open = try await fixture.vault.encrypt(secret, for: "open")
            #expect(try await fixture.vault.decrypt(open, with: "open", verification: nil) == secret)
        }

        @Test func aVerificationServesOneUseOrItsReuseWindow() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            let windowed = try AccessPolicy(
                accessibility: .afterFirstUnlockThisDeviceOnly, constraints: [.devicePasscode],
                reuseDuration: 60)
            _ = try await fixture.vault.createKey("single", policy: .devicePasscode)
            _ = try await fixture.vault.createKey("windowed", policy: windowed)

            let once = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            _ = try await fixture.vault.sign(Data("1".utf8), with: "single", verification: once)
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.sign(Data("2".utf8), with: "single", verification: once)
            }
            // A single-use verification is good for 30 s.
            let late = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            fixture.time.advance(by: 31)
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.sign(Data("3".utf8), with: "single", verification: late)
            }

            let reusable = try await fixture.verifier.verify(windowed, prompt: prompt)
            for index in 0..<3 {
                _ = try await fixture.vault.sign(
                    Data("\(index)".utf8), with: "windowed", verification: reusable)
            }
            fixture.time.advance(by: 61)
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.sign(Data("4".utf8), with: "windowed", verification: reusable)
            }
        }

        @Test func changingThePINKeepsTheKeysAndRefusesTheOldPIN() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            await expectKeyboundError(.duplicateItem) { try await fixture.vault.setPIN("999999") }
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)

            await expectKeyboundError(.authenticationFailed) {
                try await fixture.vault.changePIN(from: "000000", to: "864200")
            }
            #expect(try fixture.tpm.lockoutCounter() == 1)
            try await fixture.vault.changePIN(from: pin, to: "864200")

            fixture.type(pin)
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            fixture.type("864200")
            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "device-key", verification: verification)
        }

        @Test func removingThePINDestroysTheKeysBoundToIt() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)

            try await fixture.vault.removePIN()
            #expect(!(try await fixture.vault.isPINSet()))
            #expect(!(try await fixture.vault.keyExists("device-key")))
            #expect(try await fixture.vault.keyExists("dpop"))
            await expectKeyboundError(.itemNotFound) {
                try await fixture.vault.sign(Data("m".utf8), with: "device-key", verification: verification)
            }
            await expectKeyboundError(.passcodeNotSet, recovery: .setPasscode) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            await expectKeyboundError(.passcodeNotSet) {
                try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            }

            // A new PIN is a new PIN object: a key saved from before (a backup) stays dead.
            let backup = fixture.directory.appendingPathComponent("key-saved.json")
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("saved", policy: .devicePasscode)
            try FileManager.default.copyItem(
                at: fixture.directory.appendingPathComponent("key-saved.json"),
                to: fixture.directory.appendingPathComponent("saved-copy"))
            try await fixture.vault.removePIN()
            try await fixture.vault.setPIN(pin)
            try FileManager.default.moveItem(
                at: fixture.directory.appendingPathComponent("saved-copy"), to: backup)
            let fresh = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            await expectKeyboundError(.invalidated) {
                try await fixture.vault.sign(Data("m".utf8), with: "saved", verification: fresh)
            }
            #expect(!(try await fixture.vault.keyExists("saved")))
        }

        @Test func everyOperationFlushesWhatItLoaded() async throws {
            let fixture = try TPMFixture(typed: [pin, "000000", pin])
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: .devicePasscode)
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            let reusable = try await fixture.verifier.verify(
                try AccessPolicy.devicePasscode.reusing(for: 0), prompt: prompt)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "device-key", verification: reusable)
            await expectKeyboundError(.authenticationFailed) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            let sealed = try await fixture.vault.encrypt(Data("s".utf8), for: "device-key")
            let verification = try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            _ = try await fixture.vault.decrypt(sealed, with: "device-key", verification: verification)
            _ = try await fixture.vault.sign(Data("m".utf8), with: "dpop", verification: nil)
            try await fixture.vault.changePIN(from: pin, to: "864200")
            // No resource manager in front of swtpm: anything left loaded would still be there.
            #expect(try fixture.tpm.transientHandles() == [])
            #expect(try fixture.tpm.loadedSessions() == [])
            // And so many operations in a row would have run out of its 3 object slots.
            for index in 0..<10 {
                _ = try await fixture.vault.sign(Data("\(index)".utf8), with: "dpop", verification: nil)
            }
            #expect(try fixture.tpm.transientHandles() == [])
        }

        @Test func thePINVerifierSaysWhatItCannotDo() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            let before = await fixture.verifier.availability()
            #expect(before.biometryType == .none)
            #expect(before.biometryError == .biometryNotAvailable)
            #expect(!before.isPasscodeSet)
            #expect(before.enrollmentState == nil)
            await expectKeyboundError(.passcodeNotSet) {
                try await fixture.verifier.verify(.devicePasscode, prompt: prompt)
            }
            try await fixture.vault.setPIN(pin)
            #expect(await fixture.verifier.availability().isPasscodeSet)

            await expectKeyboundError(.biometryNotAvailable, recovery: .usePassword) {
                try await fixture.verifier.verify(.biometryCurrentSet, prompt: prompt)
            }
            // Policies the passcode satisfies are satisfied by the PIN.
            for policy in [AccessPolicy.devicePasscode, .userPresence, .biometryOrPasscode] {
                #expect(try await fixture.verifier.verify(policy, prompt: prompt).factors == [.passcode])
            }
            // No constraint, no prompt.
            #expect(try await fixture.verifier.verify(.noVerification, prompt: prompt).factors == [])
            // A cancelled PIN dialog is the app's cancel.
            let cancelling = TPMPINVerifier(vault: fixture.vault) { _ in throw KeyboundError.userCancel }
            await expectKeyboundError(.userCancel, recovery: .silent) {
                try await cancelling.verify(.devicePasscode, prompt: prompt)
            }
            await expectKeyboundError(.invalidInput) { try await fixture.vault.setPIN("12") }
        }

        /// Not a benchmark (speed is measured in keybound-bench, never asserted here): one line in the
        /// log with the costs measured alongside the other tests, and every signature of the run
        /// checked.
        @Test func signingCostsAFewTPMCommands() async throws {
            let fixture = try TPMFixture()
            defer { fixture.stop() }
            try await fixture.vault.setPIN(pin)
            _ = try await fixture.vault.createKey("device-key", policy: try .devicePasscode.reusing(for: 0))
            _ = try await fixture.vault.createKey("dpop", policy: .noVerification)
            let windowed = try AccessPolicy(
                accessibility: .afterFirstUnlockThisDeviceOnly, constraints: [.devicePasscode],
                reuseDuration: 300)
            _ = try await fixture.vault.createKey("windowed", policy: windowed)
            let verification = try await fixture.verifier.verify(windowed, prompt: prompt)
            let rounds = 50
            let clock = ContinuousClock()
            var signatures: [(key: ItemName, message: Data, signature: Data)] = []
            let open = try await clock.measure {
                for index in 0..<rounds {
                    let message = Data("\(index)".utf8)
                    signatures.append(
                        (
                            "dpop", message,
                            try await fixture.vault.sign(message, with: "dpop", verification: nil)
                        ))
                }
            }
            let withPIN = try await clock.measure {
                for index in 0..<rounds {
                    let message = Data("\(index)".utf8)
                    signatures.append(
                        (
                            "windowed", message,
                            try await fixture.vault.sign(
                                message, with: "windowed", verification: verification)
                        ))
                }
            }
            for (key, message, signature) in signatures {
                #expect(try await fixture.vault.isValidSignature(signature, for: message, by: key))
            }
            let check = try await clock.measure {
                for _ in 0..<10 { _ = try await fixture.verifier.verify(.devicePasscode, prompt: prompt) }
            }
            func milliseconds(_ duration: Duration, _ count: Int) -> Double {
                (Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
                    / Double(count)
            }
            print(
                "TPMKeyVault on swtpm: \(String(format: "%.2f", milliseconds(open, rounds))) ms per sign without a PIN, "
                    + "\(String(format: "%.2f", milliseconds(withPIN, rounds))) ms per PIN-bound sign, "
                    + "\(String(format: "%.2f", milliseconds(check, 10))) ms per PIN check (\(rounds) signs each)"
            )
        }
    }
#endif
