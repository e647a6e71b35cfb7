import Foundation

/// The `keybound` executable under test: the one SwiftPM built beside the test bundle.
///
/// Each test target that uses it depends on the `keybound` target, so SwiftPM
/// builds the executable first, into the same build-products folder as the test bundle. We
/// search upward from the test process's own bundle and path for a sibling `keybound`, so no
/// source path is baked in. `KEYBOUND_CLI_BINARY` overrides the search.
public enum KeyboundExecutable {
    /// The executable is in none of the places searched.
    public struct NotFound: Error, CustomStringConvertible {
        /// Every path that was tried, in order.
        public let searched: [String]
        /// What to do, then every path searched.
        public var description: String {
            "the keybound executable was not found next to the test bundle. Build it with "
                + "`swift build --product keybound`, or set KEYBOUND_CLI_BINARY. Searched:\n  "
                + searched.joined(separator: "\n  ")
        }
    }

    /// The outcome of the search, made once per test process.
    public static let located: Result<URL, NotFound> = locate()

    /// The executable, or a clear error saying where it was looked for.
    public static func url() throws -> URL { try located.get() }

    private static func locate() -> Result<URL, NotFound> {
        if let explicit = ProcessInfo.processInfo.environment["KEYBOUND_CLI_BINARY"] {
            let url = URL(fileURLWithPath: explicit)
            return isExecutable(url) ? .success(url) : .failure(NotFound(searched: [explicit]))
        }
        var starts = [Bundle.main.bundleURL]
        starts += Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" }
        if let first = CommandLine.arguments.first {
            starts.append(URL(fileURLWithPath: first).deletingLastPathComponent())
        }
        var searched: [String] = []
        for start in starts {
            var directory = start.standardizedFileURL.resolvingSymlinksInPath()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("keybound")
                if !searched.contains(candidate.path) {
                    searched.append(candidate.path)
                    if isExecutable(candidate) { return .success(candidate) }
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        return .failure(NotFound(searched: searched))
    }

    /// A regular executable file (not, say, the `Sources/keybound` folder).
    private static func isExecutable(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            && !isDirectory.boolValue && FileManager.default.isExecutableFile(atPath: url.path)
    }
}
