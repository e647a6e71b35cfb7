import Foundation
import Keybound
import KeyboundCrypto
import KeyboundEmulator
import KeyboundWire

/// `keybound device`: drives one persistent emulated device from the shell.
enum DeviceCommand {
    /// One `keybound device` command: its operands and options, for parsing and for `--help`.
    struct Subcommand {
        let name: String
        /// The operands in help (`NAME`, `OUTCOME…`), or "" for none.
        let operands: String
        let summary: String
        let options: [Option]

        /// The command, then its options indented below it, for the help's two columns.
        var helpRows: [(String, String)] {
            [([name, operands].filter { !$0.isEmpty }.joined(separator: " "), summary)]
                + options.map { ("  " + $0.synopsis, $0.summary) }
        }

        /// `store NAME [--policy P] [--accessibility A]`.
        var synopsis: String {
            ([name, operands] + options.map(\.usage)).filter { !$0.isEmpty }.joined(separator: " ")
        }
    }

    /// Options every command takes, before or after its name.
    static let globalOptions: [Option] = [
        .value(
            "state", "FILE",
            "the device's state file (default: $KEYBOUND_DEVICE, else ./keybound-device.state)"),
        .flag("json", "print one JSON object: {\"ok\":true,…} or {\"ok\":false,\"error\":{…}}"),
        .help,
    ]

    static let policyOption = Option.value("policy", "P", "who may use it (policies below)", required: true)
    static let reasonOption = Option.value("reason", "TEXT", "the prompt's reason")

    /// Every command, in the order `--help` lists them.
    static let subcommands: [Subcommand] = [
        Subcommand(
            name: "init", operands: "",
            summary: "a new device (defaults: faceID, passcode 123456, 1 enrolled identity)",
            options: [
                .value("biometry", "B", "faceID, touchID, opticID or none"),
                .value("passcode", "CODE", "the device passcode, 4–64 characters"),
                .flag("no-passcode", "a device without a passcode"),
                .value("enrolled", "N", "enrolled identities, 0–5"),
            ]),
        Subcommand(
            name: "state", operands: "",
            summary: "biometry, enrolled count, passcode set, locked, consecutive failures, lockout",
            options: []),
        Subcommand(
            name: "enroll", operands: "", summary: "add one identity (an enrollment change)", options: []),
        Subcommand(
            name: "unenroll", operands: "", summary: "remove every identity (an enrollment change)",
            options: []),
        Subcommand(name: "lock", operands: "", summary: "lock the device", options: []),
        Subcommand(
            name: "unlock", operands: "", summary: "unlock it (counts as the first unlock since boot)",
            options: []),
        Subcommand(
            name: "set-passcode", operands: "CODE", summary: "set or change the passcode", options: []),
        Subcommand(
            name: "remove-passcode", operands: "",
            summary: "remove it: deletes whenPasscodeSetThisDeviceOnly items and keys", options: []),
        Subcommand(
            name: "present", operands: "OUTCOME…",
            summary: "queue what the user does at the next prompts (outcomes below)",
            options: []),
        Subcommand(
            name: "store", operands: "NAME", summary: "store standard input as the item NAME",
            options: [
                policyOption,
                .value("accessibility", "A", "when it is readable (accessibility below)"),
            ]),
        Subcommand(
            name: "read", operands: "NAME",
            summary: "print the item's value (after a prompt if it is protected)",
            options: [reasonOption]),
        Subcommand(name: "delete", operands: "NAME", summary: "delete the item or key NAME", options: []),
        Subcommand(
            name: "create-key", operands: "NAME",
            summary: "create a P-256 key; print its public key (SPKI DER, base64url)",
            options: [policyOption]),
        Subcommand(
            name: "sign", operands: "NAME",
            summary: "sign standard input (ECDSA P-256 SHA-256); print the DER signature, base64url",
            options: [reasonOption]),
    ]

