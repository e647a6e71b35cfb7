import Dispatch
import Foundation
import Testing

@testable import KeyboundServer

/// The handler pool starts threads only when a job finds every thread busy, never more than its
/// count, reuses idle ones, and on stop runs what was queued and nothing after.
struct HandlerThreadsTests {
    @Test func anIdlePoolHoldsNoThreadAndAnIdleThreadIsReused() throws {
        let pool = HandlerThreads(count: 8)
        defer { pool.stop() }
        #expect(pool.threads.started == 0)
        for round in 1...5 {
            let done = DispatchSemaphore(value: 0)
            pool.run { done.signal() }
            #expect(done.wait(timeout: .now() + 10) == .success, "round \(round): the job did not run")
            try waitUntil("every thread waits for the next job") {
                let threads = pool.threads
                return threads.idle == threads.started
            }
        }
        // Five jobs one after another: one thread ran them all.
        #expect(pool.threads.started == 1)
    }

    @Test func busyThreadsAddThreadsUpToTheCountThenJobsQueue() throws {
        let pool = HandlerThreads(count: 4)
        let release = DispatchSemaphore(value: 0)
        defer {
            // Whatever happened, no job stays blocked, so the pool can stop.
            for _ in 0..<10 { release.signal() }
            pool.stop()
        }
        let running = Locked(0)
        let ran = Locked(0)
        for _ in 0..<10 {
            pool.run {
                running.withLock { $0 += 1 }
                release.wait()
                ran.withLock { $0 += 1 }
            }
        }
        try waitUntil("four jobs run at once") { running.withLock { $0 } >= 4 }
        // The other six wait for one of the four threads.
        #expect(pool.threads.started == 4)
        #expect(running.withLock { $0 } == 4)
        for _ in 0..<10 { release.signal() }
        try waitUntil("every job ran") { ran.withLock { $0 } == 10 }
        #expect(pool.threads.started == 4)
    }

    @Test func stopRunsTheQueuedJobsAndNoLaterOne() throws {
        let pool = HandlerThreads(count: 2)
        let release = DispatchSemaphore(value: 0)
        let ran = Locked(0)
        for _ in 0..<6 {
            pool.run {
                release.wait()
                ran.withLock { $0 += 1 }
            }
        }
        // Released only after stop has begun (very likely): two jobs run, four are queued.
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) {
            for _ in 0..<6 { release.signal() }
        }
        pool.stop()
        #expect(ran.withLock { $0 } == 6)
        pool.run { ran.withLock { $0 += 1 } }
        pool.stop()
        #expect(ran.withLock { $0 } == 6)
        #expect(pool.threads.started == 2)
    }

    /// Polls `condition` every millisecond for up to 10 s.
    private func waitUntil(_ what: String, _ condition: () -> Bool) throws {
        for _ in 0..<10_000 {
            if condition() { return }
            usleep(1000)
        }
        throw TestFailure("timed out waiting until \(what)")
    }
}
