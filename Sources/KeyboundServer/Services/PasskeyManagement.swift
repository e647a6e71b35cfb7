import Foundation
import KeyboundWire

extension Application {
    /// `GET /v1/passkeys`: the caller's passkeys, oldest first.
    func listPasskeys(_ context: RequestContext) throws -> PasskeyListResponse {
        let caller = try authenticate(context)
        let passkeys = try database.read { connection in
            try connection.query(
                PasskeyInfo.self,
                "SELECT \(PasskeyInfo.columns) FROM passkeys WHERE user_id = ? ORDER BY created_at, id",
                [.text(caller.userID)])
        }
        return PasskeyListResponse(passkeys: passkeys)
    }

    /// `DELETE /v1/passkeys/{id}`: removes one of the caller's passkeys and ends the sessions it
    /// opened. The last passkey of an account without a password stays: removing it would lock
    /// the user out.
    func removePasskey(_ context: RequestContext) throws -> NoBody {
        let passkeyID = context.parameter("id")
        try authenticatedWrite(context) { connection, caller in
            guard Grammar.isIdentifier(passkeyID),
                let row = try connection.queryOne(
                    "SELECT user_id FROM passkeys WHERE id = ?", [.text(passkeyID)]),
                try row.text(0) == caller.userID
            else { throw APIError.notFound }
            let hasPassword =
                try connection.queryOne(
                    "SELECT password_hash FROM users WHERE id = ?", [.text(caller.userID)])?
                .text(0).isEmpty == false
            if !hasPassword, try passkeyCredentialIDs(connection, userID: caller.userID).count <= 1 {
                throw APIError(
                    409, .lastPasskey, "This is the account's only way to sign in; add another passkey first."
                )
            }
            try deletePasskey(
                connection, context, passkeyID: passkeyID, userID: caller.userID, sessionID: caller.sessionID)
        }
        return NoBody()
    }

    /// Deletes a passkey, forgets its failures and ends the sessions it opened: its user's removal,
    /// or an administrator's on the console (`sessionID` is the remover's session, if the user's).
    func deletePasskey(
        _ connection: any SQLConnection, _ context: RequestContext, passkeyID: String, userID: String,
        sessionID: String?
    ) throws {
        try connection.execute("DELETE FROM passkeys WHERE id = ?", [.text(passkeyID)])
        try clearThrottle(connection, ThrottleScope.passkey(passkeyID))
        try revokeSessions(
            connection, where: "passkey_id = ?", [.text(passkeyID)], reason: "passkey_removed",
            now: context.now)
        try audit(
            connection, context, .passkeyRemoved, userID: userID, sessionID: sessionID,
            details: [JSONMember("passkey_id", .string(passkeyID))])
    }
}

extension PasskeyInfo: SQLRecord {
    static let columns = """
        id, credential_id, algorithm, attestation_format, attested, backup_eligible, backed_up, created_at,
            last_used_at
        """

    init(row: inout SQLRowReader) throws {
        self.init(
            passkeyID: try row.text(), credentialID: Base64URL.decode(try row.text()) ?? Data(),
            algorithm: Int(try row.integer()), attestationFormat: try row.text(), attested: try row.bool(),
            backupEligible: try row.bool(), backedUp: try row.bool(), createdAt: try row.date(),
            lastUsedAt: try row.optionalDate())
    }
}