    /// What the state file's seal does and does not protect: said in `--help`, plainly.
    static let sealNote = """
        The state file is sealed (AES-256-GCM) under a random key kept beside it in FILE.key.
        Both are created owner-only (0600, never through a symbolic link), and a state or key
        file that is not yours, or that others can read or write, is refused.
        The seal protects the state from whoever has the state file without the key (a copy,
        a backup), and reveals any change to it. It does not protect anything from whoever can
        read both files (you, root): they see every stored value and the emulated keys'
        private parts, and can test passcodes against the salted, stretched verifier
        (PBKDF2-HMAC-SHA-256) quickly for short ones. Never store real secrets or use a real
        passcode here.
        """

    static var usage: String {
        """
        usage: keybound device [--state FILE] [--json] COMMAND …

        Drives one persistent emulated device. State lives in --state FILE and is written
        atomically after every command.

        commands:
        \(columns(subcommands.flatMap(\.helpRows), indent: 2))

        options:
        \(Option.help(globalOptions))

        \(notes)

        \(sealNote)
        """
    }

    static func usage(of command: Subcommand) -> String {
        """
        usage: keybound device [--state FILE] [--json] \(command.synopsis)

        \(command.summary)

        options:
        \(Option.help(command.options + globalOptions))

        \(notes)
        """
    }

    /// The vocabulary the commands share.
    static let notes = """
        outcomes: match, no-match, cancel, fallback, system-cancel, app-cancel, passcode:CODE
          (the fallback button shows after 1 failed match with Touch ID, after 2 with Face ID)
        policies: none, biometryCurrentSet, biometryAny, userPresence, devicePasscode, biometryOrPasscode
        accessibility: whenUnlocked, whenUnlockedThisDeviceOnly, afterFirstUnlock,
          afterFirstUnlockThisDeviceOnly, whenPasscodeSetThisDeviceOnly (the default)
        exit status: 0 success, 1 the operation failed (the error is the outcome), 2 usage
        """

