import Dispatch
import Foundation

/// The threads that run request handlers, apart from libmicrohttpd's own: a handler may wait (for
/// its group commit, mostly) while libmicrohttpd's threads go on serving every other connection.
/// A waiting handler holds a thread of this pool only; its connection is suspended meanwhile.
///
/// Threads start when they are needed, up to `count`: when a job arrives and every thread so far
/// is busy. A started thread stays until ``stop()``. So an idle server holds none (the test suite
/// runs a few hundred servers at once; with every pool started whole it held 13,000 threads).
///
/// `@unchecked Sendable` is safe because every stored property is either immutable or reached
/// only while `condition` is locked.
final class HandlerThreads: @unchecked Sendable {
    private let condition = NSCondition()
    /// Jobs in order, not yet taken by a thread.
    private var jobs: [@Sendable () -> Void] = []
    /// Threads waiting for a job.
    private var idle = 0
    private var started = 0
    private var stopping = false
    private let finished = DispatchGroup()
    private let count: Int

    init(count: Int) {
        self.count = max(1, count)
    }

    /// Runs `job` on a free thread: an idle one, or a new one while fewer than `count` run; once
    /// all are busy, on the first that finishes its job. Jobs handed over after ``stop()`` do
    /// not run.
    func run(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        guard !stopping else {
            condition.unlock()
            return
        }
        jobs.append(job)
        // An idle thread takes one job each; a job no idle thread will take needs a new thread.
        let startsThread = jobs.count > idle && started < count
        if startsThread {
            started += 1
            finished.enter()
        }
        condition.signal()
        let index = started - 1
        condition.unlock()
        if startsThread {
            let thread = Thread { [self] in work() }
            thread.name = "keybound-handler-\(index)"
            thread.start()
        }
    }

    private func work() {
        condition.lock()
        while true {
            if !jobs.isEmpty {
                let job = jobs.removeFirst()
                condition.unlock()
                job()
                condition.lock()
            } else if stopping {
                break
            } else {
                idle += 1
                condition.wait()
                idle -= 1
            }
        }
        condition.unlock()
        finished.leave()
    }

    /// How many threads have started, and how many of them wait for a job (for tests).
    var threads: (started: Int, idle: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (started, idle)
    }

    /// Lets the jobs already queued run, then ends the threads. Safe to call more than once.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
        finished.wait()
    }
}
