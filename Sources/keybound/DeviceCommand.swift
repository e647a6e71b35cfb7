import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundWire

/// `keybound device`: drives one persistent emulated device from the shell.
enum DeviceCommand {
    static let usage = """
        usage: keybound device [--state FILE] [--json] COMMAND …

        Drives one persistent emulated device. State lives in --state FILE (default
        $KEYBOUND_DEVICE, else ./keybound-device.state), AES-GCM-sealed under a key kept in
        FILE.key, and is written atomically after every command.

        commands:
          init [--biometry faceID|touchID|opticID|none] [--passcode CODE|--no-passcode] [--enrolled N]
          state                          biometry, enrollment, passcode, lock, failures, lockout
          enroll | unenroll              add one identity | remove all (enrollment changes)
          lock | unlock                  lock the device | unlock it
          set-passcode CODE | remove-passcode
          present OUTCOME…               match, no-match, cancel, fallback, system-cancel,
                                         app-cancel, passcode:CODE
          store NAME --policy P [--accessibility A]   value from standard input
          read NAME [--reason TEXT]      value to standard output
          delete NAME
          create-key NAME --policy P     prints the public key (SPKI DER, base64url)
          sign NAME [--reason TEXT]      signs standard input; prints the DER signature, base64url

        policies: none, biometryCurrentSet, biometryAny, userPresence, devicePasscode, biometryOrPasscode
        accessibility: whenUnlocked, whenUnlockedThisDeviceOnly, afterFirstUnlock,
                       afterFirstUnlockThisDeviceOnly, whenPasscodeSetThisDeviceOnly (default)
        exit status: 0 success, 1 the operation failed (the error is the outcome), 2 usage
        """

    static func run(_ raw: [String]) async -> Int32 {
        var arguments: Arguments
        do {
            arguments = try Arguments(raw, flagNames: ["json", "help", "no-passcode"])
        } catch {
            printError("keybound device: \(error)\n\(usage)")
            return 2
        }
        let json = arguments.flag("json")
        let help = arguments.flag("help")
        if help || arguments.positionals.isEmpty {
            // Help that was asked for goes to standard output; a missing command is a usage error
            // and goes to standard error like every other, so `--json` stdout stays parseable.
            guard help else {
                printError("keybound device: no command given\n\(usage)")
                return 2
            }
            print(usage)
            return 0
        }
        let statePath =
            arguments.option("state") ?? ProcessInfo.processInfo.environment["KEYBOUND_DEVICE"]
            ?? "keybound-device.state"
        let output = Output(json: json)
        let session = DeviceSession(stateFile: URL(fileURLWithPath: statePath))
        do {
            let result: DeviceCommand.Result
            do {
                result = try await session.perform(&arguments)
            } catch let error as KeyboundError {
                // A failed prompt still changed the device (outcomes consumed, failures counted).
                try await session.save()
                throw error
            }
            try await session.save()
            output.success(result)
            return 0
        } catch let error as UsageError {
            printError("keybound device: \(error)")
            return 2
        } catch let error as KeyboundError {
            output.failure(error)
            return 1
        } catch {
            output.failure(KeyboundError(.unexpected, message: "\(error)"))
            return 1
        }
    }

    /// What a command printed: key/value facts, and raw text for standard output.
    struct Result {
        var fields: [(String, JSONScalar)] = []
        var text: String?
    }

    enum JSONScalar {
        case string(String)
        case int(Int)
        case bool(Bool)
        case strings([String])

        var json: String {
            switch self {
            case .string(let value): quote(value)
            case .int(let value): String(value)
            case .bool(let value): value ? "true" : "false"
            case .strings(let values): "[" + values.map(quote).joined(separator: ",") + "]"
            }
        }

        var plain: String {
            switch self {
            case .string(let value): value
            case .int(let value): String(value)
            case .bool(let value): value ? "yes" : "no"
            case .strings(let values): values.joined(separator: ", ")
            }
        }

        private func quote(_ value: String) -> String {
            let data = (try? JSONEncoder().encode(value)) ?? Data("\"\"".utf8)
            return String(decoding: data, as: UTF8.self)
        }
    }

    struct Output {
        let json: Bool

        func success(_ result: Result) {
            if json {
                var members = ["\"ok\":true"]
                members += result.fields.map { "\"\($0.0)\":\($0.1.json)" }
                if let text = result.text { members.append("\"value\":\(JSONScalar.string(text).json)") }
                print("{" + members.joined(separator: ",") + "}")
            } else {
                for (name, value) in result.fields { print("\(name): \(value.plain)") }
                if let text = result.text { print(text) }
            }
        }

