import Foundation
import KeyboundWire

// Client-Initiated Backchannel Authentication (OpenID CIBA Core 1.0, poll and ping modes) with
// Rich Authorization Requests (RFC 9396), docs/approvals.md: a confidential client asks for the
// approval of one transfer on the user's bound device, and fetches, once, tokens that carry the
// approved `authorization_details` and the approval's receipt.

/// The grant type of CIBA's token requests (CIBA Core §10.1).
enum CIBAGrant {
    static let type = "urn:openid:params:grant-type:ciba"
    /// A decided request can be redeemed until it expires, or this many seconds after its
    /// decision when that is later: a user who approves in the last second leaves the client time
    /// to poll once more.
    static let redemptionGrace = 60
    /// How much `slow_down` adds to a request's interval (CIBA Core §11: at least 5 s).
    static let slowDownStep = 5
    /// The longest `binding_message`, in characters (docs/approvals.md).
    static let longestBindingMessage = 64
    /// The bidirectional formatting characters (Unicode UAX #9): marks, embeddings, overrides
    /// and isolates.
    static let bidirectionalControls: Set<UInt32> = [
        0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
    ]
    /// The longest `client_notification_token` (CIBA Core §7.1 sets none; a bearer token is short).
    static let longestNotificationToken = 1024
}

extension TransferAuthorizationDetails {
    /// The `authorization_details` parameter of a CIBA request, read strictly.
    /// - Throws: ``OAuthError`` `invalid_authorization_details` (RFC 9396 §5) saying what is wrong.
    static func action(parameter text: String) throws -> ApprovalAction {
        do {
            return try action(from: try JSON.parse(Data(text.utf8)))
        } catch {
            throw OAuthError(
                status: 400, error: "invalid_authorization_details",
                description: error.detail)
        }
    }
}

/// What a backchannel authentication request asks for, checked (CIBA Core §7.1).
private struct BackchannelRequest {
    let username: String
    let scopes: [String]
    let bindingMessage: String?
    let action: ApprovalAction
    let lifetime: Int
    let notificationToken: String?

    init(_ parameters: OAuthParameters, client: OAuthClient, longestLifetime: Int) throws {
        for unsupported in ["login_hint_token", "id_token_hint", "user_code", "request", "request_uri"]
        where parameters[unsupported] != nil {
            throw OAuthError.invalidRequest("\(unsupported) is not supported: name the user with login_hint")
        }
        var scopes: [String] = []
        for scope in (parameters["scope"] ?? "").split(separator: " ").map(String.init)
        where !scopes.contains(scope) {
            guard OAuthClient.standardScopes.contains(scope) || client.extraScopes.contains(scope) else {
                throw OAuthError.invalidScope("the client may not ask for \(scope)")
            }
            scopes.append(scope)
        }
        guard scopes.contains("openid") else {
            throw OAuthError.invalidScope("a CIBA request's scope must contain openid (CIBA Core §7.1)")
        }
        guard let username = parameters["login_hint"] else {
            throw OAuthError.invalidRequest("login_hint (the username) is missing")
        }
        if let message = parameters["binding_message"] {
            // No control characters, and none that reorder what is shown around them (a
            // right-to-left override could make the message seem to say something else).
            guard message.count <= CIBAGrant.longestBindingMessage,
                !message.unicodeScalars.contains(where: {
                    $0.properties.generalCategory == .control
                        || CIBAGrant.bidirectionalControls.contains($0.value)
                })
            else {
                throw OAuthError(
                    status: 400, error: "invalid_binding_message",
                    description:
                        "binding_message is at most \(CIBAGrant.longestBindingMessage) characters, without control or bidirectional formatting characters"
                )
            }
        }
        guard let details = parameters["authorization_details"] else {
            throw OAuthError.invalidRequest(
                "authorization_details is missing: name the \(TransferAuthorizationDetails.type) to approve")
        }
        var lifetime = longestLifetime
        if let requested = parameters["requested_expiry"] {
            guard let seconds = Int(requested), requested.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                (1...300).contains(seconds)
            else {
                throw OAuthError.invalidRequest("requested_expiry is a whole number of seconds, 1 to 300")
            }
            lifetime = min(lifetime, seconds)
        }
        let token = parameters["client_notification_token"]
        if client.ciba == .ping {
            guard let token else {
                throw OAuthError.invalidRequest("client_notification_token is missing: this client is pinged")
            }
            guard token.utf8.count <= CIBAGrant.longestNotificationToken,
                token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else {
                throw OAuthError.invalidRequest(
                    "client_notification_token is 1-\(CIBAGrant.longestNotificationToken) visible ASCII characters"
                )
            }
        }
        self.username = username
        self.scopes = scopes
        bindingMessage = parameters["binding_message"]
        action = try TransferAuthorizationDetails.action(parameter: details)
        self.lifetime = lifetime
        notificationToken = client.ciba == .ping ? token : nil
    }
}

