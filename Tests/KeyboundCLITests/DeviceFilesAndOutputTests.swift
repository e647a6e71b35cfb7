import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

/// The `keybound device` files (owner-only, never through a link, never someone else's; the
/// passcode salted and stretched), its bare output, and its generated help.
@Suite struct DeviceFilesAndOutputTests {
    let sandbox: Sandbox

    init() throws { sandbox = try Sandbox() }

    func mode(_ url: URL) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return try #require(attributes[.posixPermissions] as? NSNumber).intValue & 0o777
    }

    // MARK: - The contract's output

    /// `k=$(keybound device create-key …)` and `s=$(… sign …)` get the bare value, as `read` does.
    @Test func createKeyAndSignPrintTheBareValueLikeRead() throws {
        try expectSuccess(try sandbox.device("init"))
        let plain = ["device", "--state", sandbox.state.path]
        let created = try sandbox.run(plain + ["create-key", "k", "--policy", "none"])
        #expect(created.status == 0, "\(created.stderr)")
        let lines = created.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines[1].isEmpty, "one line: \(created.text)")
        let spki = try #require(Base64URL.decode(String(lines[0])), "not bare base64url: \(created.text)")
        let publicKey = try P256PublicKey(spkiDER: spki)

        let message = Data("pay 0.5 ETH".utf8)
        let signed = try sandbox.run(plain + ["sign", "k"], input: message)
        #expect(signed.status == 0, "\(signed.stderr)")
        #expect(signed.text.hasSuffix("\n") && signed.text.filter { $0 == "\n" }.count == 1, "\(signed.text)")
        let der = try #require(Base64URL.decode(String(signed.text.dropLast())), "not bare: \(signed.text)")
        #expect(publicKey.isValidSignature(try P256Signature(derRepresentation: der), for: message))

        try expectSuccess(try sandbox.device("store", "pref", "--policy", "none", input: "blue"))
        #expect(try sandbox.run(plain + ["read", "pref"]).text == "blue\n")
    }

    // MARK: - Files

    @Test func theStateAndKeyFilesAreCreatedOwnerOnly() throws {
        try expectSuccess(try sandbox.device("init"))
        let stateMode = try mode(sandbox.state)
        #expect(stateMode == 0o600, "state file mode \(String(stateMode, radix: 8))")
        #expect(try mode(sandbox.key) == 0o600)
        // Rewritten after every command: still owner-only.
        try expectSuccess(try sandbox.device("enroll"))
        #expect(try mode(sandbox.state) == 0o600)
    }

    @Test(arguments: [0o644, 0o640, 0o604, 0o660])
    func aKeyOrStateFileOthersCanAccessIsRefused(_ loose: Int) throws {
        try expectSuccess(try sandbox.device("init"))
        for file in [sandbox.key, sandbox.state] {
            try FileManager.default.setAttributes([.posixPermissions: loose], ofItemAtPath: file.path)
            let before = try Data(contentsOf: sandbox.state)
            let reply = try sandbox.device("state")
            try expectFailure(reply, code: "invalidInput", native: nil, recovery: "none")
            let message = try #require((try reply.object()["error"] as? JSONObject)?["message"] as? String)
            #expect(message.contains(file.path) && message.contains("chmod 600"), "\(message)")
            #expect(try Data(contentsOf: sandbox.state) == before, "nothing was written")
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        }
        try expectSuccess(try sandbox.device("state"))
    }

    /// `init` where a key file is already there uses it only if it is the user's own and private:
    /// a key others can read is never reused (it would seal the new device for them too).
    @Test func initDoesNotReuseAKeyOthersCanRead() throws {
        try Data(repeating: 7, count: 32).write(to: sandbox.key)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: sandbox.key.path)
        try expectFailure(try sandbox.device("init"), code: "invalidInput", native: nil, recovery: "none")
        #expect(!FileManager.default.fileExists(atPath: sandbox.state.path))
    }

    @Test func symbolicLinksAreNeverFollowed() throws {
        // A link planted where the key will go, pointing at a file the planter can read.
        let planted = sandbox.directory.appendingPathComponent("planted")
        try Data(repeating: 7, count: 32).write(to: planted)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: planted.path)
        try FileManager.default.createSymbolicLink(at: sandbox.key, withDestinationURL: planted)
        try expectFailure(try sandbox.device("init"), code: "invalidInput", native: nil, recovery: "none")
        #expect(!FileManager.default.fileExists(atPath: sandbox.state.path))

        // The state file replaced by a link to a copy of itself: not read.
        try FileManager.default.removeItem(at: sandbox.key)
        try expectSuccess(try sandbox.device("init"))
        let copy = sandbox.directory.appendingPathComponent("copy.state")
        try FileManager.default.copyItem(at: sandbox.state, to: copy)
        try FileManager.default.removeItem(at: sandbox.state)
        try FileManager.default.createSymbolicLink(at: sandbox.state, withDestinationURL: copy)
        try expectFailure(try sandbox.device("state"), code: "invalidInput", native: nil, recovery: "none")
    }

    @Test(.enabled(if: geteuid() == 0, "giving a file to another user needs root"))
    func aKeyOrStateFileOfAnotherUserIsRefused() throws {
        try expectSuccess(try sandbox.device("init"))
        for file in [sandbox.key, sandbox.state] {
            try FileManager.default.setAttributes([.ownerAccountID: 65_534], ofItemAtPath: file.path)
            let reply = try sandbox.device("state")
            try expectFailure(reply, code: "invalidInput", native: nil, recovery: "none")
            let message = try #require((try reply.object()["error"] as? JSONObject)?["message"] as? String)
            #expect(message.contains(file.path) && message.contains("not to you"), "\(message)")
            try FileManager.default.setAttributes([.ownerAccountID: 0], ofItemAtPath: file.path)
        }
        try expectSuccess(try sandbox.device("state"))
    }

    /// Opened with the key (as whoever holds both files can), the state holds a salted,
    /// stretched verifier of the passcode: not the passcode, not its bare SHA-256, and not the
    /// same for two devices with the same passcode.
    @Test func thePasscodeIsSaltedAndStretchedInTheStateFile() throws {
        func plaintextState() throws -> String {
            let sealed = try Data(contentsOf: sandbox.state)
            let plaintext = try AES256GCM.open(
                sealed, key: try Data(contentsOf: sandbox.key),
                authenticating: Data("keybound-emulated-device-v2".utf8))
            return String(decoding: plaintext, as: UTF8.self)
        }
        func passcode(_ state: String) throws -> [String: Any] {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(state.utf8)) as? [String: Any])
            return try #require(object["passcode"] as? [String: Any], "\(state)")
        }
        try expectSuccess(try sandbox.device("init", "--passcode", "482916"))
        let first = try plaintextState()
        let bareHash = Digest.sha256(Data("482916".utf8))
        for needle in [
            "482916", bareHash.base64EncodedString(), bareHash.map { String(format: "%02x", $0) }.joined(),
        ] {
            #expect(!first.contains(needle), "the state shows \(needle)")
        }
        let verifier = try passcode(first)
        #expect(verifier["iterations"] as? Int ?? 0 >= 100_000)
        #expect((verifier["salt"] as? String).flatMap { Data(base64Encoded: $0) }?.count == 16)

        try expectSuccess(try sandbox.device("init", "--passcode", "482916"))
        let second = try passcode(try plaintextState())
        #expect(second["salt"] as? String != verifier["salt"] as? String)
        #expect(second["derived"] as? String != verifier["derived"] as? String)
        // And it still works.
        try expectSuccess(try sandbox.device("store", "pin", "--policy", "devicePasscode", input: "v"))
        try expectSuccess(try sandbox.device("present", "passcode:482916"))
        #expect(try expectSuccess(try sandbox.device("read", "pin"))["value"] as? String == "v")
    }

    // MARK: - Help

    @Test func helpSaysWhatTheSealDoesAndDoesNotProtect() throws {
        let help = try sandbox.run(["device", "--help"])
        #expect(help.status == 0)
        for phrase in [
            "owner-only (0600", "never through a symbolic link", "is refused", "without the key",
            "does not protect", "PBKDF2", "Never store real secrets or use a real", "passcode here",
        ] {
            #expect(help.text.contains(phrase), "\(phrase)")
        }
    }

    /// The help is generated from the option tables: every command has its own `--help`, every
    /// option it lists is accepted, and the columns line up.
    @Test func helpIsGeneratedFromTheOptionTablesAndAligned() throws {
        /// The lines of the help's section `title`, up to the next blank line.
        func section(_ title: String, of help: String) throws -> [Substring] {
            let parts = help.components(separatedBy: "\n\(title):\n")
            try #require(parts.count == 2, "one '\(title):' section in \(help)")
            return parts[1].components(separatedBy: "\n\n")[0].split(separator: "\n")
        }
        let help = try sandbox.run(["device", "--help"]).text
        let commandLines = try section("commands", of: help)
        #expect(commandLines.count >= 14)
        let descriptionColumns = Set(
            commandLines.map { line in
                let text = Array(line)
                var index = 0
                while index < text.count, text[index] == " " { index += 1 }  // the indentation
                while index + 1 < text.count, !(text[index] == " " && text[index + 1] == " ") { index += 1 }
                while index < text.count, text[index] == " " { index += 1 }  // the gap
                return index
            })
        #expect(descriptionColumns.count == 1, "\(help)")

        let commands = commandLines.filter { !$0.hasPrefix("    ") }.map {
            String($0.dropFirst(2).prefix { $0 != " " })
        }
        #expect(
            commands == [
                "init", "state", "enroll", "unenroll", "lock", "unlock", "set-passcode", "remove-passcode",
                "present", "store", "read", "delete", "create-key", "sign",
            ])
        for command in commands {
            let own = try sandbox.run(["device", command, "--help"])
            #expect(own.status == 0, "\(command) --help: \(own.stderr)")
            #expect(own.text.contains("usage: keybound device [--state FILE] [--json] \(command)"))
            // Every option its help lists parses (with --help, nothing runs).
            let options = try section("options", of: own.text).map {
                $0.trimmingCharacters(in: .whitespaces).split(separator: " ")
            }
            for option in options where !option.isEmpty {
                var words = ["device", command, String(option[0])]
                if option.count > 1, option[1].first?.isUppercase == true { words.append("x") }
                let parsed = try sandbox.run(words + ["--help"])
                #expect(parsed.status == 0, "\(words): \(parsed.stderr)")
            }
        }
        expectUsageError(
            try sandbox.device("lock", "--policy", "none"), mentioning: "unknown option --policy")
    }

    @Test func faceIDFallbackIsOfferedAfterTwoFailedMatchesAcrossCommands() throws {
        try expectSuccess(try sandbox.device("init"))
        try expectSuccess(try sandbox.device("store", "tok", "--policy", "biometryCurrentSet", input: "v"))
        // No fallback button yet: the tap does nothing, and then nobody is there.
        try expectSuccess(try sandbox.device("present", "fallback"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "userCancel", native: -2, recovery: "silent")
        try expectSuccess(try sandbox.device("present", "no-match", "no-match", "fallback"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "userFallback", native: -3, recovery: "usePassword")
        try expectSuccess(try sandbox.device("present", "no-match", "no-match", "cancel"))
        try expectFailure(
            try sandbox.device("read", "tok"), code: "userCancel", native: -2, recovery: "silent")
    }
}