    static func run(_ raw: [String]) async -> Int32 {
        // The command is the first word that is neither an option nor a global option's value.
        let commandIndex = Arguments.firstOperand(raw, options: globalOptions)
        guard let commandIndex else {
            let wantsHelp = (try? Arguments(raw, options: globalOptions, command: "keybound device"))?.isSet(
                "help")
            guard wantsHelp == true else {
                // A missing command is a usage error, on standard error like every other, so
                // that `--json` standard output stays parseable.
                printError("keybound device: no command given\n\(usage)")
                return 2
            }
            print(usage)
            return 0
        }
        guard let subcommand = subcommands.first(where: { $0.name == raw[commandIndex] }) else {
            printError(
                "keybound device: unknown device command '\(raw[commandIndex])' (see keybound device --help)")
            return 2
        }
        var rest = raw
        rest.remove(at: commandIndex)
        let arguments: Arguments
        do {
            arguments = try Arguments(
                rest, options: subcommand.options + globalOptions,
                command: "keybound device \(subcommand.name)")
        } catch {
            printError("keybound device: \(error)")
            return 2
        }
        if arguments.isSet("help") {
            print(usage(of: subcommand))
            return 0
        }
        let statePath =
            arguments.value("state") ?? ProcessInfo.processInfo.environment["KEYBOUND_DEVICE"]
            ?? "keybound-device.state"
        let output = Output(json: arguments.isSet("json"))
        let session = DeviceSession(stateFile: URL(fileURLWithPath: statePath))
        do {
            let result: Result
            do {
                result = try await session.perform(subcommand.name, arguments)
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

    /// What a command printed: facts for JSON (and `name: value` lines), and at most one bare
    /// value that plain output prints alone on its line (`read`, `create-key`, `sign`).
    struct Result {
        var fields: [JSONMember] = []
        var bare: JSONMember?
    }

    struct Output {
        let json: Bool

        /// The members of `--json`'s `"error"` object.
        enum ErrorMember: String, MemberName { case code, native, recovery, message }

        func success(_ result: Result) {
            if json {
                printJSON(
                    .object(
                        [JSONMember("ok", .bool(true))] + result.fields + (result.bare.map { [$0] } ?? [])))
            } else {
                for field in result.fields { print("\(field.name): \(Self.plain(field.value))") }
                if let bare = result.bare { print(Self.plain(bare.value)) }
            }
        }

        func failure(_ error: KeyboundError) {
            if json {
                var object = JSONObjectBuilder<ErrorMember>()
                object.add(.code, error.code.rawValue)
                if let native = error.native { object.add(.native, native.value) }
                object.add(.recovery, error.recovery.rawValue)
                object.add(.message, error.message)
                printJSON(.object([JSONMember("ok", .bool(false)), JSONMember("error", object.value)]))
            } else {
                printError(
                    "keybound device: \(error.code) (recovery: \(error.recovery))\(error.message.map { ": \($0)" } ?? "")"
                )
            }
        }

        /// A value as plain output shows it.
        private static func plain(_ value: JSONValue) -> String {
            switch value {
            case .string(let text), .number(let text): text
            case .bool(let flag): flag ? "yes" : "no"
            case .array(let items): items.map(plain).joined(separator: ", ")
            case .null: ""
            case .object: String(decoding: JSON.serialize(value), as: UTF8.self)
            }
        }
    }
}

/// One command against the device in the state file.
private final class DeviceSession {
    let stateFile: URL
    let keyFile: URL
    var device: EmulatedDevice?
    /// The state file's key, once read or made.
    private var key: Data?

    init(stateFile: URL) {
        self.stateFile = stateFile
        keyFile = stateFile.appendingPathExtension("key")
    }

    func perform(_ command: String, _ arguments: Arguments) async throws -> DeviceCommand.Result {
        let words = arguments.positionals
        if command == "init" {
            return try await initialize(arguments, words)
        }
        let device = try load()
        self.device = device
        var result = DeviceCommand.Result()
        switch command {
        case "state":
            try expect(words, count: 0)
            let snapshot = await device.snapshot()
            result.fields = [
                JSONMember("biometry", .string(snapshot.biometryType.rawValue)),
                JSONMember("enrolled", .integer(snapshot.enrolledIdentities)),
                JSONMember("passcode_set", .bool(snapshot.isPasscodeSet)),
                JSONMember("locked", .bool(snapshot.isLocked)),
                JSONMember("consecutive_failures", .integer(snapshot.consecutiveFailedMatches)),
                JSONMember("lockout", .bool(snapshot.isBiometryLockedOut)),
                JSONMember("queued", .integer(snapshot.queuedOutcomes)),
                JSONMember("items", .array(snapshot.items.map(JSONValue.string))),
                JSONMember("keys", .array(snapshot.keys.map(JSONValue.string))),
            ]
            return result
        case "enroll":
            try expect(words, count: 0)
            try await device.enroll()
        case "unenroll":
            try expect(words, count: 0)
            await device.unenrollAll()
        case "lock":
            try expect(words, count: 0)
            await device.lock()
        case "unlock":
            try expect(words, count: 0)
            await device.unlock()
        case "set-passcode":
            try expect(words, count: 1)
            try await device.setPasscode(words[0])
        case "remove-passcode":
            try expect(words, count: 0)
            await device.removePasscode()
        case "present":
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
            result.fields = [JSONMember("queued", .integer(await device.snapshot().queuedOutcomes))]
            return result
        case "store":
            let name = try itemName(words)
            try await ProtectedStore(store: device, verifier: device).store(
                readStandardInput(), as: name, policy: try policy(arguments))
        case "read":
            let name = try itemName(words)
            let verification = try await promptIfProtected(
                device, policy: try? await device.itemPolicy(name),
                arguments.value("reason") ?? "Read \(name)")
            let value = try await ProtectedStore(store: device, verifier: device).read(
                name, verification: verification)
            result.bare = JSONMember("value", .string(String(decoding: value, as: UTF8.self)))
            return result
        case "delete":
            let name = try itemName(words)
            try await ProtectedStore(store: device, verifier: device).delete(name)
            try await ProtectedKeys(vault: device, markers: device, verifier: device).deleteKey(name)
        case "create-key":
            let name = try itemName(words)
            let spki = try await ProtectedKeys(vault: device, markers: device, verifier: device).createKey(
                name, policy: try policy(arguments))
            result.bare = JSONMember("public_key", .string(Base64URL.encode(spki)))
            return result
        case "sign":
            let name = try itemName(words)
            let verification = try await promptIfProtected(
                device, policy: try? await device.keyPolicy(name),
                arguments.value("reason") ?? "Sign with \(name)")
            let signature = try await ProtectedKeys(vault: device, markers: device, verifier: device).sign(
                readStandardInput(), with: name, verification: verification)
            result.bare = JSONMember("signature", .string(Base64URL.encode(signature)))
            return result
        default:
            throw UsageError("unknown device command '\(command)' (see keybound device --help)")
        }
        result.fields = [JSONMember("done", .string(command))]
        return result
    }

    private func initialize(_ arguments: Arguments, _ words: [String]) async throws -> DeviceCommand.Result {
        let biometryName = arguments.value("biometry") ?? "faceID"
        guard let biometry = BiometryType(rawValue: biometryName) else {
            throw UsageError("--biometry is faceID, touchID, opticID or none, not '\(biometryName)'")
        }
        let noPasscode = arguments.isSet("no-passcode")
        let passcodeOption = arguments.value("passcode")
        if noPasscode && passcodeOption != nil {
            throw UsageError("give --passcode or --no-passcode, not both")
        }
        let enrolledText = arguments.value("enrolled") ?? (biometry == .none ? "0" : "1")
        guard let enrolled = Int(enrolledText) else { throw UsageError("--enrolled takes a number") }
        try expect(words, count: 0)
        device = try EmulatedDevice(
            biometry: biometry, passcode: noPasscode ? nil : (passcodeOption ?? "123456"),
            enrolledIdentities: enrolled)
        var result = DeviceCommand.Result()
        result.fields = [
            JSONMember("done", .string("init")), JSONMember("biometry", .string(biometry.rawValue)),
            JSONMember("enrolled", .integer(enrolled)), JSONMember("state", .string(stateFile.path)),
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

    /// The state file's key, kept beside it, owner-only. A new one is made only where there is
    /// nothing yet; an existing one is used only when it is the user's own and private.
    private func fileKey(create: Bool) throws -> Data {
        if let key { return key }
        if create {
            let fresh = SecureRandom.bytes(AES256GCM.keyByteCount)
            do {
                try OwnerOnlyFile.create(fresh, at: keyFile)
                key = fresh
                return fresh
            } catch let error as KeyboundError where error == .duplicateItem {
                // There is a key file already: use it if it passes the checks below.
            }
        }
        let existing = try OwnerOnlyFile.read(keyFile)
        guard existing.count == AES256GCM.keyByteCount else {
            throw KeyboundError.invalidInput("the key file \(keyFile.path) is damaged")
        }
        key = existing
        return existing
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

    private func policy(_ arguments: Arguments) throws -> AccessPolicy {
        // Required in the option table: parsing refused the command line without it.
        let name = arguments.value("policy") ?? ""
        guard let preset = AccessPolicy.named(name) else {
            throw UsageError(
                "unknown policy '\(name)': none, biometryCurrentSet, biometryAny, userPresence, devicePasscode, biometryOrPasscode"
            )
        }
        // docs/design.md: the accessibility defaults to whenPasscodeSetThisDeviceOnly for every policy.
        let accessibilityName = arguments.value("accessibility") ?? "whenPasscodeSetThisDeviceOnly"
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

    private func expect(_ words: [String], count: Int) throws {
        guard words.count == count else {
            throw UsageError("unexpected arguments: \(words.joined(separator: " "))")
        }
    }

    private func readStandardInput() -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}