/// A CIBA request and its approval, as the token endpoint reads them.
private struct CIBARecord {
    let clientID: String
    let scope: String
    let pollInterval: Int
    let polledAt: Date?
    let redeemedAt: Date?
    let approvalID: String
    let userID: String
    let deviceID: String
    let status: ApprovalStatus
    let action: ApprovalAction
    let expiresAt: Date
    let decidedAt: Date?
    let receipt: String?

    /// Until when its tokens may be fetched, once decided.
    var redeemableUntil: Date {
        max(expiresAt, (decidedAt ?? expiresAt).adding(seconds: CIBAGrant.redemptionGrace))
    }
}

extension CIBARecord: SQLRecord {
    static let columns = """
        r.client_id, r.scope, r.poll_interval, r.polled_at, r.redeemed_at, a.id, a.user_id, a.device_id,
            a.status, a.action, a.expires_at, a.decided_at, a.receipt
        """

    init(row: inout SQLRowReader) throws {
        self.init(
            clientID: try row.text(), scope: try row.text(), pollInterval: Int(try row.integer()),
            polledAt: try row.optionalDate(), redeemedAt: try row.optionalDate(), approvalID: try row.text(),
            userID: try row.text(), deviceID: try row.text(),
            status: ApprovalStatus(rawValue: try row.text()) ?? .failed,
            action: try ApprovalAction(json: JSON.parse(Data(try row.text().utf8))),
            expiresAt: try row.date(),
            decidedAt: try row.optionalDate(), receipt: try row.optionalText())
    }
}

extension OAuthError {
    /// The CIBA token errors (CIBA Core §11).
    fileprivate static func ciba(_ error: String, _ description: String) -> OAuthError {
        OAuthError(status: 400, error: error, description: description)
    }
}

