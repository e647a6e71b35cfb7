import Foundation

/// A value behind a lock, shared between the load threads.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Monotonic nanoseconds.
func nanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Seconds since `start` (monotonic).
func seconds(since start: UInt64) -> Double { Double(nanoseconds() - start) / 1e9 }

/// One client of a load run. Each worker is driven by exactly one thread, so workers may keep
/// unsynchronised state (their connection, key, last token): hence `@unchecked Sendable`.
protocol LoadWorker: AnyObject, Sendable {
    /// One operation; `true` when the server answered as expected.
    func step() throws -> Bool
}

/// What a load run measured.
struct LoadResult {
    /// Operations that completed successfully inside the measured window.
    var completed = 0
    /// Operations that failed (error or unexpected status) inside the window.
    var failed = 0
    /// The measured window in seconds.
    var window = 0.0
    /// Latency of each successful operation, in nanoseconds, sorted.
    var latencies: [UInt64] = []
    /// The first failure's description, to explain failures.
    var firstError: String?
    /// CPU time the whole process (clients and server) spent inside the window, in seconds.
    var cpuSeconds = 0.0

    /// CPU microseconds per completed operation, clients and server together: steadier than the
    /// rate on a shared machine, where neighbours take cores but not instructions.
    var cpuPerOperation: Double { completed > 0 ? cpuSeconds / Double(completed) * 1e6 : 0 }

    var perSecond: Double { window > 0 ? Double(completed) / window : 0 }

    /// The latency at quantile `q` (0...1) in milliseconds, nearest rank.
    func percentile(_ q: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let rank = max(1, Int((q * Double(latencies.count)).rounded(.up)))
        return Double(latencies[min(rank, latencies.count) - 1]) / 1e6
    }
}

/// Runs every worker on its own thread for `warmup + duration` seconds. Only operations that
/// complete inside the last `duration` seconds count; no operation starts after the end, so a
/// run never takes longer than the bound plus one operation.
func runLoad(_ workers: [any LoadWorker], warmup: Double, duration: Double) -> LoadResult {
    let start = nanoseconds()
    let windowStart = start + UInt64(warmup * 1e9)
    let end = windowStart + UInt64(duration * 1e9)
    let total = Shared(LoadResult())
    let group = DispatchGroup()
    group.enter()
    let meter = Thread {
        sleep(until: windowStart)
        let before = processCPUSeconds()
        sleep(until: end)
        let used = processCPUSeconds() - before
        total.withLock { $0.cpuSeconds = used }
        group.leave()
    }
    meter.start()
    for worker in workers {
        group.enter()
        let thread = Thread {
            var mine = LoadResult()
            while true {
                let began = nanoseconds()
                if began >= end { break }
                var succeeded = false
                var failure: String?
                do {
                    succeeded = try worker.step()
                    if !succeeded { failure = "unexpected status" }
                } catch {
                    failure = "\(error)"
                }
                let finished = nanoseconds()
                guard finished >= windowStart, finished <= end else { continue }
                if succeeded {
                    mine.completed += 1
                    mine.latencies.append(finished - began)
                } else {
                    mine.failed += 1
                    if mine.firstError == nil { mine.firstError = failure }
                }
            }
            total.withLock { result in
                result.completed += mine.completed
                result.failed += mine.failed
                result.latencies += mine.latencies
                if result.firstError == nil { result.firstError = mine.firstError }
            }
            group.leave()
        }
        thread.start()
    }
    group.wait()
    var result = total.withLock { $0 }
    result.window = duration
    result.latencies.sort()
    return result
}

/// Sleeps until `deadline` (``nanoseconds()`` time).
private func sleep(until deadline: UInt64) {
    let now = nanoseconds()
    if deadline > now { usleep(useconds_t((deadline - now) / 1000)) }
}

#if os(Linux)
    private let RUSAGE_SELF_WHO = __rusage_who_t(RUSAGE_SELF.rawValue)
#else
    private let RUSAGE_SELF_WHO = RUSAGE_SELF
#endif

