import Foundation

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
