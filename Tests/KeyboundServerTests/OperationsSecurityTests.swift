import Foundation
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Operations security")
struct OperationsSecurityTests {
    // MARK: Database files

    @Test func databaseFilesAreReadableByTheOwnerOnly() throws {
        let live = try LiveServer()
        let path = live.directory.path("keybound.sqlite")
        // WAL mode: the -wal and -shm files exist while the server holds connections.
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try fileMode(file) == 0o600, "\(file)")
        }
        // Files an older version left world-readable are tightened when the server opens them.
        for file in [path, path + "-wal", path + "-shm"] { chmod(file, 0o644) }
        _ = try Application(configuration: live.server.configuration)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try fileMode(file) == 0o600, "\(file)")
        }
    }
}

/// The permission bits of a file.
private func fileMode(_ path: String) throws -> mode_t {
    var status = stat()
    guard stat(path, &status) == 0 else { throw TestFailure("cannot stat \(path)") }
    return status.st_mode & 0o777
}