/// User and system CPU time of this process so far, in seconds.
private func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF_WHO, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Runs two loads in alternating rounds (a b, b a, …) and pools each side's rounds, so that
/// a slow spell of a shared machine hits both sides alike instead of deciding their ratio.
func alternate(
    _ first: [any LoadWorker], _ second: [any LoadWorker], rounds: Int, roundSeconds: Double, warmup: Double
) -> (LoadResult, LoadResult) {
    let results = alternate(
        [first, second], names: ["a", "b"], rounds: rounds, roundSeconds: roundSeconds, warmup: warmup)
    return (results[0], results[1])
}

/// Runs several loads in alternating rounds, each round starting with the next side (a b c,
/// b c a, …), and pools each side's rounds.
func alternate(
    _ sides: [[any LoadWorker]], names: [String], rounds: Int, roundSeconds: Double, warmup: Double
) -> [LoadResult] {
    var results = [LoadResult](repeating: LoadResult(), count: sides.count)
    for round in 0..<max(1, rounds) {
        // Neither side always goes first.
        for offset in sides.indices {
            let side = (round + offset) % sides.count
            let result = runLoad(sides[side], warmup: warmup, duration: roundSeconds)
            progress(
                "  round \(round + 1) \(names[side]): \(f(result.perSecond, 0))/s, "
                    + "p50 \(f(result.percentile(0.5), 2)) ms, p99 \(f(result.percentile(0.99), 2)) ms, "
                    + "CPU \(f(result.cpuPerOperation, 0)) us each")
            results[side].absorb(result)
        }
    }
    return results
}

extension LoadResult {
    /// Adds another run's operations and window to this one.
    mutating func absorb(_ other: LoadResult) {
        completed += other.completed
        failed += other.failed
        window += other.window
        cpuSeconds += other.cpuSeconds
        latencies = (latencies + other.latencies).sorted()
        if firstError == nil { firstError = other.firstError }
    }
}

/// Runs `body(index)` for `0..<count` on `threads` threads and returns the results in order.
func parallelMap<T: Sendable>(
    _ count: Int, threads: Int, _ body: @escaping @Sendable (Int) throws -> T
) throws -> [T] {
    let results = Shared([Result<T, any Error>?](repeating: nil, count: count))
    let next = Shared(0)
    let group = DispatchGroup()
    for _ in 0..<max(1, min(threads, count)) {
        group.enter()
        let thread = Thread {
            while true {
                let index = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < count else { break }
                let result = Result { try body(index) }
                results.withLock { $0[index] = result }
            }
            group.leave()
        }
        thread.start()
    }
    group.wait()
    return try results.withLock { $0 }.map { try $0!.get() }
}

/// The resident set size of this process in MiB (`VmRSS` of `/proc/self/status`), or nil where
/// there is no `/proc`.
func residentMiB() -> Double? {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let number = line.dropFirst("VmRSS:".count).trimmingCharacters(in: .whitespaces)
            .split(separator: " ").first
        return number.flatMap { Double($0) }.map { $0 / 1024 }
    }
    return nil
}

/// Samples ``residentMiB()`` every 10 ms on its own thread until stopped; keeps the peak.
final class ResidentSampler: @unchecked Sendable {
    private let state = Shared((running: true, peak: 0.0))
    private let done = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [state, done] in
            while state.withLock({ $0.running }) {
                let now = residentMiB() ?? 0
                state.withLock { $0.peak = max($0.peak, now) }
                usleep(10_000)
            }
            done.signal()
        }
        thread.start()
    }

    /// Stops sampling and returns the peak in MiB.
    func stop() -> Double {
        state.withLock { $0.running = false }
        done.wait()
        return state.withLock { $0.peak }
    }
}

/// Returns the free memory of the C heap to the system (glibc's `malloc_trim(0)`), looked up at
/// run time because Swift's Glibc module does not import `malloc.h`. Called once, before the
/// server starts, so that the seeding's freed heap does not count as the idle server's.
/// - Returns: whether glibc's `malloc_trim` was found.
@discardableResult
func trimHeap() -> Bool {
    #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return false }
        typealias MallocTrim = @convention(c) (Int) -> Int32
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
        return true
    #else
        return false
    #endif
}