        func failure(_ error: KeyboundError) {
            if json {
                var members = ["\"code\":\(JSONScalar.string(error.code.rawValue).json)"]
                if let native = error.native { members.append("\"native\":\(native.value)") }
                members.append("\"recovery\":\(JSONScalar.string(error.recovery.rawValue).json)")
                if let message = error.message {
                    members.append("\"message\":\(JSONScalar.string(message).json)")
                }
                print("{\"ok\":false,\"error\":{" + members.joined(separator: ",") + "}}")
            } else {
                printError(
                    "keybound device: \(error.code) (recovery: \(error.recovery))\(error.message.map { ": \($0)" } ?? "")"
                )
            }
        }
    }
}

/// One command against the device in the state file.
private final class DeviceSession {
    let stateFile: URL
    let keyFile: URL
    var device: EmulatedDevice?

    init(stateFile: URL) {
        self.stateFile = stateFile
        keyFile = stateFile.appendingPathExtension("key")
    }

    func perform(_ arguments: inout Arguments) async throws -> DeviceCommand.Result {
        var words = arguments.positionals
        let command = words.removeFirst()
        if command == "init" {
            return try await initialize(&arguments, words)
        }
        let device = try load()
        self.device = device
        var result = DeviceCommand.Result()
        switch command {
        case "state":
            try expect(words, count: 0, arguments)
            let snapshot = await device.snapshot()
            result.fields = [
                ("biometry", .string(snapshot.biometryType.rawValue)),
                ("enrolled", .int(snapshot.enrolledIdentities)),
                ("passcode_set", .bool(snapshot.isPasscodeSet)),
                ("locked", .bool(snapshot.isLocked)),
                ("consecutive_failures", .int(snapshot.consecutiveFailedMatches)),
                ("lockout", .bool(snapshot.isBiometryLockedOut)),
                ("queued", .int(snapshot.queuedOutcomes)),
                ("items", .strings(snapshot.items)),
                ("keys", .strings(snapshot.keys)),
            ]
        case "enroll":
            try expect(words, count: 0, arguments)
            try await device.enroll()
        case "unenroll":
            try expect(words, count: 0, arguments)
            await device.unenrollAll()
        case "lock":
            try expect(words, count: 0, arguments)
            await device.lock()
        case "unlock":
            try expect(words, count: 0, arguments)
            await device.unlock()
        case "set-passcode":
            try expect(words, count: 1, arguments)
            try await device.setPasscode(words[0])
        case "remove-passcode":
            try expect(words, count: 0, arguments)
            await device.removePasscode()
        case "present":
            try arguments.finish()
            guard !words.isEmpty else { throw UsageError("present needs at least one OUTCOME") }
            let outcomes = try words.map { word in
                guard let outcome = PresentationOutcome(cliName: word) else {
                    throw UsageError(
                        "unknown outcome '\(word)': use match, no-match, cancel, fallback, system-cancel, app-cancel, passcode:CODE"
                    )
                }
                return outcome
            }
            await device.present(outcomes)
            result.fields = [("queued", .int(await device.snapshot().queuedOutcomes))]
        case "store":
            let name = try itemName(words)
            let policy = try self.policy(&arguments)
            try arguments.finish()
            try await ProtectedStore(store: device, verifier: device).store(
                readStandardInput(), as: name, policy: policy)
        case "read":
            let name = try itemName(words)
            let reason = arguments.option("reason") ?? "Read \(name)"
            try arguments.finish()
            let verification = try await promptIfProtected(
                device, policy: try? await device.itemPolicy(name), reason)
            let value = try await ProtectedStore(store: device, verifier: device).read(
                name, verification: verification)
            result.text = String(decoding: value, as: UTF8.self)
        case "delete":
            let name = try itemName(words)
            try arguments.finish()
            try await ProtectedStore(store: device, verifier: device).delete(name)
            try await ProtectedKeys(vault: device, markers: device, verifier: device).deleteKey(name)
        case "create-key":
            let name = try itemName(words)
            let policy = try self.policy(&arguments)
            try arguments.finish()
            let spki = try await ProtectedKeys(vault: device, markers: device, verifier: device).createKey(
                name, policy: policy)
            result.fields = [("public_key", .string(Base64URL.encode(spki)))]
            result.text = nil
        case "sign":
            let name = try itemName(words)
            let reason = arguments.option("reason") ?? "Sign with \(name)"
            try arguments.finish()
            let verification = try await promptIfProtected(
                device, policy: try? await device.keyPolicy(name), reason)
            let signature = try await ProtectedKeys(vault: device, markers: device, verifier: device).sign(
                readStandardInput(), with: name, verification: verification)
            result.fields = [("signature", .string(Base64URL.encode(signature)))]
        default:
            throw UsageError("unknown device command '\(command)' (see keybound device --help)")
        }
        if !(command == "state" || command == "present" || command == "create-key" || command == "sign"
            || command == "read")
        {
            result.fields = [("done", .string(command))]
        }
        return result
    }

