/// What a write transaction decides when it may refuse the request: `done`, with its value, or
/// `refused`, with the problem to answer once the transaction has committed what it wrote on the
/// way (a failure counted, a refusal audited, a challenge used up). An error thrown inside the
/// transaction instead rolls all of it back.
///
/// ```swift
/// let tokens = try database.write { connection -> WriteOutcome<TokenResponse> in
///     guard valid else {
///         try countFailure(connection, …)   // committed with the refusal
///         return .refused(.signatureInvalid)
///     }
///     return .done(try openSession(connection, …))
/// }.get()
/// ```
enum WriteOutcome<Value> {
    /// The write did what was asked.
    case done(Value)
    /// The write refused; what it wrote is committed all the same.
    case refused(APIError)

    /// The value, once the transaction has committed.
    /// - Throws: the refusal.
    func get() throws -> Value {
        switch self {
        case .done(let value): value
        case .refused(let error): throw error
        }
    }
}
