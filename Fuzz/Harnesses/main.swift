import CLibFuzzer
import Foundation

// keybound-fuzz: every harness in one binary; KEYBOUND_FUZZ_HARNESS names the one to run, so that
// libFuzzer's own arguments (flags, corpus directories, crash files to replay) pass through
// unchanged, and the processes it starts for -fork or -jobs inherit the choice.

if CommandLine.arguments.dropFirst().first == "--list" {
    for harness in Harness.all { print("\(harness.name)\t\(harness.covers)") }
    exit(0)
}
guard Harness.selected != nil else {
    let names = Harness.all.map(\.name).joined(separator: " ")
    FileHandle.standardError.write(
        Data(
            """
            usage: KEYBOUND_FUZZ_HARNESS=<name> keybound-fuzz [libFuzzer flags] [corpus directories or files]
                   keybound-fuzz --list
            harnesses: \(names)

            """.utf8))
    exit(2)
}

/// libFuzzer's callback. Exported under its conventional name as well: `-sanitize=fuzzer` links
/// libFuzzer's own main, which needs the symbol, though the main SwiftPM gives this program is
/// the one that runs.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    Harness.selected?.run(bytes.map { Data(bytes: $0, count: count) } ?? Data())
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput))
