#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    /// SecretServiceStore against a real gnome-keyring on a private session bus, sealing with a
    /// real (software) TPM.
    @Suite("SecretServiceStore", .secretService, .softwareTPM)
    struct SecretServiceStoreTests {
        private static let service = "dev.keybound.tests"

        /// A keyring, a TPM with the PIN set, and a store over both.
        private struct Setup {
            let keyring: PrivateKeyring
            let tpm: TPMFixture
            let store: SecretServiceStore

            init(keyring: PrivateKeyring? = nil) async throws {
                self.keyring = try keyring ?? PrivateKeyring()
                tpm = try TPMFixture()
                try await tpm.vault.setPIN(pin)
                store = try SecretServiceStore(
                    vault: tpm.vault, service: SecretServiceStoreTests.service,
                    busAddress: self.keyring.address)
            }

            func stop() {
                keyring.stop()
                tpm.stop()
            }
        }

        @Test func itemsAreStoredReadUpdatedAndDeleted() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let store = setup.store
            #expect(try await !store.exists("token"))
            await expectKeyboundError(.itemNotFound) { try await store.read("token", verification: nil) }
            try await store.store(Data("first".utf8), as: "token", policy: .noVerification, verification: nil)
            #expect(try await store.exists("token"))
            #expect(try await store.read("token", verification: nil) == Data("first".utf8))
            try await store.update(Data("second".utf8), as: "token", verification: nil)
            #expect(try await store.read("token", verification: nil) == Data("second".utf8))
            // Storing again replaces the item (one item in the keyring, the new value).
            try await store.store(Data("third".utf8), as: "token", policy: .noVerification, verification: nil)
            #expect(try await store.read("token", verification: nil) == Data("third".utf8))
            let found = try setup.keyring.call(
                SecretServiceSession.servicePath, SecretServiceSession.serviceInterface, "SearchItems",
                [.stringDictionary([("keybound.service", Self.service), ("keybound.name", "token")])])
            #expect(found.first?.array?.count == 1)
            try await store.delete("token")
            #expect(try await !store.exists("token"))
            await expectKeyboundError(.itemNotFound) { try await store.read("token", verification: nil) }
            #expect(try await !setup.tpm.vault.keyExists(try store.keyName("token")))
            try await store.delete("token")  // deleting what is not there succeeds
            await expectKeyboundError(.itemNotFound) {
                try await store.update(Data("x".utf8), as: "token", verification: nil)
            }
        }

        @Test func aPINBoundItemOpensOnlyAfterTheTPMCheckedThePIN() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let store = setup.store
            try await store.store(
                Data("secret".utf8), as: "pin-item", policy: .devicePasscode, verification: nil)
            await expectKeyboundError(.authenticationFailed) {
                try await store.read("pin-item", verification: nil)
            }
            // A verification that carries no PIN the TPM can check is refused.
            let noPIN = try await verificationWithoutAPIN()
            await expectKeyboundError(.authenticationFailed) {
                try await store.read("pin-item", verification: noPIN)
            }
            // A wrong PIN is refused by the TPM, before any verification exists.
            setup.tpm.type("135790")
            await expectKeyboundError(.authenticationFailed) {
                try await setup.tpm.verifier.verify(.devicePasscode, prompt: prompt)
            }
            setup.tpm.type(pin)
            let verification = try await setup.tpm.verifier.verify(.devicePasscode, prompt: prompt)
            #expect(try await store.read("pin-item", verification: verification) == Data("secret".utf8))
            // Single use: the same verification opens it once.
            await expectKeyboundError(.authenticationFailed) {
                try await store.read("pin-item", verification: verification)
            }
            // An update needs the PIN as a read does.
            await expectKeyboundError(.authenticationFailed) {
                try await store.update(Data("new".utf8), as: "pin-item", verification: nil)
            }
            try await store.update(
                Data("new".utf8), as: "pin-item",
                verification: try await setup.tpm.verifier.verify(.devicePasscode, prompt: prompt))
            #expect(
                try await store.read(
                    "pin-item",
                    verification: try await setup.tpm.verifier.verify(.devicePasscode, prompt: prompt))
                    == Data("new".utf8))
        }

        /// The test: what the keyring hands any process of the user is TPM ciphertext,
        /// useless without this machine's TPM.
        @Test func aCopyOfTheItemOffTheBusIsUselessWithoutTheTPM() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let plaintext = Data("refresh-token-0123456789".utf8)
            try await setup.store.store(plaintext, as: "copied", policy: .noVerification, verification: nil)
            let copy = try setup.keyring.rawSecret(service: Self.service, name: "copied")
            #expect(copy.count > plaintext.count + 65)
            #expect(copy.range(of: plaintext) == nil)
            #expect(copy.range(of: Data("refresh-token".utf8)) == nil)
            // Another machine: its own TPM, its own keyring holding the copy, a store with a key
            // of the same name. The TPM there cannot open it.
            let otherKeyring = try PrivateKeyring()
            let other = try await Setup(keyring: otherKeyring)
            defer { other.stop() }
            _ = try await other.tpm.vault.createKey(
                try other.store.keyName("copied"), policy: .noVerification)
            try await SecretServiceSession.run(address: otherKeyring.address) { session in
                try session.createItem(
                    in: try session.defaultCollection(), label: "copied",
                    attributes: [
                        ("xdg:schema", "dev.keybound.Item"), ("keybound.service", Self.service),
                        ("keybound.name", "copied"),
                    ], secret: copy)
            }
            await expectKeyboundError(.invalidInput) {
                try await other.store.read("copied", verification: nil)
            }
            // Even with this machine's key files copied there, the other TPM refuses them.
            let stolenVault = try setup.tpm.copy(to: other.tpm.tpm)
            let stolen = try SecretServiceStore(
                vault: stolenVault, service: Self.service, busAddress: otherKeyring.address)
            let refused = await expectKeyboundError { try await stolen.read("copied", verification: nil) }
            #expect(
                refused?.code == .itemNotFound || refused?.code == .invalidated,
                "\(String(describing: refused))")
            // At home, the TPM opens it.
            #expect(try await setup.store.read("copied", verification: nil) == plaintext)
        }

        @Test func aValueMovedToAnotherItemOpensForNeither() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            try await setup.store.store(
                Data("a".utf8), as: "first", policy: .noVerification, verification: nil)
            try await setup.store.store(
                Data("b".utf8), as: "second", policy: .noVerification, verification: nil)
            let moved = try setup.keyring.rawSecret(service: Self.service, name: "first")
            try await SecretServiceSession.run(address: setup.keyring.address) { session in
                try session.createItem(
                    in: try session.defaultCollection(), label: "second",
                    attributes: [
                        ("xdg:schema", "dev.keybound.Item"), ("keybound.service", Self.service),
                        ("keybound.name", "second"),
                    ], secret: moved)
            }
            await expectKeyboundError(.invalidInput) {
                try await setup.store.read("second", verification: nil)
            }
        }

        @Test func anItemWhosePINWasRemovedReadsAsInvalidated() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let verifier = setup.tpm.verifier
            let protected = ProtectedStore(store: setup.store, verifier: verifier)
            try await protected.store(Data("bound".utf8), as: "session", policy: .devicePasscode)
            #expect(try await protected.status("session") == .present)
            #expect(try await protected.status("never-stored") == .absent)
            await expectKeyboundError(.itemNotFound) {
                try await protected.read("never-stored", verification: nil)
            }
            // Removing the PIN destroys the keys bound to it, and so the item.
            try await setup.tpm.vault.removePIN()
            #expect(try await !setup.store.exists("session"))
            #expect(try await protected.status("session") == .invalidated)
            try await setup.tpm.vault.setPIN(pin)
            let verification = try await verifier.verify(.devicePasscode, prompt: prompt)
            await expectKeyboundError(.invalidated, recovery: .reenroll) {
                try await protected.read("session", verification: verification)
            }
            // Reported once, then gone: the keyring item and the marker were removed.
            #expect(try await protected.status("session") == .absent)
            #expect(throws: KeyboundError.self) {
                try setup.keyring.rawSecret(service: Self.service, name: "session")
            }
        }

        @Test func aLockedKeyringFailsCleanly() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            try await setup.store.store(
                Data("x".utf8), as: "locked", policy: .noVerification, verification: nil)
            try setup.keyring.lock()
            await expectKeyboundError(.interactionNotAllowed, recovery: .waitForUnlock) {
                try await setup.store.read("locked", verification: nil)
            }
            await expectKeyboundError(.interactionNotAllowed, recovery: .waitForUnlock) {
                try await setup.store.store(
                    Data("y".utf8), as: "other", policy: .noVerification, verification: nil)
            }
            await expectKeyboundError(.interactionNotAllowed) { try await setup.store.delete("locked") }
            // It still exists: locked is not gone.
            #expect(try await setup.store.exists("locked"))
        }

        @Test func noKeyringIsNotSupported() async throws {
            let keyring = try PrivateKeyring(keyring: false)
            defer { keyring.stop() }
            let tpm = try TPMFixture()
            defer { tpm.stop() }
            let store = try SecretServiceStore(
                vault: tpm.vault, service: Self.service, busAddress: keyring.address)
            let missing = await expectKeyboundError(.notSupported) {
                try await store.read("x", verification: nil)
            }
            #expect(missing?.message?.contains("no Secret Service") == true, "\(String(describing: missing))")
            // No bus at all.
            let nowhere = try SecretServiceStore(
                vault: tpm.vault, service: Self.service, busAddress: "unix:path=\(keyring.folder.path)/no-bus"
            )
            let noBus = await expectKeyboundError(.notSupported) { try await nowhere.exists("x") }
            #expect(noBus?.message?.contains("no D-Bus session bus") == true, "\(String(describing: noBus))")
        }

        /// The table of docs/linux.md, "Errors": SecretServiceStore, from the D-Bus error names.
        @Test(arguments: [
            ("org.freedesktop.Secret.Error.IsLocked", KeyboundError.Code.interactionNotAllowed),
            ("org.freedesktop.Secret.Error.NoSuchObject", .itemNotFound),
            ("org.freedesktop.DBus.Error.UnknownObject", .itemNotFound),
            ("org.freedesktop.DBus.Error.ServiceUnknown", .notSupported),
            ("org.freedesktop.DBus.Error.NameHasNoOwner", .notSupported),
            ("org.freedesktop.DBus.Error.NotSupported", .notSupported),
            ("org.freedesktop.DBus.Error.AccessDenied", .notSupported),
            ("org.freedesktop.DBus.Error.NoReply", .unexpected),
            ("org.freedesktop.DBus.Error.Disconnected", .unexpected),
            ("org.freedesktop.Secret.Error.NoSession", .unexpected),
        ])
        func dbusErrorsMapToKeyboundErrors(_ name: String, _ expected: KeyboundError.Code) {
            let error = SecretServiceSession.error(
                DBusFailure(name: name, message: "m"), address: "unix:path=/x")
            #expect(error.code == expected, "\(error)")
            #expect(error.message?.contains(name) == true)
            if expected == .interactionNotAllowed { #expect(error.recovery == .waitForUnlock) }
        }

        /// What an item costs: the TPM's work (a key made, ECDH) and a few D-Bus round trips to
        /// gnome-keyring. Printed on every run (docs/linux.md, "Costs").
        @Test func storingAndReadingCostTPMCommandsAndDBusCalls() async throws {
            let setup = try await Setup()
            defer { setup.stop() }
            let store = setup.store
            let rounds = 20
            let clock = ContinuousClock()
            let stores = try await clock.measure {
                for index in 0..<rounds {
                    try await store.store(
                        Data("\(index)".utf8), as: "cost", policy: .noVerification, verification: nil)
                }
            }
            let reads = try await clock.measure {
                for _ in 0..<rounds { _ = try await store.read("cost", verification: nil) }
            }
            try await store.store(
                Data("pin".utf8), as: "cost-pin", policy: .devicePasscode, verification: nil)
            let verifier = setup.tpm.verifier
            let pinReads = try await clock.measure {
                for _ in 0..<rounds {
                    let verification = try await verifier.verify(.devicePasscode, prompt: prompt)
                    _ = try await store.read("cost-pin", verification: verification)
                }
            }
            let searches = try await clock.measure {
                for _ in 0..<rounds { _ = try await store.exists("cost") }
            }
            func milliseconds(_ duration: Duration) -> String {
                let total =
                    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds)
                    / 1e15
                return String(format: "%.1f", total / Double(rounds))
            }
            print(
                "SecretServiceStore on gnome-keyring + swtpm: \(milliseconds(stores)) ms per store, "
                    + "\(milliseconds(reads)) ms per read, \(milliseconds(pinReads)) ms per PIN check + PIN-bound read, "
                    + "\(milliseconds(searches)) ms per exists (\(rounds) each)")
        }

        @Test func whatTheTPMCannotSealIsRefused() async throws {
            for policy in [AccessPolicy.biometryCurrentSet, .biometryOrPasscode, .userPresence] {
                #expect(throws: KeyboundError.notSupported) { try SecretServiceStore.checkSupported(policy) }
            }
            let leaving = try AccessPolicy(accessibility: .afterFirstUnlock, constraints: [])
            #expect(throws: KeyboundError.notSupported) { try SecretServiceStore.checkSupported(leaving) }
            try SecretServiceStore.checkSupported(.devicePasscode)
            try SecretServiceStore.checkSupported(.noVerification)
        }
    }

    /// A verification from a verifier that checks no PIN the TPM knows (a policy without
    /// constraints: PAMVerifier issues it without asking anything).
    private func verificationWithoutAPIN() async throws -> Verification {
        let verifier = try PAMVerifier(service: "keybound-tests-unused") { _ in "" }
        return try await verifier.verify(.noVerification, prompt: prompt)
    }
#endif
