import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

/// docs/design.md, "The `keybound device` command (contract)", end to end: every test runs the real
/// `keybound` binary as a subprocess against its own state file, with `--json`.
@Suite struct DeviceCommandTests {
    let sandbox: Sandbox

    init() throws { sandbox = try Sandbox() }

    // MARK: - init and state

    @Test func initDefaultsToFaceIDPasscode123456AndOneEnrolledIdentity() throws {
        let created = try expectSuccess(try sandbox.device("init"))
        #expect(created["done"] as? String == "init")
        let state = try deviceState(sandbox)
        #expect(state["biometry"] as? String == "faceID")
        #expect(state["enrolled"] as? Int == 1)
        #expect(state["passcode_set"] as? Bool == true)
        #expect(state["locked"] as? Bool == false)
        #expect(state["consecutive_failures"] as? Int == 0)
        #expect(state["lockout"] as? Bool == false)
        #expect(state["queued"] as? Int == 0)

        // The default passcode is 123456: it satisfies a passcode-only item, another does not.
        try expectSuccess(try sandbox.device("store", "pin", "--policy", "devicePasscode", input: "v"))
        try expectSuccess(try sandbox.device("present", "passcode:654321", "cancel"))
        try expectFailure(
            try sandbox.device("read", "pin"), code: "userCancel", native: -2, recovery: "silent")
        try expectSuccess(try sandbox.device("present", "passcode:123456"))
        #expect(try expectSuccess(try sandbox.device("read", "pin"))["value"] as? String == "v")
    }

    @Test func initTouchIDWithTwoEnrolledAndACustomPasscode() throws {
        try expectSuccess(
            try sandbox.device("init", "--biometry", "touchID", "--enrolled", "2", "--passcode", "2468"))
        let state = try deviceState(sandbox)
        #expect(state["biometry"] as? String == "touchID")
        #expect(state["enrolled"] as? Int == 2)
        #expect(state["passcode_set"] as? Bool == true)
        try expectSuccess(try sandbox.device("store", "pin", "--policy", "devicePasscode", input: "v"))
        try expectSuccess(try sandbox.device("present", "passcode:2468"))
        #expect(try expectSuccess(try sandbox.device("read", "pin"))["value"] as? String == "v")
    }

    @Test func initWithoutPasscodeRefusesPasscodeBoundItems() throws {
        try expectSuccess(try sandbox.device("init", "--no-passcode"))
        let state = try deviceState(sandbox)
        #expect(state["passcode_set"] as? Bool == false)
        #expect(state["biometry"] as? String == "faceID")
        // whenPasscodeSetThisDeviceOnly (the default) cannot exist without a passcode.
        try expectFailure(
            try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"),
            code: "passcodeNotSet", native: -25293, recovery: "setPasscode")
        // Unprotected data still works.
        try expectSuccess(
            try sandbox.device(
                "store", "pref", "--policy", "none", "--accessibility", "afterFirstUnlockThisDeviceOnly",
                input: "p"))
        #expect(try expectSuccess(try sandbox.device("read", "pref"))["value"] as? String == "p")
    }

    @Test func initWithoutBiometryHasNothingEnrolledAndRefusesBiometricItems() throws {
        try expectSuccess(try sandbox.device("init", "--biometry", "none"))
        let state = try deviceState(sandbox)
        #expect(state["biometry"] as? String == "none")
        #expect(state["enrolled"] as? Int == 0)
        #expect(state["passcode_set"] as? Bool == true)
        try expectFailure(
            try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"),
            code: "biometryNotAvailable", native: -6, recovery: "usePassword")
        try expectSuccess(try sandbox.device("store", "pin", "--policy", "devicePasscode", input: "v"))
    }

    // MARK: - Exit status and usage errors

    struct UsageCase: Sendable, CustomTestStringConvertible {
        let label: String
        let arguments: [String]
        let fragment: String
        var testDescription: String { label }
    }

