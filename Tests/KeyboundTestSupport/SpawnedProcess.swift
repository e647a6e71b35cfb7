import Foundation
import Keybound

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A child process started with `posix_spawn`, in place of Foundation's `Process`: the members
/// the tests use, under the same names and with the same meanings. Foundation 6.3.1's
/// `Process.run()` copies a whole 256-byte `d_name` for each entry of /proc/self/fd, reads past
/// the end of short ones and crashes about one test run in four (swift-corelibs-foundation #5472).
///
/// The child gets standard input, output and error from the handles set before ``run()`` (ours
/// when nil) and no other descriptor of ours; its signals start at their defaults and unblocked,
/// as from a shell, whatever the launching thread had ignored or blocked. One thread per child
/// waits for its end.
public final class SpawnedProcess: Sendable {
    /// How a finished process ended, as Foundation's `Process.TerminationReason`.
    public enum TerminationReason: Sendable {
        /// It called `exit` (or returned from `main`).
        case exit
        /// A signal ended it.
        case uncaughtSignal
    }

    /// A launch that failed: the executable is missing or cannot run, or a system call failed.
    public struct LaunchError: Error, CustomStringConvertible {
        /// What failed, and the system's reason.
        public let description: String
    }

    private enum Phase {
        case notStarted
        case running(pid_t)
        case finished(pid: pid_t, reason: TerminationReason, status: Int32)
    }

    private struct State {
        var executableURL: URL?
        var arguments: [String] = []
        var environment: [String: String]?
        var currentDirectoryURL: URL?
        var standardInput: FileHandle?
        var standardOutput: FileHandle?
        var standardError: FileHandle?
        var terminationHandler: (@Sendable (SpawnedProcess) -> Void)?
        var phase = Phase.notStarted
    }

    private let state = Mutex(State())
    /// Entered at launch, left once the child is reaped and the handler has run.
    private let running = DispatchGroup()

    /// A process to configure, then ``run()``.
    public init() {}

    private subscript<Value>(_ field: WritableKeyPath<State, Value>) -> Value {
        get { state.withLock { $0[keyPath: field] } }
        set { state.withLock { $0[keyPath: field] = newValue } }
    }

    /// The program to run (also the child's `argv[0]`).
    public var executableURL: URL? {
        get { self[\.executableURL] }
        set { self[\.executableURL] = newValue }
    }
    /// The arguments after `argv[0]`.
    public var arguments: [String] {
        get { self[\.arguments] }
        set { self[\.arguments] = newValue }
    }
    /// The child's whole environment; nil: ours.
    public var environment: [String: String]? {
        get { self[\.environment] }
        set { self[\.environment] = newValue }
    }
    /// The child's working directory; nil: ours.
    public var currentDirectoryURL: URL? {
        get { self[\.currentDirectoryURL] }
        set { self[\.currentDirectoryURL] = newValue }
    }
    /// The child's standard input; nil: ours.
    public var standardInput: FileHandle? {
        get { self[\.standardInput] }
        set { self[\.standardInput] = newValue }
    }
    /// The child's standard output; nil: ours.
    public var standardOutput: FileHandle? {
        get { self[\.standardOutput] }
        set { self[\.standardOutput] = newValue }
    }
    /// The child's standard error; nil: ours.
    public var standardError: FileHandle? {
        get { self[\.standardError] }
        set { self[\.standardError] = newValue }
    }
    /// Called once on the waiting thread when the child has ended, before ``waitUntilExit()``
    /// returns (so it must not call that).
    public var terminationHandler: (@Sendable (SpawnedProcess) -> Void)? {
        get { self[\.terminationHandler] }
        set { self[\.terminationHandler] = newValue }
    }

    /// The child's process id once launched (0 before).
    public var processIdentifier: Int32 {
        switch self[\.phase] {
        case .notStarted: 0
        case .running(let pid), .finished(let pid, _, _): pid
        }
    }

    /// True from a successful ``run()`` until the child has been reaped.
    public var isRunning: Bool {
        if case .running = self[\.phase] { return true }
        return false
    }

    /// The exit code, or the number of the signal that ended the child. Only once it has ended.
    public var terminationStatus: Int32 {
        guard case .finished(_, _, let status) = self[\.phase] else {
            preconditionFailure("terminationStatus of a process that has not finished")
        }
        return status
    }

    /// Whether the child exited or was ended by a signal. Only once it has ended.
    public var terminationReason: TerminationReason {
        guard case .finished(_, let reason, _) = self[\.phase] else {
            preconditionFailure("terminationReason of a process that has not finished")
        }
        return reason
    }

