#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    extension Trait where Self == ComponentRequirement {
        /// The test needs dbus-daemon and gnome-keyring-daemon (`make test-deps`); without them
        /// it is skipped, with one warning.
        static var secretService: ComponentRequirement {
            ComponentRequirement(tests: "the Secret Service tests") {
                for tool in ["dbus-daemon", "gnome-keyring-daemon"] where executable(tool) == nil {
                    return "\(tool) is not installed (run `make test-deps`: dbus-daemon, gnome-keyring)"
                }
                return nil
            }
        }
    }

    /// A private session bus (`dbus-daemon` with a configuration of its own: no service
    /// activation, so nothing starts unless the test starts it) and, unless told otherwise,
    /// `gnome-keyring-daemon --foreground --components=secrets --unlock` on it, with its home and
    /// data in a temporary folder; stopped and deleted by ``stop()``.
    final class PrivateKeyring: Sendable {
        static let password = "keyring password"
        let folder: URL
        let address: String
        private let bus: SpawnedProcess
        private let keyring: Mutex<SpawnedProcess?>

        init(keyring startKeyring: Bool = true) throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-ss-\(UUID().uuidString.prefix(8))")
            let runtime = folder.appendingPathComponent("run")
            try FileManager.default.createDirectory(
                at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let socket = folder.appendingPathComponent("bus").path
            address = "unix:path=\(socket)"
            let configuration = PrivateBus.configuration(type: "session", listeningOn: address)
            let configurationURL = folder.appendingPathComponent("bus.conf")
            try Data(configuration.utf8).write(to: configurationURL)
            guard let dbusDaemon = executable("dbus-daemon") else {
                throw KeyboundError(.notSupported, message: "no dbus-daemon")
            }
            bus = SpawnedProcess()
            bus.executableURL = dbusDaemon
            bus.arguments = ["--config-file=\(configurationURL.path)", "--nofork", "--nopidfile"]
            let log = try Self.log(folder, "dbus-daemon")
            bus.standardOutput = log
            bus.standardError = log
            try bus.run()
            keyring = Mutex(nil)
            try waitUntil("the bus listens at \(socket)") {
                (try? DBusConnection(address: self.address)) != nil
            }
            if startKeyring { try start() }
        }

        deinit { stop() }

        /// The environment of a program of the user's session on this bus.
        var environment: [String: String] {
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = address
            environment["HOME"] = folder.appendingPathComponent("home").path
            environment["XDG_DATA_HOME"] = folder.appendingPathComponent("home/data").path
            environment["XDG_RUNTIME_DIR"] = folder.appendingPathComponent("run").path
            environment["XDG_CONFIG_HOME"] = folder.appendingPathComponent("home/config").path
            return environment
        }

        /// Starts gnome-keyring, its login keyring unlocked with ``password``.
        func start() throws {
            guard let daemon = executable("gnome-keyring-daemon") else {
                throw KeyboundError(.notSupported, message: "no gnome-keyring-daemon")
            }
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("home/data"), withIntermediateDirectories: true)
            let child = try ChildProcess(
                daemon, ["--foreground", "--components=secrets", "--unlock"], input: Data(Self.password.utf8),
                environment: environment, workingDirectory: folder, files: folder, name: "gnome-keyring")
            try child.process.run()
            keyring.withLock { $0 = child.process }
            try waitUntil("gnome-keyring owns org.freedesktop.secrets") { self.keyringIsUp() }
        }

        private func keyringIsUp() -> Bool {
            guard let connection = try? DBusConnection(address: address),
                let reply = try? connection.call(
                    "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                    [.string(SecretServiceSession.serviceName)]),
                case .boolean(true) = reply.first
            else { return false }
            return true
        }

        /// Calls the Secret Service directly, as any process of the user can.
        func call(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusArgument] = [])
            throws -> [DBusValue]
        {
            try DBusConnection(address: address).call(
                SecretServiceSession.serviceName, path, interface, method, arguments)
        }

        /// The raw secret of the item `name` of `service`, read off the bus with a session of our
        /// own: what any process of the user gets from the keyring.
        func rawSecret(service: String, name: ItemName) throws -> Data {
            let connection = try DBusConnection(address: address)
            let opened = try connection.call(
                SecretServiceSession.serviceName, SecretServiceSession.servicePath,
                SecretServiceSession.serviceInterface, "OpenSession",
                [.string("plain"), .variant(.string(""))])
            guard let session = opened.last?.string else { throw KeyboundError(.unexpected) }
            let found = try connection.call(
                SecretServiceSession.serviceName, SecretServiceSession.servicePath,
                SecretServiceSession.serviceInterface, "SearchItems",
                [.stringDictionary([("keybound.service", service), ("keybound.name", name.rawValue)])])
            guard let item = found.first?.array?.first?.string else {
                throw KeyboundError(.itemNotFound, message: "no \(name) on the bus")
            }
            let secret = try connection.call(
                SecretServiceSession.serviceName, item, SecretServiceSession.itemInterface, "GetSecret",
                [.objectPath(session)])
            guard let value = secret.first?.fields?[2].bytes else { throw KeyboundError(.unexpected) }
            return value
        }

        /// Locks the login keyring (gnome-keyring locks without a prompt; unlocking needs one).
        func lock() throws {
            _ = try call(
                SecretServiceSession.servicePath, SecretServiceSession.serviceInterface, "Lock",
                [.objectPaths(["/org/freedesktop/secrets/collection/login"])])
        }

        /// Stops gnome-keyring only.
        func stopKeyring() {
            guard let process = keyring.withLock({ $0 }) else { return }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            keyring.withLock { $0 = nil }
        }

        func stop() {
            stopKeyring()
            if bus.isRunning {
                bus.terminate()
                bus.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: folder)
        }

        private static func log(_ folder: URL, _ name: String) throws -> FileHandle {
            let url = folder.appendingPathComponent("\(name).log")
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            return try FileHandle(forWritingTo: url)
        }

        private func waitUntil(_ what: String, _ condition: () -> Bool) throws {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if condition() { return }
                usleep(20_000)
            }
            throw KeyboundError(.unexpected, message: "timed out waiting until \(what)")
        }
    }
#endif