    static let usageCases: [UsageCase] = [
        UsageCase(label: "unknown command", arguments: ["frobnicate"], fragment: "unknown device command"),
        UsageCase(
            label: "unknown option", arguments: ["state", "--bogus=1"], fragment: "unknown option --bogus"),
        UsageCase(label: "unknown read option", arguments: ["read", "tok", "--why", "x"], fragment: "--why"),
        UsageCase(
            label: "unknown outcome", arguments: ["present", "sneeze"], fragment: "unknown outcome 'sneeze'"),
        UsageCase(label: "present without outcome", arguments: ["present"], fragment: "OUTCOME"),
        UsageCase(label: "store without --policy", arguments: ["store", "tok"], fragment: "--policy"),
        UsageCase(
            label: "create-key without --policy", arguments: ["create-key", "k"], fragment: "--policy"),
        UsageCase(
            label: "bad policy name", arguments: ["store", "tok", "--policy", "faceOnly"],
            fragment: "unknown policy 'faceOnly'"),
        UsageCase(
            label: "bad accessibility",
            arguments: ["store", "tok", "--policy", "none", "--accessibility", "always"],
            fragment: "unknown accessibility"),
        UsageCase(
            label: "--passcode with --no-passcode",
            arguments: ["init", "--passcode", "1234", "--no-passcode"],
            fragment: "not both"),
        UsageCase(
            label: "bad biometry", arguments: ["init", "--biometry", "retina"], fragment: "--biometry"),
        UsageCase(
            label: "non-numeric --enrolled", arguments: ["init", "--enrolled", "two"], fragment: "--enrolled"),
        UsageCase(label: "no command", arguments: [], fragment: "no command given"),
    ]

