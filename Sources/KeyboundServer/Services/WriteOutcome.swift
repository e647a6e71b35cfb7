/// What a write transaction decides when it may refuse the request: `done`, with its value, or
/// a refusal, the error to answer with once the transaction has committed what it wrote on the
/// way (a failure counted, a refusal audited, a challenge used up, a leaked code's session
/// ended). An error thrown inside the transaction instead rolls all of it back.
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
    /// The write refused with this error (an ``APIError`` or, at the OAuth endpoints, an
    /// ``OAuthError``); what it wrote is committed all the same.
    case refusal(any Error)

    /// Refuses with a problem of the API.
    static func refused(_ error: APIError) -> WriteOutcome { .refusal(error) }
    /// Refuses with an OAuth error.
    static func refused(_ error: OAuthError) -> WriteOutcome { .refusal(error) }

    /// The value, once the transaction has committed.
    /// - Throws: the refusal.
    func get() throws -> Value {
        switch self {
        case .done(let value): value
        case .refusal(let error): throw error
        }
    }
}