    private func initialize(_ arguments: inout Arguments, _ words: [String]) async throws
        -> DeviceCommand.Result
    {
        let biometryName = arguments.option("biometry") ?? "faceID"
        guard let biometry = BiometryType(rawValue: biometryName) else {
            throw UsageError("--biometry is faceID, touchID, opticID or none, not '\(biometryName)'")
        }
        let noPasscode = arguments.flag("no-passcode")
        let passcodeOption = arguments.option("passcode")
        if noPasscode && passcodeOption != nil {
            throw UsageError("give --passcode or --no-passcode, not both")
        }
        let enrolledText = arguments.option("enrolled") ?? (biometry == .none ? "0" : "1")
        guard let enrolled = Int(enrolledText) else { throw UsageError("--enrolled takes a number") }
        try expect(words, count: 0, arguments)
        device = try EmulatedDevice(
            biometry: biometry, passcode: noPasscode ? nil : (passcodeOption ?? "123456"),
            enrolledIdentities: enrolled)
        var result = DeviceCommand.Result()
        result.fields = [
            ("done", .string("init")), ("biometry", .string(biometry.rawValue)), ("enrolled", .int(enrolled)),
            ("state", .string(stateFile.path)),
        ]
        return result
    }

    func save() async throws {
        guard let device else { return }
        try await device.save(to: stateFile, key: try fileKey(create: true))
    }

    private func load() throws -> EmulatedDevice {
        guard FileManager.default.fileExists(atPath: stateFile.path) else {
            throw UsageError("no device at \(stateFile.path): run 'keybound device init' first")
        }
        return try EmulatedDevice.load(from: stateFile, key: try fileKey(create: false))
    }

    /// The state file's key, kept beside it with owner-only permissions.
    private func fileKey(create: Bool) throws -> Data {
        if let key = try? Data(contentsOf: keyFile), key.count == AES256GCM.keyByteCount { return key }
        guard create else {
            throw KeyboundError.invalidInput("the key file \(keyFile.path) is missing or damaged")
        }
        let key = SecureRandom.bytes(AES256GCM.keyByteCount)
        // createFile writes a temporary file with the umask's mode, renames it into place and
        // only then applies 0600: without this mask the key sat world-readable in between.
        let previousMask = umask(0o077)
        defer { umask(previousMask) }
        guard
            FileManager.default.createFile(
                atPath: keyFile.path, contents: key, attributes: [.posixPermissions: 0o600])
        else { throw KeyboundError.invalidInput("cannot write the key file \(keyFile.path)") }
        return key
    }

    /// The emulated OS prompts when protected material is used: evaluate its policy first. Missing
    /// material gets no prompt; the read or sign then reports it (not found, or invalidated).
    private func promptIfProtected(_ device: EmulatedDevice, policy: AccessPolicy?, _ reason: String)
        async throws
        -> Verification?
    {
        guard let policy else { return nil }
        return try await device.verify(policy, prompt: VerificationPrompt(reason: reason))
    }

    private func policy(_ arguments: inout Arguments) throws -> AccessPolicy {
        guard let name = arguments.option("policy") else { throw UsageError("--policy P is required") }
        guard let preset = AccessPolicy.named(name) else {
            throw UsageError(
                "unknown policy '\(name)': none, biometryCurrentSet, biometryAny, userPresence, devicePasscode, biometryOrPasscode"
            )
        }
        // docs/design.md: the accessibility defaults to whenPasscodeSetThisDeviceOnly for every policy.
        let accessibilityName = arguments.option("accessibility") ?? "whenPasscodeSetThisDeviceOnly"
        guard let accessibility = AccessPolicy.Accessibility(rawValue: accessibilityName) else {
            throw UsageError("unknown accessibility '\(accessibilityName)'")
        }
        do {
            return try AccessPolicy(
                accessibility: accessibility, constraints: preset.constraints, combination: preset.combination
            )
        } catch {
            throw UsageError("\(name) cannot be combined with \(accessibilityName): \(error)")
        }
    }

    private func itemName(_ words: [String]) throws -> ItemName {
        guard words.count == 1 else { throw UsageError("give exactly one NAME") }
        do { return try ItemName(words[0]) } catch { throw UsageError("\(error)") }
    }

    private func expect(_ words: [String], count: Int, _ arguments: Arguments) throws {
        guard words.count == count else {
            throw UsageError("unexpected arguments: \(words.joined(separator: " "))")
        }
        try arguments.finish()
    }

    private func readStandardInput() -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}
