import Foundation
import Keybound

#if canImport(Glibc)
    import Glibc
    // The enum's own `read` and `write` hide the system calls of the same names.
    private let systemRead = Glibc.read
    private let systemWrite = Glibc.write
#elseif canImport(Darwin)
    import Darwin
    private let systemRead = Darwin.read
    private let systemWrite = Darwin.write
#endif

/// Files only their owner can read or write: an emulated device's state and the key that seals
/// it. Every file is created `0600` with `O_EXCL | O_NOFOLLOW` (never through a symbolic link,
/// never over a file someone else put there first), and is only read when it is a regular file
/// owned by the current user that neither the group nor others can access.
package enum OwnerOnlyFile {
    /// The file's bytes, after checking its owner and mode on the open descriptor (so the file
    /// checked is the file read).
    /// - Throws: ``KeyboundError/invalidInput`` saying what is wrong: missing, a symbolic link or
    ///   not a regular file, owned by another user, accessible to the group or others.
    package static func read(_ url: URL) throws -> Data {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot open", url) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure("cannot inspect", url) }
        guard status.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else {
            throw KeyboundError.invalidInput("\(url.path) is not a regular file")
        }
        guard status.st_uid == geteuid() else {
            throw KeyboundError.invalidInput(
                "\(url.path) belongs to user \(status.st_uid), not to you (\(geteuid())): it will not be used"
            )
        }
        guard status.st_mode & 0o077 == 0 else {
            throw KeyboundError.invalidInput(
                "\(url.path) can be read or written by others (mode \(String(status.st_mode & 0o777, radix: 8))): "
                    + "it will not be used; make it owner-only (chmod 600) or remove it")
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = systemRead(descriptor, &buffer, buffer.count)
            if count == 0 { return data }
            guard count > 0 else {
                if errno == EINTR { continue }
                throw failure("cannot read", url)
            }
            data.append(buffer, count: count)
        }
    }

    /// Creates `url` with `data`, owner-only, all at once: the bytes go to a new file beside it,
    /// synced, which is then linked in under its name (`link` fails when the name is taken, as
    /// `O_EXCL` does, and never follows a symbolic link). A crash at any moment leaves either
    /// no file at `url` or the whole of it, never a torn one that would be in the way for good.
    /// Fails when anything already exists at `url`.
    /// - Throws: ``KeyboundError/duplicateItem`` when the file exists; ``KeyboundError/invalidInput``
    ///   for any other failure.
    package static func create(_ data: Data, at url: URL) throws {
        let temporary = try writeTemporary(data, beside: url)
        defer { unlink(temporary.path) }
        guard link(temporary.path, url.path) == 0 else {
            if errno == EEXIST { throw KeyboundError(.duplicateItem, message: "\(url.path) already exists") }
            throw failure("cannot create", url)
        }
        try syncFolder(of: url)
    }

    /// Replaces `url` with `data` atomically: a new owner-only file beside it, written and
    /// synced, then renamed over it, and the folder synced so that the rename itself is durable.
    /// A crash at any moment leaves the previous file or the new one, whole. A symbolic link at
    /// `url` is replaced, never followed.
    package static func replace(_ data: Data, at url: URL) throws {
        let temporary = try writeTemporary(data, beside: url)
        guard rename(temporary.path, url.path) == 0 else {
            let error = failure("cannot replace", url)
            unlink(temporary.path)
            throw error
        }
        try syncFolder(of: url)
    }

    /// A new owner-only file beside `url` holding `data`, synced to the disk.
    private static func writeTemporary(_ data: Data, beside url: URL) throws -> URL {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        let descriptor = open(
            temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("cannot create", temporary) }
        do {
            try write(data, to: descriptor, temporary)
        } catch {
            close(descriptor)
            unlink(temporary.path)
            throw error
        }
        close(descriptor)
        return temporary
    }

    /// Syncs the folder that holds `url`: a name created or renamed there survives a power loss
    /// only once its folder has reached the disk.
    private static func syncFolder(of url: URL) throws {
        let folder = url.deletingLastPathComponent()
        let descriptor = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot open", folder) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync", folder) }
    }

    private static func write(_ data: Data, to descriptor: Int32, _ url: URL) throws {
        try data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = systemWrite(descriptor, base + offset, bytes.count - offset)
                guard written > 0 else {
                    if written < 0 && errno == EINTR { continue }
                    throw failure("cannot write", url)
                }
                offset += written
            }
        }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync", url) }
    }

    private static func failure(_ what: String, _ url: URL) -> KeyboundError {
        KeyboundError.invalidInput("\(what) \(url.path): \(String(cString: strerror(errno)))")
    }
}
