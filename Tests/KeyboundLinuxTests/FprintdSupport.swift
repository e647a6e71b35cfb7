#if os(Linux)
    import Foundation
    import Keybound
    import KeyboundTestSupport
    import Testing

    @testable import KeyboundLinux

    private let fprintdPath = "/usr/libexec/fprintd"
    private let systemPython = "/usr/bin/python3"

    extension Trait where Self == ComponentRequirement {
        /// The test needs fprintd (with libfprint's virtual device), python3-dbusmock for a mocked
        /// polkit, and dbus-daemon (`make test-deps`); without them it is skipped, with one warning.
        static var fprintd: ComponentRequirement {
            ComponentRequirement(tests: "the fprintd tests") {
                guard FileManager.default.isExecutableFile(atPath: fprintdPath) else {
                    return "fprintd is not installed (run `make test-deps`: fprintd)"
                }
                guard executable("dbus-daemon") != nil else { return "dbus-daemon is not installed" }
                guard FileManager.default.isExecutableFile(atPath: systemPython),
                    (try? runTool(
                        URL(fileURLWithPath: systemPython), ["-c", "import dbusmock"],
                        in: FileManager.default.temporaryDirectory)) != nil
                else {
                    return "python3-dbusmock is not installed (run `make test-deps`), for a mocked polkit"
                }
                return nil
            }
        }
    }

    /// fprintd on a private system bus (`dbus-daemon` with a configuration of its own), with
    /// polkit mocked by python3-dbusmock (its `polkitd` template, every fprintd action allowed)
    /// and libfprint's virtual device (`FP_VIRTUAL_DEVICE`, a socket the test writes `SCAN id`
    /// to), its prints in a temporary `STATE_DIRECTORY`; stopped and deleted by ``stop()``.
    final class PrivateFprintd: Sendable {
        let folder: URL
        let address: String
        let user: String
        private let device: String
        private let processes: Mutex<[SpawnedProcess]>

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-fp-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("state"), withIntermediateDirectories: true)
            address = "unix:path=\(folder.path)/bus"
            device = folder.appendingPathComponent("virtual-device").path
            user = PAMTransaction.currentUserName() ?? "root"
            processes = Mutex([])
            let configuration = PrivateBus.configuration(type: "system", listeningOn: address)
            let configurationURL = folder.appendingPathComponent("bus.conf")
            try Data(configuration.utf8).write(to: configurationURL)
            do {
                guard let dbusDaemon = executable("dbus-daemon") else {
                    throw KeyboundError(.notSupported, message: "no dbus-daemon")
                }
                try start(
                    dbusDaemon, ["--config-file=\(configurationURL.path)", "--nofork", "--nopidfile"], "bus")
                try waitUntil("the system bus listens") {
                    (try? DBusConnection(address: self.address)) != nil
                }
                try start(
                    URL(fileURLWithPath: systemPython),
                    ["-m", "dbusmock", "--system", "--template", "polkitd"],
                    "polkit")
                try waitUntil("the mocked polkit is up") { self.hasOwner("org.freedesktop.PolicyKit1") }
                _ = try DBusConnection(address: address).call(
                    "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                    "org.freedesktop.DBus.Mock",
                    "SetAllowed",
                    [
                        .strings([
                            "net.reactivated.fprint.device.verify", "net.reactivated.fprint.device.enroll",
                            "net.reactivated.fprint.device.setusername",
                        ])
                    ])
                try startFprintd()
            } catch {
                stop()
                throw error
            }
        }

        deinit { stop() }

        private var environment: [String: String] {
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
            environment["FP_VIRTUAL_DEVICE"] = device
            environment["STATE_DIRECTORY"] = folder.appendingPathComponent("state").path
            return environment
        }

        /// Starts fprintd (again, after ``stopFprintd()``).
        func startFprintd() throws {
            try start(URL(fileURLWithPath: fprintdPath), ["--no-timeout"], "fprintd")
            try waitUntil("fprintd is up") { self.hasOwner(FprintdSession.serviceName) }
        }

        /// Stops fprintd only (the bus and polkit stay).
        func stopFprintd() {
            let fprintd = processes.withLock { $0.count > 2 ? $0.removeLast() : nil }
            fprintd?.terminate()
            fprintd?.waitUntilExit()
        }

        /// A finger with the print `id` on the virtual reader; libfprint queues it until the reader
        /// waits for one.
        func scan(_ id: String) throws { try command("SCAN \(id)") }

        /// A finger with the print `id` on the reader as soon as fprintd waits for one (its
        /// device's `finger-needed` property, set once a verification started), from a thread of
        /// its own: the virtual reader listens only while fprintd has it open, and a scan sent
        /// before the verification started could be taken for something else.
        func touch(_ id: String) async throws {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Void, any Error>) in
                DispatchQueue.global().async {
                    continuation.resume(
                        with: Result {
                            try self.waitUntil("fprintd waits for a finger", seconds: 120) {
                                self.fingerNeeded()
                            }
                            try self.scan(id)
                        })
                }
            }
        }

        private func fingerNeeded() -> Bool {
            guard let connection = try? DBusConnection(address: address),
                let path = try? FprintdSessionForTests.defaultDevice(connection),
                let reply = try? connection.call(
                    FprintdSession.serviceName, path, "org.freedesktop.DBus.Properties", "Get",
                    [.string(FprintdSession.deviceInterface), .string("finger-needed")]),
                case .variant(.boolean(true)) = reply.first
            else { return false }
            return true
        }

        /// Enrolls `finger` for the user with the print `id` (five scans, the virtual reader's stages).
        func enroll(_ finger: String, print id: String) throws {
            let connection = try DBusConnection(address: address)
            let path = try FprintdSessionForTests.defaultDevice(connection)
            _ = try connection.call(
                FprintdSession.serviceName, path, FprintdSession.deviceInterface, "Claim", [.string(user)])
            defer {
                _ = try? connection.call(
                    FprintdSession.serviceName, path, FprintdSession.deviceInterface, "Release")
            }
            _ = try connection.call(
                FprintdSession.serviceName, path, FprintdSession.deviceInterface, "EnrollStart",
                [.string(finger)])
            for _ in 0..<5 { try scan(id) }
            try waitUntil("\(finger) is enrolled") {
                let reply = try? connection.call(
                    FprintdSession.serviceName, path, FprintdSession.deviceInterface, "ListEnrolledFingers",
                    [.string(self.user)])
                return reply?.first?.array?.contains { $0.string == finger } == true
            }
            _ = try? connection.call(
                FprintdSession.serviceName, path, FprintdSession.deviceInterface, "EnrollStop")
        }

        /// Sends one command to the virtual reader: one connection each, closed by the reader once
        /// it has read it.
        private func command(_ text: String) throws {
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = Array(device.utf8)
            guard path.count < MemoryLayout.size(ofValue: address.sun_path) else {
                throw KeyboundError(.unexpected, message: "socket path too long")
            }
            withUnsafeMutableBytes(of: &address.sun_path) { bytes in
                for (index, byte) in path.enumerated() { bytes[index] = byte }
            }
            // libfprint opens the reader's socket when fprintd opens the device (a claim), a moment
            // after the call returns: try again, each time with a new socket.
            let deadline = Date().addingTimeInterval(30)
            var descriptor: Int32 = -1
            var failure: Int32 = 0
            while descriptor < 0, Date() < deadline {
                let attempt = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                guard attempt >= 0 else { throw KeyboundError(.unexpected, message: "socket failed") }
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(attempt, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
                if connected == 0 {
                    descriptor = attempt
                } else {
                    failure = errno
                    close(attempt)
                    usleep(20_000)
                }
            }
            guard descriptor >= 0 else {
                throw KeyboundError(
                    .unexpected,
                    message:
                        "the virtual reader does not listen at \(device): \(String(cString: strerror(failure)))"
                )
            }
            defer { close(descriptor) }
            let bytes = Array(text.utf8)
            guard send(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else {
                throw KeyboundError(.unexpected, message: "cannot send \(text)")
            }
            shutdown(descriptor, Int32(SHUT_WR))
            var buffer = [UInt8](repeating: 0, count: 64)
            while recv(descriptor, &buffer, buffer.count, 0) > 0 {}
        }

        func stop() {
            let all = processes.withLock { processes in
                defer { processes = [] }
                return processes
            }
            for process in all.reversed() where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: folder)
        }

        private func start(_ program: URL, _ arguments: [String], _ name: String) throws {
            let process = SpawnedProcess()
            process.executableURL = program
            process.arguments = arguments
            process.environment = environment
            let url = folder.appendingPathComponent("\(name).log")
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            let log = try FileHandle(forWritingTo: url)
            process.standardOutput = log
            process.standardError = log
            try process.run()
            try? log.close()
            processes.withLock { $0.append(process) }
        }

        private func hasOwner(_ name: String) -> Bool {
            guard let connection = try? DBusConnection(address: address),
                let reply = try? connection.call(
                    "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                    [.string(name)]),
                case .boolean(true) = reply.first
            else { return false }
            return true
        }

        private func waitUntil(_ what: String, seconds: TimeInterval = 60, _ condition: () -> Bool) throws {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if condition() { return }
                usleep(20_000)
            }
            let log =
                (try? String(contentsOf: folder.appendingPathComponent("fprintd.log"), encoding: .utf8)) ?? ""
            throw KeyboundError(.unexpected, message: "timed out waiting until \(what): \(log.suffix(600))")
        }
    }

    private enum FprintdSessionForTests {
        static func defaultDevice(_ connection: DBusConnection) throws -> String {
            let reply = try connection.call(
                FprintdSession.serviceName, FprintdSession.managerPath, FprintdSession.managerInterface,
                "GetDefaultDevice")
            guard let path = reply.first?.string else { throw KeyboundError(.unexpected) }
            return path
        }
    }
#endif
