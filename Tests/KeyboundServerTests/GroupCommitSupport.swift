import Foundation
import Testing

@testable import KeyboundServer

/// A database whose writes are committed in groups by a writer (both engines), for the tests
/// that form a group and count its commits.
protocol GroupCommittingDatabase: Database, Sendable {
    /// How many writes wait for a writer, and how many groups have committed.
    var writerQueue: (queued: Int, groupsCommitted: Int) { get }
}

extension SQLiteDatabase: GroupCommittingDatabase {}
extension PostgresDatabase: GroupCommittingDatabase {}

/// Holds a writer busy inside a write until ``letGo()``, so that the writes started meanwhile
/// queue up and are committed together as the next group (with one writer).
final class HeldWriter: Sendable {
    private let release = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(_ database: any GroupCommittingDatabase) {
        let holding = DispatchSemaphore(value: 0)
        Thread { [release, finished] in
            _ = try? database.write { _ in
                holding.signal()
                release.wait()
            }
            finished.signal()
        }.start()
        holding.wait()
    }

    func letGo() {
        release.signal()
        finished.wait()
    }
}

/// Starts `count` writes on their own threads; `body(index)` is each one's work. Returns once
/// all of them wait in the writer's queue, with what tells when they are done and whether each
/// succeeded.
func queueWrites(
    _ count: Int, on database: any GroupCommittingDatabase,
    _ body: @escaping @Sendable (Int, any SQLConnection) throws -> Void
) -> (DispatchGroup, Locked<[Int: Bool]>) {
    let group = DispatchGroup()
    let outcomes = Locked<[Int: Bool]>([:])
    for index in 0..<count {
        group.enter()
        Thread {
            let succeeded = (try? database.write { try body(index, $0) }) != nil
            outcomes.withLock { $0[index] = succeeded }
            group.leave()
        }.start()
    }
    // Bounded: 20 s at most, then the test fails here.
    for _ in 0..<2000 where database.writerQueue.queued < count { usleep(10_000) }
    #expect(database.writerQueue.queued == count)
    return (group, outcomes)
}

/// As ``queueWrites(_:on:_:)``, but keeps how each write ended: `"ok"`, or its error's
/// description (``DatabaseError``'s says which case and why).
func queueWritesKeepingErrors(
    _ count: Int, on database: any GroupCommittingDatabase,
    _ body: @escaping @Sendable (Int, any SQLConnection) throws -> Void
) -> (DispatchGroup, Locked<[Int: String]>) {
    let group = DispatchGroup()
    let outcomes = Locked<[Int: String]>([:])
    for index in 0..<count {
        group.enter()
        Thread {
            var outcome = "ok"
            do {
                try database.write { try body(index, $0) }
            } catch {
                outcome = String(describing: error)
            }
            outcomes.withLock { [outcome] in $0[index] = outcome }
            group.leave()
        }.start()
    }
    // Bounded: 20 s at most, then the test fails here.
    for _ in 0..<2000 where database.writerQueue.queued < count { usleep(10_000) }
    #expect(database.writerQueue.queued == count)
    return (group, outcomes)
}
