import Foundation

// keybound-bench: the performance targets of docs/design.md, measured in one run. See BenchOptions.usage.

let options: BenchOptions
do {
    options = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("keybound-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}
if options.help {
    print(BenchOptions.usage)
    exit(0)
}
if let profile = options.profile {
    do {
        try Profile.run(profile.operation, count: profile.count)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("keybound-bench: \(error)\n".utf8))
        exit(1)
    }
}
do {
    let report = try Benchmark(options: options).run()
    print(options.json ? report.json : report.text)
} catch {
    FileHandle.standardError.write(Data("keybound-bench: \(error)\n".utf8))
    exit(1)
}
