#if os(Linux)
    import Foundation
    import Glibc
    import KeyboundWire

    @testable import KeyboundServer

    /// Headless Chromium driven over the DevTools protocol's pipe transport: `--remote-debugging-pipe`
    /// reads commands on file descriptor 3 and writes answers and events on 4, each message one JSON
    /// text ended by a NUL byte. No port, no websocket, no driver.
    ///
    /// The process is started with `posix_spawn`, whose file actions put the two pipe ends at 3 and 4
    /// (Foundation's `Process` passes only standard input, output and error). A reader thread splits
    /// what arrives on 4 into messages and hands each answer to the command waiting for it; events are
    /// not needed (pages are polled with `Runtime.evaluate`). Every command has a deadline, and
    /// ``close()`` ends the process, by force after a grace period, so a test always stops.
    final class Chromium: Sendable {
        struct Failure: Error, CustomStringConvertible {
            let description: String
            init(_ description: String) { self.description = description }
        }

        private struct State {
            var nextID = 0
            var pending: [Int: CheckedContinuation<JSONValue, any Error>] = [:]
            var closed = false
        }

        private let pid: pid_t
        /// Our end of the command pipe (Chromium's descriptor 3).
        private let commands: Int32
        private let state = Locked(State())
        private let writing = Locked(())
        let profile: URL

        /// Debian's `chromium` package, or `KEYBOUND_CHROMIUM`; nil when neither is there.
        static var executable: String? {
            let candidates = [
                ProcessInfo.processInfo.environment["KEYBOUND_CHROMIUM"], "/usr/lib/chromium/chromium",
                "/usr/bin/chromium",
            ]
            return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }

        /// Starts headless Chromium with a fresh profile in a temporary folder. `localhost` resolves to
        /// 127.0.0.1 only, where the test server listens.
        init(executable: String) throws {
            profile = FileManager.default.temporaryDirectory.appendingPathComponent(
                "keybound-chromium-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
            let toChromium = try Self.pipe()
            let fromChromium = try Self.pipe()
            let arguments = [
                executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-breakpad",
                "--password-store=basic",
                "--use-mock-keychain",
                "--host-resolver-rules=MAP localhost 127.0.0.1", "--window-size=900,1100",
                "--user-data-dir=" + profile.path, "about:blank",
            ]
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            let log = profile.appendingPathComponent("chromium.log").path
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            // dup2 clears close-on-exec on the copies: these two are all Chromium inherits of ours.
            posix_spawn_file_actions_adddup2(&actions, toChromium.read, 3)
            posix_spawn_file_actions_adddup2(&actions, fromChromium.write, 4)
            var argv = arguments.map { strdup($0) } + [nil]
            defer { for argument in argv { free(argument) } }
            var pid: pid_t = 0
            let status = posix_spawn(&pid, executable, &actions, nil, &argv, environ)
            Glibc.close(toChromium.read)
            Glibc.close(fromChromium.write)
            guard status == 0 else {
                Glibc.close(toChromium.write)
                Glibc.close(fromChromium.read)
                throw Failure("cannot start \(executable): \(String(cString: strerror(status)))")
            }
            self.pid = pid
            commands = toChromium.write
            let events = fromChromium.read
            let thread = Thread { [state] in Self.read(events, into: state) }
            thread.name = "chromium-devtools"
            thread.start()
        }

        /// A pipe whose ends are above descriptor 4 (so the file actions cannot clobber one with the
        /// other) and close on exec (so no other child inherits them).
        private static func pipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard Glibc.pipe(&fds) == 0 else { throw Failure("pipe failed") }
            defer {
                Glibc.close(fds[0])
                Glibc.close(fds[1])
            }
            let read = fcntl(fds[0], F_DUPFD_CLOEXEC, 10)
            let write = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)
            guard read >= 0, write >= 0 else { throw Failure("fcntl failed") }
            return (read, write)
        }

        /// The reader thread: NUL-framed messages in, answers to their waiting commands. At the end of
        /// the stream every command still waiting fails.
        private static func read(_ fd: Int32, into state: Locked<State>) {
            var buffer = [UInt8]()
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                buffer += chunk[0..<count]
                while let end = buffer.firstIndex(of: 0) {
                    let message = Data(buffer[..<end])
                    buffer.removeSubrange(...end)
                    guard let value = try? JSON.parse(message), case .object(let members) = value,
                        case .number(let text)? = members.first(where: { $0.name == "id" })?.value,
                        let id = Int(text),
                        let waiting = state.withLock({ $0.pending.removeValue(forKey: id) })
                    else { continue }
                    if let error = members.first(where: { $0.name == "error" })?.value {
                        waiting.resume(
                            throwing: Failure(
                                "DevTools error: \(String(decoding: JSON.serialize(error), as: UTF8.self))"))
                    } else {
                        waiting.resume(returning: members.first { $0.name == "result" }?.value ?? .object([]))
                    }
                }
            }
            Glibc.close(fd)
            let waiting = state.withLock { state in
                state.closed = true
                defer { state.pending = [:] }
                return Array(state.pending.values)
            }
            for continuation in waiting {
                continuation.resume(throwing: Failure("Chromium closed the DevTools pipe"))
            }
        }

        /// Sends one DevTools command (to a page when `session` names one) and returns its result.
        /// - Throws: ``Failure`` for a DevTools error, a closed pipe, or no answer within `timeout`.
        @discardableResult
        func send(_ method: String, _ params: [JSONMember] = [], session: String? = nil, timeout: Double = 30)
            async throws -> JSONValue
        {
            let id = state.withLock { state in
                state.nextID += 1
                return state.nextID
            }
            var message = [
                JSONMember("id", .integer(id)), JSONMember("method", .string(method)),
                JSONMember("params", .object(params)),
            ]
            if let session { message.append(JSONMember("sessionId", .string(session))) }
            let bytes = [UInt8](JSON.serialize(.object(message))) + [0]
            return try await withCheckedThrowingContinuation { continuation in
                let closed = state.withLock { state -> Bool in
                    guard !state.closed else { return true }
                    state.pending[id] = continuation
                    return false
                }
                guard !closed else {
                    continuation.resume(throwing: Failure("Chromium is closed"))
                    return
                }
                writing.withLock { _ in
                    var offset = 0
                    while offset < bytes.count {
                        let written = bytes[offset...].withUnsafeBytes {
                            Glibc.write(commands, $0.baseAddress, $0.count)
                        }
                        if written < 0, errno == EINTR { continue }
                        guard written > 0 else { break }
                        offset += written
                    }
                }
                Task { [state] in
                    try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                    state.withLock { $0.pending.removeValue(forKey: id) }?
                        .resume(throwing: Failure("no answer to \(method) within \(timeout) s"))
                }
            }
        }

        /// Asks Chromium to quit, and kills it if it has not within five seconds.
        func close() async {
            _ = try? await send("Browser.close", timeout: 5)
            for _ in 0..<50 {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { break }
                try? await Task.sleep(nanoseconds: 100_000_000)
                if Glibc.kill(pid, 0) != 0 { break }
            }
            if Glibc.kill(pid, 0) == 0 {
                Glibc.kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            }
            Glibc.close(commands)
            try? FileManager.default.removeItem(at: profile)
        }
    }

    /// One page (tab) of a ``Chromium``, attached with a flat session.
    struct ChromiumPage: Sendable {
        let browser: Chromium
        let session: String

        /// Opens a blank page.
        init(_ browser: Chromium) async throws {
            self.browser = browser
            let target = try await browser.send(
                "Target.createTarget", [JSONMember("url", .string("about:blank"))])
            guard case .string(let targetID)? = target.field("targetId") else {
                throw Chromium.Failure("no target")
            }
            let attached = try await browser.send(
                "Target.attachToTarget",
                [JSONMember("targetId", .string(targetID)), JSONMember("flatten", .bool(true))])
            guard case .string(let session)? = attached.field("sessionId") else {
                throw Chromium.Failure("no session")
            }
            self.session = session
        }

        @discardableResult
        func send(_ method: String, _ params: [JSONMember] = []) async throws -> JSONValue {
            try await browser.send(method, params, session: session)
        }

        /// Evaluates JavaScript in the page as a user gesture, awaiting a promise, and returns its
        /// value. A thrown exception becomes a ``Chromium/Failure``.
        @discardableResult
        func evaluate(_ expression: String) async throws -> JSONValue {
            let result = try await send(
                "Runtime.evaluate",
                [
                    JSONMember("expression", .string(expression)), JSONMember("awaitPromise", .bool(true)),
                    JSONMember("returnByValue", .bool(true)), JSONMember("userGesture", .bool(true)),
                ])
            if let exception = result.field("exceptionDetails") {
                throw Chromium.Failure(
                    "JavaScript failed: \(String(decoding: JSON.serialize(exception), as: UTF8.self))")
            }
            return result.field("result")?.field("value") ?? .null
        }

        /// Polls `condition` (JavaScript, true when done) every 100 ms for up to `timeout` seconds.
        func wait(for condition: String, timeout: Double = 30) async throws {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                // A page that is navigating has no context to evaluate in: try again.
                if (try? await evaluate("Boolean(\(condition))")) == .bool(true) { return }
                try await Task.sleep(nanoseconds: 100_000_000)
            }
            let status = try await evaluate("document.getElementById('status')?.textContent ?? ''")
            throw Chromium.Failure("timed out waiting for \(condition); the page says \(status)")
        }
    }

    extension JSONValue {
        /// The member `name` of an object, or nil.
        func field(_ name: String) -> JSONValue? {
            guard case .object(let members) = self else { return nil }
            return members.first { $0.name == name }?.value
        }

        /// The string, or nil.
        var text: String? {
            guard case .string(let text) = self else { return nil }
            return text
        }
    }
#endif