    /// Sends SIGTERM while the child runs. (The pid cannot have been reused: the child is only
    /// reaped while the lock is held, and then it no longer counts as running.)
    public func terminate() {
        state.withLock { state in
            if case .running(let pid) = state.phase { _ = kill(pid, SIGTERM) }
        }
    }

    /// Blocks until the child has ended and ``terminationHandler`` has run; at once if it never
    /// started.
    public func waitUntilExit() { running.wait() }

    /// Starts the child.
    /// - Throws: ``LaunchError`` when it cannot be started, or was started before.
    public func run() throws {
        let configuration = state.withLock { $0 }
        guard case .notStarted = configuration.phase else {
            throw LaunchError(description: "already started")
        }
        guard let executable = configuration.executableURL?.path else {
            throw LaunchError(description: "no executableURL")
        }

        #if canImport(Glibc)
            var actions = posix_spawn_file_actions_t()
            var attributes = posix_spawnattr_t()
        #else
            var actions: posix_spawn_file_actions_t?
            var attributes: posix_spawnattr_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        let handles = [
            configuration.standardInput, configuration.standardOutput, configuration.standardError,
        ]
        for (target, handle) in zip(Int32(0)...2, handles) {
            guard let descriptor = handle?.fileDescriptor else { continue }
            if descriptor < 0 {  // FileHandle.nullDevice has no descriptor
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_RDWR, 0)
            } else {
                posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            }
        }
        if let directory = configuration.currentDirectoryURL?.path {
            #if canImport(Glibc)
                guard let addchdir = Self.addchdir else { throw LaunchError(description: "no addchdir_np") }
                guard addchdir(&actions, directory) == 0 else {
                    throw LaunchError(description: "addchdir_np failed")
                }
            #else
                posix_spawn_file_actions_addchdir_np(&actions, directory)
            #endif
        }
        #if canImport(Glibc)
            guard let addclosefrom = Self.addclosefrom else {
                throw LaunchError(description: "no addclosefrom_np")
            }
            guard addclosefrom(&actions, 3) == 0 else {
                throw LaunchError(description: "addclosefrom_np failed")
            }
            let flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        #else
            let flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_CLOEXEC_DEFAULT)
        #endif
        var all = sigset_t()
        var none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var argv = ([executable] + configuration.arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let environment = configuration.environment.map { $0.map { "\($0.key)=\($0.value)" } }
        var envp = (environment ?? []).map { strdup($0) } + [nil]
        defer { for variable in envp { free(variable) } }

        running.enter()
        var pid: pid_t = 0
        let status =
            if environment == nil {
                posix_spawn(&pid, executable, &actions, &attributes, &argv, environ)
            } else {
                posix_spawn(&pid, executable, &actions, &attributes, &argv, &envp)
            }
        guard status == 0 else {
            running.leave()
            throw LaunchError(description: "cannot start \(executable): \(String(cString: strerror(status)))")
        }
        state.withLock { $0.phase = .running(pid) }
        let waiter = Thread { [self, pid] in waitForExit(pid) }
        waiter.name = "spawned-\(pid)"
        waiter.start()
    }

    /// The waiting thread: sees the child end without reaping it, then reaps it under the lock
    /// (see ``terminate()``), records how it ended and calls the handler.
    private func waitForExit(_ pid: pid_t) {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        let handler = state.withLock { state in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
            // WIFEXITED, WEXITSTATUS and WTERMSIG are macros Swift does not import.
            let signal = status & 0x7f
            state.phase =
                signal == 0
                ? .finished(pid: pid, reason: .exit, status: (status >> 8) & 0xff)
                : .finished(pid: pid, reason: .uncaughtSignal, status: signal)
            return state.terminationHandler
        }
        handler?(self)
        running.leave()
    }

    #if canImport(Glibc)
        /// glibc's `posix_spawn_file_actions_addchdir_np` (2.29) and `…_addclosefrom_np` (2.34),
        /// which Swift's Glibc module does not import (they need `_GNU_SOURCE`): looked up by name
        /// so they are called with the C calling convention.
        private typealias AddChdir =
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        private typealias AddClosefrom =
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        private static let addchdir = symbol("posix_spawn_file_actions_addchdir_np", as: AddChdir.self)
        private static let addclosefrom = symbol(
            "posix_spawn_file_actions_addclosefrom_np", as: AddClosefrom.self)

        private static func symbol<Function>(_ name: String, as type: Function.Type) -> Function? {
            guard let address = dlsym(dlopen(nil, RTLD_NOW), name) else { return nil }
            return unsafeBitCast(address, to: type)
        }
    #endif
}