extension Application {
    /// `POST /oauth/bc-authorize` (CIBA Core §7): a confidential client registered with `--ciba`
    /// asks the user named by `login_hint` to approve one `keybound_transfer`. The approval goes
    /// to the user's most recently bound device, with the same signing payload as a /v1 approval.
    /// - Returns: 200 `{auth_req_id, expires_in, interval}`.
    func backchannelAuthentication(_ context: RequestContext) throws -> HTTPResponse {
        guard configuration.issuer != nil else { throw APIError.notFound }
        let parameters = try OAuthParameters(body: context.request)
        let client = try authenticateClient(parameters, context)
        guard client.isConfidential, client.ciba != nil else {
            throw OAuthError.unauthorizedClient(
                "this client is not registered for CIBA (keybound client add --ciba)")
        }
        let request = try BackchannelRequest(
            parameters, client: client, longestLifetime: configuration.approvalLifetime)
        let authReqID = SecureRandomBytes.token()
        return try database.write { connection in
            guard
                let userID = try connection.queryOne(
                    "SELECT id FROM users WHERE username = ?", [.text(request.username)])?.text(0)
            else { throw OAuthError.ciba("unknown_user_id", "no user has this login_hint") }
            guard let device = try newestDevice(connection, userID: userID), checkUsable(device) == nil else {
                // CIBA Core §13: access_denied is 403 at this endpoint (400 at the token endpoint).
                throw OAuthError(
                    status: 403, error: "access_denied",
                    description: "the user has no bound device that can approve")
            }
            let approval = try insertApproval(
                connection, context, userID: userID, device: device, action: request.action,
                lifetime: request.lifetime, client: client, bindingMessage: request.bindingMessage)
            try connection.execute(
                """
                INSERT INTO ciba_requests (hash, approval_id, client_id, scope, authorization_details, poll_interval,
                    polled_at, redeem_until, redeemed_at, session_id)
                VALUES (?, ?, ?, ?, ?, ?, NULL, ?, NULL, NULL)
                """,
                [
                    .text(TokenHash.of(authReqID)), .text(approval.id), .text(client.id),
                    .text(request.scopes.joined(separator: " ")),
                    .text(
                        String(
                            decoding: JSON.serialize(TransferAuthorizationDetails.json(request.action)),
                            as: UTF8.self)),
                    .integer(Int64(configuration.cibaInterval)),
                    .date(approval.expiresAt.adding(seconds: CIBAGrant.redemptionGrace)),
                ])
            if let token = request.notificationToken, let url = client.notificationEndpoint {
                try connection.execute(
                    """
                    INSERT INTO ciba_pings (approval_id, url, token, auth_req_id, status, attempts, give_up_at,
                        next_attempt_at, lease_owner, lease_until, delivered_at, last_result)
                    VALUES (?, ?, ?, ?, ?, 0, ?, ?, NULL, NULL, NULL, NULL)
                    """,
                    [
                        .text(approval.id), .text(url), .text(token), .text(authReqID),
                        .text(CIBAPingStatus.waiting.rawValue),
                        .date(approval.expiresAt.adding(seconds: CIBAGrant.redemptionGrace)),
                        .date(approval.expiresAt),
                    ])
            }
            return .oauthJSON(
                200,
                .object([
                    JSONMember("auth_req_id", .string(authReqID)),
                    JSONMember("expires_in", .integer(request.lifetime)),
                    JSONMember("interval", .integer(configuration.cibaInterval)),
                ]))
        }
    }

    /// The user's most recently bound device that is not revoked.
    private func newestDevice(_ connection: any SQLConnection, userID: String) throws -> DeviceRecord? {
        try connection.queryOne(
            DeviceRecord.self,
            """
            SELECT \(DeviceRecord.columns)
            FROM devices d LEFT JOIN app_attest_keys k ON k.device_id = d.id
            WHERE d.user_id = ? AND d.revoked_at IS NULL ORDER BY d.created_at DESC, d.id DESC LIMIT 1
            """, [.text(userID)])
    }

