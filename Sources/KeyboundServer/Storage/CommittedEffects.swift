/// What a write transaction reports about itself (a login counted in ``Metrics``, an audit
/// event's log line) is held until the transaction has committed, and dropped when it does not.
///
/// A request's work inside a SQLite group commit can still be undone after it returned (the
/// group's COMMIT fails), and PostgreSQL runs a write again after a serialization failure
/// (40001, ``PostgresDatabase``): reported at once, a login would be counted, or an audit line
/// logged, for a session that was never opened, or twice for one that was.
enum AfterCommit {
    /// The effects of the running attempt of a write transaction; nil outside a write.
    @TaskLocal fileprivate static var held: Locked<[@Sendable () -> Void]>?

    /// Runs `effect` once the running write transaction has committed, or now outside a write.
    static func run(_ effect: @escaping @Sendable () -> Void) {
        if let held {
            held.withLock { $0.append(effect) }
        } else {
            effect()
        }
    }
}

/// The application's storage: the engine's, with ``AfterCommit`` effects run only after a
/// write's commit. Each attempt of a write starts with none: the effects of an attempt that
/// was rolled back and run again are dropped, so a retried login counts and logs once, and one
/// that never committed (its group commit failed, its body threw) not at all. A write of a
/// request with an `Idempotency-Key` keeps the request's answer in its transaction
/// (``IdempotentRequest/write(_:_:)``).
struct CommittedEffects: DatabaseWrapper {
    let base: any Database

    @discardableResult
    func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        let held = Locked<[@Sendable () -> Void]>([])
        // Read here: the body may run on another thread (SQLite's writer).
        let request = IdempotentRequest.current
        let result = try base.write { connection in
            // A new attempt: whatever an earlier one held was rolled back with it.
            held.withLock { $0.removeAll() }
            return try AfterCommit.$held.withValue(held) {
                guard let request else { return try body(connection) }
                return try request.write(connection, body)
            }
        }
        for effect in held.withLock({ $0 }) { effect() }
        return result
    }
}
