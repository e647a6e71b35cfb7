#if os(Linux)
    import Foundation
    import Glibc
    import Keybound
    import KeyboundLinux

    /// What `keybound demo --device linux` runs on: a throwaway TPM 2.0 (swtpm, on two loopback
    /// ports, its state in a temporary folder) and a private session bus (dbus-daemon with a
    /// configuration of its own) with gnome-keyring's Secret Service on it, its login keyring in
    /// the same folder. Never the machine's TPM or the user's keyring: the demo sets a PIN,
    /// removes it, and stores and deletes items. ``stop()`` ends them and deletes the folder.
    final class LinuxDemoComponents {
        /// A component that is not installed, and how to install it: one line for the user.
        struct Missing: Error, CustomStringConvertible {
            let description: String
        }

        /// Where the programs the demo starts are.
        struct Programs {
            let swtpm: URL
            let dbusDaemon: URL
            let keyring: URL
        }

        /// The programs' paths, or ``Missing`` naming the first one not installed and its Debian
        /// package.
        static func locate() throws -> Programs {
            func find(_ program: String, _ package: String, _ what: String) throws -> URL {
                guard let url = PrivateBus.program(program) else {
                    throw Missing(
                        description: "\(program) (\(what)) is not installed: sudo apt-get install \(package) "
                            + "(or make test-deps)")
                }
                return url
            }
            return Programs(
                swtpm: try find("swtpm", "swtpm", "a software TPM 2.0"),
                dbusDaemon: try find("dbus-daemon", "dbus-daemon", "a private D-Bus session bus"),
                keyring: try find("gnome-keyring-daemon", "gnome-keyring", "the Secret Service"))
        }

        let folder: URL
        /// The TPM's TCTI configuration.
        let tpm: TPMConnection
        /// The private session bus with the keyring on it.
        let busAddress: String
        private var children: [DemoChild] = []

        /// Starts swtpm, the bus and gnome-keyring, and waits until each answers.
        /// - Throws: ``Missing`` when a program is not installed; ``DemoFailure`` when one does
        ///   not start (its log's path in the message).
        init() throws {
            let programs = try Self.locate()
            folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-demo-linux-\(UUID().uuidString.prefix(8))")
            for sub in ["tpm", "run", "home/data"] {
                try FileManager.default.createDirectory(
                    at: folder.appendingPathComponent(sub), withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            }
            busAddress = "unix:path=\(folder.path)/bus"
            var tpm: TPMConnection?
            // Stopped here if a later one fails: `self` is not whole until the last is up.
            var children: [DemoChild] = []
            do {
                // swtpm: commands on a free port, control on the next one (its TCTI's convention).
                for _ in 0..<5 where tpm == nil {
                    let port = try freeLoopbackPort()
                    guard port < UInt16.max else { continue }
                    let child = try DemoChild(
                        programs.swtpm,
                        [
                            "socket", "--tpm2", "--tpmstate", "dir=\(folder.path)/tpm",
                            "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                            "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                            "--flags", "not-need-init,startup-clear",
                        ], log: folder.appendingPathComponent("swtpm.log"))
                    children.append(child)
                    if Self.waitUntil(seconds: 10, { !child.isRunning || Self.accepts(port) }),
                        child.isRunning
                    {
                        tpm = .swtpm(port: port)
                    }
                }
                guard let tpm else {
                    throw DemoFailure(description: "swtpm did not start: see \(folder.path)/swtpm.log")
                }
                self.tpm = tpm
                let configuration = folder.appendingPathComponent("bus.conf")
                try Data(PrivateBus.configuration(type: "session", listeningOn: busAddress).utf8)
                    .write(to: configuration)
                children.append(
                    try DemoChild(
                        programs.dbusDaemon,
                        ["--config-file=\(configuration.path)", "--nofork", "--nopidfile"],
                        log: folder.appendingPathComponent("dbus-daemon.log")))
                guard
                    Self.waitUntil(
                        seconds: 10, { FileManager.default.fileExists(atPath: "\(folder.path)/bus") })
                else {
                    throw DemoFailure(
                        description: "dbus-daemon did not start: see \(folder.path)/dbus-daemon.log")
                }

                var environment = ProcessInfo.processInfo.environment
                environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
                environment["HOME"] = folder.appendingPathComponent("home").path
                environment["XDG_DATA_HOME"] = folder.appendingPathComponent("home/data").path
                environment["XDG_CONFIG_HOME"] = folder.appendingPathComponent("home/config").path
                environment["XDG_RUNTIME_DIR"] = folder.appendingPathComponent("run").path
                // Its login keyring, made and unlocked with this password (on standard input).
                children.append(
                    try DemoChild(
                        programs.keyring,
                        ["--foreground", "--components=secrets", "--unlock"],
                        input: Data("demo keyring".utf8),
                        environment: environment, log: folder.appendingPathComponent("gnome-keyring.log")))
            } catch {
                for child in children.reversed() { child.stop() }
                try? FileManager.default.removeItem(at: folder)
                throw error
            }
            self.children = children
        }

        deinit { stop() }

        /// Waits (up to 10 s) until the keyring answers on the bus: a store's `exists` is
        /// `notSupported` until gnome-keyring owns its name.
        func waitForKeyring(_ store: any SecureStore) async throws {
            let deadline = Date().addingTimeInterval(10)
            while true {
                do {
                    _ = try await store.exists("demo.probe")
                    return
                } catch let error as KeyboundError where error == .notSupported && Date() < deadline {
                    try await Task.sleep(nanoseconds: 50_000_000)
                } catch {
                    throw DemoFailure(
                        description:
                            "gnome-keyring did not answer: \(error) (see \(folder.path)/gnome-keyring.log)")
                }
            }
        }

        /// Ends every program and deletes the folder. Later calls do nothing.
        func stop() {
            for child in children.reversed() { child.stop() }
            children = []
            try? FileManager.default.removeItem(at: folder)
        }

        private static func waitUntil(seconds: TimeInterval, _ condition: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if condition() { return true }
                usleep(20_000)
            }
            return condition()
        }

        private static func accepts(_ port: UInt16) -> Bool {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { return false }
            defer { close(descriptor) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = port.bigEndian
            return withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
        }
    }

    /// A program the demo started with `posix_spawn` (not Foundation's `Process`, whose `run()`
    /// can crash reading /proc/self/fd: swift-corelibs-foundation #5472): its output and errors
    /// to `log`, `input` on its standard input.
    final class DemoChild {
        private let pid: pid_t
        private var status: Int32?

        init(
            _ program: URL, _ arguments: [String], input: Data = Data(),
            environment: [String: String] = ProcessInfo.processInfo.environment, log: URL
        ) throws {
            var pipe: [Int32] = [0, 0]
            guard Glibc.pipe(&pipe) == 0 else {
                throw DemoFailure(description: "pipe: \(String(cString: strerror(errno)))")
            }
            defer { close(pipe[0]) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, pipe[0], 0)
            posix_spawn_file_actions_addclose(&actions, pipe[1])
            posix_spawn_file_actions_addopen(&actions, 1, log.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            let argv = ([program.path] + arguments).map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in argv + envp { free(pointer) } }
            // Signals at their defaults and unblocked, as from a shell: the server in this process
            // ignores SIGTERM (it handles it itself), and an ignored signal is inherited.
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var all = sigset_t()
            sigfillset(&all)
            var none = sigset_t()
            sigemptyset(&none)
            posix_spawnattr_setsigdefault(&attributes, &all)
            posix_spawnattr_setsigmask(&attributes, &none)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
            var pid: pid_t = 0
            let result = posix_spawn(&pid, program.path, &actions, &attributes, argv, envp)
            guard result == 0 else {
                close(pipe[1])
                throw DemoFailure(
                    description:
                        "\(program.lastPathComponent) did not start: \(String(cString: strerror(result)))")
            }
            self.pid = pid
            input.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress { _ = write(pipe[1], base, bytes.count) }
            }
            close(pipe[1])
        }

        deinit { stop() }

        /// Whether it has not exited yet.
        var isRunning: Bool {
            if status != nil { return false }
            var value: Int32 = 0
            if waitpid(pid, &value, WNOHANG) == pid { status = value }
            return status == nil
        }

        /// SIGTERM, then waits for it. Later calls do nothing.
        func stop() {
            guard isRunning else { return }
            kill(pid, SIGTERM)
            var value: Int32 = 0
            _ = waitpid(pid, &value, 0)
            status = value
        }
    }
#endif