    /// The CIBA grant (CIBA Core §10.1): `authorization_pending` while the user has not decided
    /// (`slow_down` when polled sooner than the request's interval, which then grows);
    /// `access_denied` once denied or failed; `expired_token` past its expiry; once approved, the
    /// tokens, a single time, with the approved `authorization_details` and the receipt.
    func redeemBackchannelRequest(
        _ parameters: OAuthParameters, client: OAuthClient, proof: DPoPProof?, _ context: RequestContext
    ) throws -> OAuthGrant {
        guard client.ciba != nil else {
            throw OAuthError.unauthorizedClient(
                "this client is not registered for CIBA (keybound client add --ciba)")
        }
        guard let authReqID = parameters["auth_req_id"], (16...128).contains(authReqID.utf8.count) else {
            throw OAuthError.invalidRequest("auth_req_id is missing")
        }
        let hash = TokenHash.of(authReqID)
        let query = """
            SELECT \(CIBARecord.columns) FROM ciba_requests r JOIN approvals a ON a.id = r.approval_id
            WHERE r.hash = ?
            """
        // Another client's, or one never issued, is refused from a read: made-up ids cost no write.
        guard let first = try database.read({ try $0.queryOne(CIBARecord.self, query, [.text(hash)]) }),
            first.clientID == client.id
        else { throw OAuthError.invalidGrant("unknown auth_req_id") }
        let now = context.now
        return try database.write { connection -> WriteOutcome<OAuthGrant> in
            guard let row = try connection.queryOne(CIBARecord.self, query, [.text(hash)]) else {
                return .refused(OAuthError.invalidGrant("unknown auth_req_id"))
            }
            guard row.redeemedAt == nil else {
                return .refused(OAuthError.invalidGrant("the tokens of this request were issued before"))
            }
            switch row.status {
            case .pending where now >= row.expiresAt, .expired:
                return .refused(.ciba("expired_token", "the request expired before the user decided"))
            case .pending:
                let early = row.polledAt.map { now < $0.adding(seconds: row.pollInterval) } ?? false
                try connection.execute(
                    "UPDATE ciba_requests SET polled_at = ?, poll_interval = ? WHERE hash = ?",
                    [
                        .date(now), .integer(Int64(row.pollInterval + (early ? CIBAGrant.slowDownStep : 0))),
                        .text(hash),
                    ])
                return .refused(
                    early
                        ? .ciba(
                            "slow_down",
                            "polled sooner than the interval: wait \(row.pollInterval + CIBAGrant.slowDownStep) s"
                        )
                        : .ciba("authorization_pending", "the user has not decided yet"))
            case .denied, .failed:
                return .refused(
                    .ciba("access_denied", "the user did not approve (status \(row.status.rawValue))"))
            case .approved:
                guard now < row.redeemableUntil, let decidedAt = row.decidedAt else {
                    return .refused(
                        .ciba("expired_token", "the request expired before its tokens were fetched"))
                }
                try useUp(proof)(connection)
                let opened: TokenResponse
                do {
                    opened = try openSession(
                        connection, context, userID: row.userID, clientID: client.id, method: .device,
                        deviceID: row.deviceID, authTime: decidedAt, scope: row.scope, dpopJKT: nil)
                } catch let error as APIError where error.code == .accountLocked {
                    return .refused(.ciba("access_denied", "the user's account is locked"))
                }
                guard
                    try connection.execute(
                        "UPDATE ciba_requests SET redeemed_at = ?, session_id = ? WHERE hash = ? AND redeemed_at IS NULL",
                        [.date(now), .text(opened.sessionID), .text(hash)]) == 1
                else { throw OAuthError.invalidGrant("the tokens of this request were issued before") }
                let scopes = row.scope.split(separator: " ").map(String.init)
                var subject = TokenSubject(
                    userID: row.userID, sessionID: opened.sessionID, clientID: client.id, scopes: scopes,
                    authMethod: .device, authTime: decidedAt, dpopJKT: proof?.thumbprint)
                subject.authorizationDetails = TransferAuthorizationDetails.json(row.action)
                let refresh = scopes.contains("offline_access") ? opened.refreshToken : nil
                return .done(
                    OAuthGrant(
                        subject: subject,
                        tokens: OAuthTokenSet(refreshToken: refresh, nonce: nil, receipt: row.receipt)))
            }
        }.get()
    }

    /// Called in the transaction that decides approval `approvalID`, one a CIBA client asked for:
    /// a ping-mode request's notification becomes due, and the deliverer is woken once the
    /// decision commits.
    func notifyBackchannelClient(_ connection: any SQLConnection, approvalID: String, now: Date) throws {
        let due = try connection.execute(
            "UPDATE ciba_pings SET status = ?, next_attempt_at = ? WHERE approval_id = ? AND status = ?",
            [
                .text(CIBAPingStatus.pending.rawValue), .date(now), .text(approvalID),
                .text(CIBAPingStatus.waiting.rawValue),
            ])
        if due > 0 { AfterCommit.run { [webhookWakeUp] in webhookWakeUp.signal() } }
    }
}
