import Foundation
import KeyboundWire

extension Application {
    /// `POST /v1/sessions/password`, throttled on three scopes (docs/server.md, "Throttling"):
    /// the pair (account, client address) blocks after ``Configuration/accountFailureLimit``
    /// consecutive failures; the client address after ``Configuration/addressFailureLimit``
    /// failures of any kind; and from ``Configuration/accountFailureCeiling`` consecutive
    /// failures on the account from everywhere, every address that has itself failed on the
    /// account waits too. An address that has not failed on the account is never held back by
    /// the others: wrong passwords from one address cannot lock the owner out at another.
    func passwordLogin(_ context: RequestContext, _ body: RequestBody<PasswordLoginRequest>) throws
        -> TokenResponse
    {
        let request = try body.decode()
        let username = request.username.rawValue
        try Validate.loginPassword(request.password)
        // Before anything else: a proof without the server's nonce is sent again with it.
        let proof = try loginProof(context)
        let scopes = PasswordScopes(
            pair: ThrottleScope.accountAddress(username, context.clientAddress),
            account: ThrottleScope.account(username),
            address: configuration.addressFailureLimit > 0
                ? ThrottleScope.address(context.clientAddress) : nil)

        // Step 1: blocked? Answer 429 from a read, without looking at the password and without
        // writing anything: refused requests cost no commit and add no audit rows (the block itself
        // was audited when it started; metrics count the rest).
        let (user, blockedUntil) = try database.read { connection in
            let user = try connection.queryOne(
                "SELECT id, password_hash FROM users WHERE username = ?", [.text(username)]
            ).map { (id: try $0.text(0), hash: try $0.text(1)) }
            return (user, try passwordBlockEnd(connection, scopes, now: context.now))
        }
        if let blockedUntil { throw refuseThrottled(method: .password, context, blockedUntil: blockedUntil) }

        // Step 2: claim the attempt before the hash runs. One write transaction checks the blocks
        // again and counts the attempt as a failure on every scope, so of any number of requests
        // in flight at once no more than the limits get to the hash; the rest see the block.
        let claim: Claim
        do {
            claim = try database.write { try claimAttempt($0, scopes, now: context.now) }
        } catch let blocked as Blocked {
            throw refuseThrottled(method: .password, context, blockedUntil: blocked.until)
        }

        // Step 3: Argon2id, outside any transaction. Unknown users cost the same hash.
        let valid = hasher.verify(request.password, against: user?.hash)

        // Step 4: answer. A failure is already counted; the 401 body is the same for both failures.
        guard valid, let user else {
            try database.write { connection in
                try auditRefusal(connection, context, .loginFailed, method: .password, userID: user?.id)
                // Audited when a block starts, by the attempt whose failure started it.
                if claim.pair.startedBlock {
                    try auditRefusal(connection, context, .lockout, method: .password, userID: user?.id)
                }
                if claim.account.startedBlock {
                    try auditRefusal(
                        connection, context, .accountCeiling, method: .password, userID: user?.id)
                }
                if claim.address?.startedBlock == true {
                    try auditRefusal(connection, context, .addressLockout, method: .password)
                }
            }
            metrics.recordLogin(method: AuthMethod.password.rawValue, outcome: "failure")
            traffic.count(.failure(AuthMethod.password.rawValue), at: context.now)
            throw APIError.invalidCredentials
        }
        return try database.write { connection in
            // The right password: the account's counts start over, and the attempt claimed on the
            // client address was no failure after all.
            try clearThrottle(connection, scopes.pair)
            try clearThrottle(connection, scopes.account)
            if let address = claim.address { try withdraw(connection, address) }
            return try openSession(
                connection, context, userID: user.id, clientID: request.clientID.rawValue, method: .password,
                deviceID: nil, proof: proof)
        }
    }

    /// The throttle rows one password login counts on.
    private struct PasswordScopes {
        let pair: String
        let account: String
        /// nil when the address limit is off.
        let address: String?
    }

    /// An attempt counted, before its password is checked, as a failure on every scope.
    private struct Claim {
        let pair: ThrottleCount
        let account: ThrottleCount
        let address: ThrottleCount?
    }

    /// When the attempt's pair or address is blocked, or the account is past its ceiling and
    /// this address has failed on it: the latest end of those blocks. Otherwise nil.
    private func passwordBlockEnd(_ connection: any SQLConnection, _ scopes: PasswordScopes, now: Date)
        throws -> Date?
    {
        let pair = try throttleRow(connection, scopes.pair)
        var ends = [pair?.blockedUntil ?? ThrottleRow.unblocked]
        if let address = scopes.address {
            ends.append(try throttleRow(connection, address)?.blockedUntil ?? ThrottleRow.unblocked)
        }
        if let pair, pair.failures > 0 {
            ends.append(try throttleRow(connection, scopes.account)?.blockedUntil ?? ThrottleRow.unblocked)
        }
        guard let latest = ends.max(), latest > now else { return nil }
        return latest
    }

    /// Claims an attempt in the current write transaction: checks the blocks and counts the
    /// attempt as a failure on every scope.
    /// - Throws: ``Blocked`` when the attempt is blocked (nothing is written then).
    private func claimAttempt(_ connection: any SQLConnection, _ scopes: PasswordScopes, now: Date) throws
        -> Claim
    {
        if let blockedUntil = try passwordBlockEnd(connection, scopes, now: now) {
            throw Blocked(until: blockedUntil)
        }
        return Claim(
            pair: try countFailure(
                connection, scope: scopes.pair, limit: configuration.accountFailureLimit, window: nil,
                now: now),
            account: try countFailure(
                connection, scope: scopes.account, limit: configuration.accountFailureCeiling, window: nil,
                now: now),
            address: try scopes.address.map {
                try countFailure(
                    connection, scope: $0, limit: configuration.addressFailureLimit,
                    window: Self.addressFailureWindow, now: now)
            })
    }
}
