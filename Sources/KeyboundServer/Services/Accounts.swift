import Foundation
import KeyboundWire

// Sign-up with a password, and the account rows every sign-up writes.

extension Application {
    /// `POST /v1/accounts`. A taken username answers 409 as the API contract says: a sign-up
    /// that pretended to succeed would hand back a user id that does not exist. What keeps the
    /// 409 from listing usernames is the price of asking: every attempt, free name or taken,
    /// counts against the address's sign-up limit and costs the same Argon2id hash first.
    func createAccount(_ context: RequestContext, _ body: RequestBody<CreateAccountRequest>) throws
        -> CreateAccountResponse
    {
        guard configuration.registration == .open else { throw APIError.registrationClosed }
        let request = try body.decode()
        try Validate.newPassword(request.password)
        try claimSignUp(context)
        let hash = try hasher.hash(request.password)
        return try database.write { connection in
            guard
                let userID = try insertAccount(
                    connection, username: request.username, passwordHash: hash, now: context.now)
            else { throw APIError.usernameTaken }
            try audit(
                connection, context, .accountCreated, userID: userID,
                details: [JSONMember("username", .string(request.username.rawValue))])
            return CreateAccountResponse(userID: userID)
        }
    }

    /// Inserts a new user in the current write transaction. An empty `passwordHash` is an account
    /// without a password (signed up with a passkey): no password matches it.
    /// - Parameter userID: the new user's id (a passkey sign-up chose it as its user handle).
    /// - Returns: the new user's id; nil, having written nothing, when the username is taken.
    func insertAccount(
        _ connection: any SQLConnection, id userID: String = SecureRandomBytes.identifier("usr"),
        username: Username, passwordHash: String, now: Date
    ) throws -> String? {
        guard
            try connection.queryOne("SELECT id FROM users WHERE username = ?", [.text(username.rawValue)])
                == nil
        else { return nil }
        try Rows.insertUser(
            connection, id: userID, username: username.rawValue, passwordHash: passwordHash, createdAt: now)
        return userID
    }
}
