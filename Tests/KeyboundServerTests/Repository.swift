import Foundation

/// The files of this repository that the server compiles in or the tests compare with.
enum Repository {
    /// The repository's root (this file is Tests/KeyboundServerTests/Repository.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A file of the repository, from its path relative to the root.
    static func file(_ path: String) -> URL { root.appendingPathComponent(path) }
}
