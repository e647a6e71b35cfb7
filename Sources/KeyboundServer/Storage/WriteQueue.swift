import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// What the group-committing writers of both engines share (``SQLiteWriter``, ``PostgresWriter``):
// a request's work as the writer's thread runs it, and where the request waits for its group.

/// One request's write work, waiting for a writer.
final class WriteRequest<Connection> {
    /// The work; dropped (set to nil) when the request completes, so nothing it captured
    /// outlives the request's wait (``submitWrite(_:to:)`` lends it a non-escaping closure).
    private var work: ((Connection) -> (any Error)?)?
    /// Called once, on the writer's thread, after the group's COMMIT: nil when this request's
    /// work is durable, otherwise the error that undid it (its own, or the group's).
    private let completion: ((any Error)?) -> Void
    /// When the request was queued (`DispatchTime` nanoseconds).
    let queuedAt = DispatchTime.now().uptimeNanoseconds

    /// - Parameters:
    ///   - work: runs the request's statements; returns the error that it threw, or nil.
    ///   - completion: receives the outcome once the group has committed or failed.
    init(work: @escaping (Connection) -> (any Error)?, completion: @escaping ((any Error)?) -> Void) {
        self.work = work
        self.completion = completion
    }

    /// Runs the work (again, when PostgreSQL rolled its group back for a serialization failure).
    /// - Returns: the error that the work threw, or nil.
    func run(on connection: Connection) -> (any Error)? {
        guard let work else { return DatabaseError.engine(code: 0, message: "write work ran after its end") }
        return work(connection)
    }

    /// Hands the outcome to the waiting request, once.
    func complete(_ outcome: (any Error)?) {
        work = nil
        completion(outcome)
    }
}

/// Queues `body` with `submit` and waits until the writer completed it: its value once its group
/// has committed, else the error that undid it.
func submitWrite<Connection: SQLConnection, T>(
    _ body: (any SQLConnection) throws -> T, to submit: (WriteRequest<Connection>) -> Void
) throws -> T {
    try withoutActuallyEscaping(body) { body in
        let waiter = WriteWaiter<T>()
        submit(
            WriteRequest(
                work: { connection in
                    do {
                        waiter.value = try body(connection)
                        return nil
                    } catch {
                        return error
                    }
                },
                completion: { waiter.finish($0) }))
        return try waiter.wait()
    }
}

/// Where a request waits for its group's COMMIT.
private final class WriteWaiter<T> {
    /// Set by the work on the writer's thread; read only after ``wait()`` returned.
    var value: T?
    private var failure: (any Error)?
    private let done = DispatchSemaphore(value: 0)

    /// Called once by the writer: nil when the work is durable, else why it is not.
    func finish(_ failure: (any Error)?) {
        self.failure = failure
        done.signal()
    }

    /// Waits for ``finish(_:)``; the semaphore orders the writer's stores before these reads.
    func wait() throws -> T {
        done.wait()
        if let failure { throw failure }
        guard let value else {
            throw DatabaseError.engine(code: 0, message: "a write finished without a result")
        }
        return value
    }
}

/// The queue of a group-committing writer (``SQLiteWriter``, ``PostgresWriter``): requests wait
/// in it, and the writer threads take them in groups until it is stopped and drained.
///
/// `@unchecked Sendable` is safe because every member is touched only under `condition`.
final class PendingWrites<Connection>: @unchecked Sendable {
    private let condition = NSCondition()
    private var pending: [WriteRequest<Connection>] = []
    private var stopping = false
    private var writerThreads: [pthread_t] = []
    private var committedGroups = 0

    /// Queues a request; a writer runs it in its next group.
    func submit(_ request: WriteRequest<Connection>) {
        condition.lock()
        pending.append(request)
        condition.signal()
        condition.unlock()
    }

    /// How many requests wait for a writer.
    var queued: Int {
        condition.lock()
        defer { condition.unlock() }
        return pending.count
    }

    /// How many groups have committed so far.
    var groupsCommitted: Int {
        condition.lock()
        defer { condition.unlock() }
        return committedGroups
    }

    /// Counts a group's COMMIT.
    func groupCommitted() {
        condition.lock()
        committedGroups += 1
        condition.unlock()
    }

    /// Registers the calling thread as a writer (see ``isWriterThread``).
    func joinAsWriter() {
        condition.lock()
        writerThreads.append(pthread_self())
        condition.unlock()
    }

    /// Whether the caller is a writer's thread (work must never wait for a writer).
    var isWriterThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return writerThreads.contains { pthread_equal($0, pthread_self()) != 0 }
    }

    /// Waits for requests and takes those queued, up to `limit`; nil once stopped and drained.
    func nextGroup(limit: Int = .max) -> [WriteRequest<Connection>]? {
        condition.lock()
        defer { condition.unlock() }
        while pending.isEmpty && !stopping { condition.wait() }
        guard !pending.isEmpty else { return nil }
        let count = min(pending.count, limit)
        defer {
            pending.removeFirst(count)
            // More are queued: another writer may take them meanwhile.
            if !pending.isEmpty { condition.signal() }
        }
        return Array(pending.prefix(count))
    }

    /// Lets the writers drain the queue, then ``nextGroup(limit:)`` answers nil.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }
}
