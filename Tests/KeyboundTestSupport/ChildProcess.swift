import Foundation

/// A child process set up the way every subprocess test needs it: standard input from a pipe
/// that is filled and closed before launch (the child reads the bytes, then end-of-file, and a
/// child that never reads cannot block or SIGPIPE us), standard output and error to files
/// (never pipes that could fill up and stall it). Start `process`, wait for it as suits the
/// caller, then ``output()``.
public final class ChildProcess: Sendable {
    /// The configured, not yet started process (not Foundation's `Process`: see ``SpawnedProcess``).
    public let process = SpawnedProcess()
    private let outURL: URL
    private let errURL: URL
    private let out: FileHandle
    private let err: FileHandle

    /// - Parameters:
    ///   - files: a folder of the caller's where `name.out` and `name.err` are written.
    ///   - environment: the full environment of the child (nil: inherit ours).
    public init(
        _ executable: URL, _ arguments: [String], input: Data = Data(), environment: [String: String]? = nil,
        workingDirectory: URL, files: URL, name: String
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        process.currentDirectoryURL = workingDirectory
        precondition(input.count <= 16_384, "standard input must fit in the pipe buffer")
        let standardInput = Pipe()
        try standardInput.fileHandleForWriting.write(contentsOf: input)
        try standardInput.fileHandleForWriting.close()
        process.standardInput = standardInput.fileHandleForReading
        outURL = files.appendingPathComponent("\(name).out")
        errURL = files.appendingPathComponent("\(name).err")
        try Data().write(to: outURL)
        try Data().write(to: errURL)
        out = try FileHandle(forWritingTo: outURL)
        err = try FileHandle(forWritingTo: errURL)
        process.standardOutput = out
        process.standardError = err
    }

    deinit {
        try? out.close()
        try? err.close()
    }

    /// True when the finished child ended by a signal (a crash), not by `exit`.
    public var crashed: Bool { process.terminationReason != .exit }

    /// What the finished child wrote.
    public func output() throws -> (stdout: Data, stderr: Data) {
        (try Data(contentsOf: outURL), try Data(contentsOf: errURL))
    }
}