    @Test(arguments: usageCases)
    func usageErrorsExitTwoAndLeaveTheDeviceAlone(_ usage: UsageCase) throws {
        try expectSuccess(try sandbox.device("init"))
        let before = try Data(contentsOf: sandbox.state)
        expectUsageError(
            try sandbox.device(usage.arguments, input: Data("x".utf8)), mentioning: usage.fragment)
        #expect(
            try Data(contentsOf: sandbox.state) == before, "a usage error must not rewrite the state file")
    }

    @Test func aCommandBeforeInitIsAUsageError() throws {
        expectUsageError(try sandbox.device("state"), mentioning: "run 'keybound device init' first")
        expectUsageError(try sandbox.device("read", "tok"), mentioning: "run 'keybound device init' first")
        #expect(!FileManager.default.fileExists(atPath: sandbox.state.path))
        #expect(!FileManager.default.fileExists(atPath: sandbox.key.path))
    }

    @Test func helpExitsZero() throws {
        let reply = try sandbox.run(["device", "--help"])
        #expect(reply.status == 0)
        #expect(reply.text.contains("usage: keybound device"))
    }

    // MARK: - Items: store, read, prompts

    @Test func storeFromStandardInputThenReadAfterAMatch() throws {
        try expectSuccess(try sandbox.device("init"))
        let stored = try expectSuccess(
            try sandbox.device(
                "store", "refresh-token", "--policy", "biometryCurrentSet", input: "rt-1 two words"))
        #expect(stored["done"] as? String == "store")
        let queued = try expectSuccess(try sandbox.device("present", "match"))
        #expect(queued["queued"] as? Int == 1)
        let read = try expectSuccess(
            try sandbox.device("read", "refresh-token", "--reason", "Log in to Acme"))
        #expect(read["value"] as? String == "rt-1 two words")
        #expect(try deviceState(sandbox)["queued"] as? Int == 0)

        // Single use: the next read prompts again, and with nothing queued the user "cancels".
        try expectFailure(
            try sandbox.device("read", "refresh-token"), code: "userCancel", native: -2, recovery: "silent")
    }

    @Test func readWithNothingQueuedIsASilentUserCancel() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(
            try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "secret"))
        let reply = try sandbox.device("read", "tok")
        try expectFailure(reply, code: "userCancel", native: -2, recovery: "silent")
        #expect(!reply.text.contains("secret"))
    }

    @Test func policyNoneReadsWithoutAPrompt() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "pref", "--policy", "none", input: "dark-mode"))
        // Nothing queued, and a queued outcome is left untouched: no prompt was shown.
        #expect(try expectSuccess(try sandbox.device("read", "pref"))["value"] as? String == "dark-mode")
        try expectSuccess(try sandbox.device("present", "match"))
        #expect(try expectSuccess(try sandbox.device("read", "pref"))["value"] as? String == "dark-mode")
        #expect(try deviceState(sandbox)["queued"] as? Int == 1)
    }

    @Test func cancelAndFallbackOutcomesHaveTheirCodes() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"))
        let cases: [([String], String, Int, String)] = [
            (["cancel"], "userCancel", -2, "silent"),
            // Face ID shows the fallback button only after two failed matches.
            (["no-match", "no-match", "fallback"], "userFallback", -3, "usePassword"),
            (["system-cancel"], "systemCancel", -4, "silent"),
            (["app-cancel"], "appCancel", -9, "silent"),
        ]
        for (outcomes, code, native, recovery) in cases {
            try expectSuccess(try sandbox.device(["present"] + outcomes, input: Data()))
            try expectFailure(
                try sandbox.device("read", "tok"), code: code, native: native, recovery: recovery)
        }
    }

    @Test func deleteMakesAReadItemNotFoundNotInvalidated() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"))
        try expectSuccess(try sandbox.device("delete", "tok"))
        let reply = try sandbox.device("read", "tok")
        #expect(reply.status == 1)
        let error = try #require(try reply.object()["error"] as? JSONObject)
        #expect(error["code"] as? String == "itemNotFound")
        #expect(error["recovery"] as? String == "none")
    }

    @Test func plainOutputPrintsTheValueAndErrorsGoToStandardError() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "pref", "--policy", "none", input: "blue"))
        let read = try sandbox.run(["device", "--state", sandbox.state.path, "read", "pref"])
        #expect(read.status == 0)
        #expect(read.text == "blue\n")
        try expectSuccess(try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"))
        let failed = try sandbox.run(["device", "--state", sandbox.state.path, "read", "tok"])
        #expect(failed.status == 1)
        #expect(failed.text.isEmpty)
        #expect(failed.stderr.contains("userCancel"))
    }

    // MARK: - Lockout and attempts, across commands

    @Test func fiveFailedMatchesAcrossReadsLockOutUntilThePasscode() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(
            try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "token"))
        try expectSuccess(
            try sandbox.device("store", "vault", "--policy", "biometryOrPasscode", input: "vault"))

        // Face ID offers the fallback button after 2 failed matches and the next outcome decides
        // (another try: the evaluation fails); the count carries across commands.
        try expectSuccess(try sandbox.device("present", "no-match", "no-match", "match"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "authenticationFailed", native: -1, recovery: "retry")
        #expect(try deviceState(sandbox)["consecutive_failures"] as? Int == 2)
        try expectSuccess(try sandbox.device("present", "no-match", "no-match", "cancel"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "userCancel", native: -2, recovery: "silent")
        try expectSuccess(try sandbox.device("present", "no-match"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "biometryLockout", native: -8, recovery: "usePasscode")

        var state = try deviceState(sandbox)
        #expect(state["lockout"] as? Bool == true)
        #expect(state["consecutive_failures"] as? Int == 5)
        #expect(state["queued"] as? Int == 0)

        // Locked out, a match is not even asked for: biometrics-only still reports lockout.
        try expectSuccess(try sandbox.device("present", "match"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "biometryLockout", native: -8, recovery: "usePasscode")
        #expect(try deviceState(sandbox)["queued"] as? Int == 1)
        try expectSuccess(try sandbox.device("present", "passcode:123456"))

        // A biometrics-or-passcode item falls back to the passcode, which clears the lockout.
        // (The leftover `match` is ignored on the passcode screen.)
        #expect(try expectSuccess(try sandbox.device("read", "vault"))["value"] as? String == "vault")
        state = try deviceState(sandbox)
        #expect(state["lockout"] as? Bool == false)
        #expect(state["consecutive_failures"] as? Int == 0)
        #expect(state["queued"] as? Int == 0)

        try expectSuccess(try sandbox.device("present", "match"))
        #expect(try expectSuccess(try sandbox.device("read", "tok"))["value"] as? String == "token")
    }

    @Test func touchIDEndsAnEvaluationAfterThreeFailedMatches() throws {
        try expectSuccess(try sandbox.device("init", "--biometry", "touchID"))
        try expectSuccess(try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"))
        try expectSuccess(try sandbox.device("present", "no-match", "no-match", "no-match", "match"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "authenticationFailed", native: -1, recovery: "retry")
        let state = try deviceState(sandbox)
        #expect(state["consecutive_failures"] as? Int == 3)
        #expect(state["lockout"] as? Bool == false)
        #expect(state["queued"] as? Int == 1, "the 4th outcome belongs to the next prompt")
        #expect(try expectSuccess(try sandbox.device("read", "tok"))["value"] as? String == "v")
    }

    // MARK: - Enrollment and passcode changes

    @Test func enrollInvalidatesCurrentSetMaterialButNotBiometryAny() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(
            try sandbox.device("store", "current", "--policy", "biometryCurrentSet", input: "c"))
        try expectSuccess(try sandbox.device("store", "any", "--policy", "biometryAny", input: "a"))
        try expectSuccess(try sandbox.device("create-key", "device-key", "--policy", "biometryCurrentSet"))

        try expectSuccess(try sandbox.device("enroll"))
        #expect(try deviceState(sandbox)["enrolled"] as? Int == 2)

        try expectFailure(
            try sandbox.device("read", "current"), code: "invalidated", native: -25300, recovery: "reenroll")
        try expectFailure(
            try sandbox.device("sign", "device-key", input: "challenge"), code: "invalidated", native: -25300,
            recovery: "reenroll")
        try expectSuccess(try sandbox.device("present", "match"))
        #expect(try expectSuccess(try sandbox.device("read", "any"))["value"] as? String == "a")
    }

    @Test func unenrollIsAnEnrollmentChange() throws {
        try expectSuccess(try sandbox.device("init", "--enrolled", "2"))
        try expectSuccess(
            try sandbox.device("store", "current", "--policy", "biometryCurrentSet", input: "c"))
        try expectSuccess(try sandbox.device("store", "presence", "--policy", "userPresence", input: "p"))
        try expectSuccess(try sandbox.device("unenroll"))
        #expect(try deviceState(sandbox)["enrolled"] as? Int == 0)
        try expectFailure(
            try sandbox.device("read", "current"), code: "invalidated", native: -25300, recovery: "reenroll")
        // userPresence survives, and with nothing enrolled it takes the passcode.
        try expectSuccess(try sandbox.device("present", "passcode:123456"))
        #expect(try expectSuccess(try sandbox.device("read", "presence"))["value"] as? String == "p")
    }

    @Test func removePasscodeDeletesPasscodeBoundItemsOnly() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "bound", "--policy", "biometryAny", input: "b"))
        try expectSuccess(try sandbox.device("store", "pin", "--policy", "devicePasscode", input: "p"))
        try expectSuccess(try sandbox.device("create-key", "signer", "--policy", "userPresence"))
        try expectSuccess(
            try sandbox.device(
                "store", "pref", "--policy", "none", "--accessibility", "afterFirstUnlockThisDeviceOnly",
                input: "kept"))

        try expectSuccess(try sandbox.device("remove-passcode"))
        let state = try deviceState(sandbox)
        #expect(state["passcode_set"] as? Bool == false)
        let items = try #require(state["items"] as? [String])
        #expect(!items.contains("bound") && !items.contains("pin") && items.contains("pref"))
        #expect(try #require(state["keys"] as? [String]).isEmpty)

        try expectFailure(
            try sandbox.device("read", "bound"), code: "invalidated", native: -25300, recovery: "reenroll")
        try expectFailure(
            try sandbox.device("read", "pin"), code: "invalidated", native: -25300, recovery: "reenroll")
        try expectFailure(
            try sandbox.device("sign", "signer", input: "m"), code: "invalidated", native: -25300,
            recovery: "reenroll")
        #expect(try expectSuccess(try sandbox.device("read", "pref"))["value"] as? String == "kept")
    }

    // MARK: - Lock state

    @Test func lockedDeviceRefusesWhenUnlockedItemsUntilUnlock() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(
            try sandbox.device(
                "store", "plain", "--policy", "none", "--accessibility", "whenUnlockedThisDeviceOnly",
                input: "p"))
        try expectSuccess(
            try sandbox.device(
                "store", "background", "--policy", "none", "--accessibility",
                "afterFirstUnlockThisDeviceOnly",
                input: "b"))

        try expectSuccess(try sandbox.device("lock"))
        #expect(try deviceState(sandbox)["locked"] as? Bool == true)
        try expectFailure(
            try sandbox.device("read", "plain"), code: "interactionNotAllowed", native: -25308,
            recovery: "waitForUnlock")
        // afterFirstUnlock data stays readable while locked (the device was unlocked since boot).
        #expect(try expectSuccess(try sandbox.device("read", "background"))["value"] as? String == "b")

        try expectSuccess(try sandbox.device("unlock"))
        #expect(try deviceState(sandbox)["locked"] as? Bool == false)
        #expect(try expectSuccess(try sandbox.device("read", "plain"))["value"] as? String == "p")
    }

    @Test func lockedDeviceShowsNoPromptForProtectedItems() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(
            try sandbox.device(
                "store", "tok", "--policy", "biometryCurrentSet", "--accessibility",
                "whenUnlockedThisDeviceOnly",
                input: "t"))
        try expectSuccess(try sandbox.device("present", "match"))
        try expectSuccess(try sandbox.device("lock"))
        // The CLI prompts before it reads (as the SDK flows do), so LocalAuthentication answers
        // first: LAError.notInteractive (-1004), which maps to the same code and recovery.
        try expectFailure(
            try sandbox.device("read", "tok"), code: "interactionNotAllowed", native: -1004,
            recovery: "waitForUnlock")
        #expect(
            try deviceState(sandbox)["queued"] as? Int == 1, "no prompt showed, so the match is still queued")
        try expectSuccess(try sandbox.device("unlock"))
        #expect(try expectSuccess(try sandbox.device("read", "tok"))["value"] as? String == "t")
    }

    // MARK: - Keys

    @Test func createKeyThenSignVerifiesOverTheExactStandardInputBytes() throws {
        try expectSuccess(try sandbox.device("init"))
        let created = try expectSuccess(
            try sandbox.device("create-key", "device-key", "--policy", "biometryCurrentSet"))
        let spkiText = try #require(created["public_key"] as? String)
        let spki = try #require(
            Base64URL.decode(spkiText), "public_key is not unpadded base64url: \(spkiText)")
        let publicKey = try P256PublicKey(spkiDER: spki)
        #expect(try deviceState(sandbox)["keys"] as? [String] == ["device-key"])

        // Bytes that are not text and end in a newline: signed exactly, nothing trimmed.
        let message = Data("pay 0.5 ETH to 0x12ef\n".utf8) + Data([0x00, 0xFF, 0x0A])
        try expectSuccess(try sandbox.device("present", "match"))
        let signed = try expectSuccess(
            try sandbox.device(["sign", "device-key", "--reason", "Send 0.5 ETH"], input: message))
        let signatureText = try #require(signed["signature"] as? String)
        let der = try #require(Base64URL.decode(signatureText), "signature is not unpadded base64url")
        let signature = try P256Signature(derRepresentation: der)
        #expect(publicKey.isValidSignature(signature, for: message))
        #expect(!publicKey.isValidSignature(signature, for: message.dropLast()))
        #expect(
            !publicKey.isValidSignature(
                signature, for: Data("pay 0.6 ETH to 0x12ef\n".utf8) + message.suffix(3)))

        // Every signature needs its own verification.
        try expectFailure(
            try sandbox.device(["sign", "device-key"], input: message), code: "userCancel", native: -2,
            recovery: "silent")
    }

    @Test func signWithoutAQueuedMatchFails() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("create-key", "k", "--policy", "biometryCurrentSet"))
        let reply = try sandbox.device("sign", "k", input: "m")
        try expectFailure(reply, code: "userCancel", native: -2, recovery: "silent")
        #expect(try reply.object()["signature"] == nil)
        try expectSuccess(try sandbox.device("present", "no-match", "no-match", "no-match"))
        try expectFailure(
            try sandbox.device("sign", "k", input: "m"), code: "authenticationFailed", native: -1,
            recovery: "retry")
    }

    // MARK: - The state file

    @Test func theStateFileIsSealedAndItsKeyIsOwnerOnly() throws {
        try expectSuccess(try sandbox.device("init"))
        let secret = "s3cret-\(UUID().uuidString)"
        try expectSuccess(
            try sandbox.device("store", "refresh-token", "--policy", "biometryCurrentSet", input: secret))
        try expectSuccess(try sandbox.device("store", "pref", "--policy", "none", input: secret))

        // Not the value, not its base64 (how the plaintext JSON holds bytes), not the item name.
        let sealed = try Data(contentsOf: sandbox.state)
        for needle in [Data(secret.utf8), Data(secret.utf8).base64EncodedData(), Data("refresh-token".utf8)] {
            #expect(
                sealed.range(of: needle) == nil,
                "the state file shows \(String(decoding: needle, as: UTF8.self))")
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: sandbox.key.path)
        let mode = try #require(attributes[.posixPermissions] as? NSNumber).intValue
        #expect(mode & 0o777 == 0o600, "key file mode \(String(mode, radix: 8))")
        #expect(try Data(contentsOf: sandbox.key).count == 32)
    }

    @Test func aTamperedStateFileIsAClearFailureNotACrash() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "tok", "--policy", "none", input: "v"))
        var bytes = try Data(contentsOf: sandbox.state)
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: sandbox.state)

        for command in [["state"], ["read", "tok"]] {
            let reply = try sandbox.device(command, input: Data())
            try expectFailure(reply, code: "invalidInput", native: nil, recovery: "none")
            let message = try #require((try reply.object()["error"] as? JSONObject)?["message"] as? String)
            #expect(
                message.contains(sandbox.state.path) && message.contains("not a device state"), "\(message)")
        }
        #expect(try Data(contentsOf: sandbox.state) == bytes, "a failed load must not overwrite the file")

        // Truncated to nothing, and a missing key, fail the same way.
        try Data().write(to: sandbox.state)
        try expectFailure(try sandbox.device("state"), code: "invalidInput", native: nil, recovery: "none")
        try FileManager.default.removeItem(at: sandbox.key)
        try expectFailure(try sandbox.device("state"), code: "invalidInput", native: nil, recovery: "none")
    }

    @Test func keyboundDeviceEnvironmentVariableIsUsedWithoutState() throws {
        let work = sandbox.directory.appendingPathComponent("work", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let fromEnvironment = sandbox.directory.appendingPathComponent("env.state")
        let environment = ["KEYBOUND_DEVICE": fromEnvironment.path]

        let created = try expectSuccess(
            try sandbox.run(
                ["device", "--json", "init", "--biometry", "opticID"], environment: environment,
                workingDirectory: work))
        #expect(created["state"] as? String == fromEnvironment.path)
        #expect(FileManager.default.fileExists(atPath: fromEnvironment.path))
        #expect(FileManager.default.fileExists(atPath: fromEnvironment.path + ".key"))
        #expect(
            !FileManager.default.fileExists(atPath: work.appendingPathComponent("keybound-device.state").path)
        )
        let state = try expectSuccess(
            try sandbox.run(["device", "--json", "state"], environment: environment, workingDirectory: work))
        #expect(state["biometry"] as? String == "opticID")

        // --state wins over the variable; with neither, ./keybound-device.state is used.
        try expectSuccess(
            try sandbox.run(
                ["device", "--state", sandbox.state.path, "--json", "init"], environment: environment,
                workingDirectory: work))
        #expect(try deviceState(sandbox)["biometry"] as? String == "faceID")
        try expectSuccess(try sandbox.run(["device", "--json", "init"], workingDirectory: work))
        #expect(
            FileManager.default.fileExists(atPath: work.appendingPathComponent("keybound-device.state").path))
    }
}
