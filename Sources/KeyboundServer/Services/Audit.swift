import Foundation
import KeyboundWire

extension Application {
    /// A refusal of the same kind for the same target within this many seconds (1 hour) of the
    /// last one folds into its row; after a quieter hour a new row starts.
    static let auditFoldWindow = 3600

    /// Records an audit event in the current transaction, with the webhook event it reports
    /// (``AuditEventType/webhookEvent``), whose data `details` completes. Never pass a secret here.
    func audit(
        _ connection: any SQLConnection, _ context: RequestContext, _ type: AuditEventType,
        method: AuditMethod? = nil, userID: String? = nil, deviceID: String? = nil, sessionID: String? = nil,
        details: [JSONMember] = []
    ) throws {
        try insertAuditEvent(
            connection, now: context.now, clientAddress: context.clientAddress.text, type, method: method,
            userID: userID, deviceID: deviceID, sessionID: sessionID, actorID: context.actorID,
            details: details)
    }

    /// Records a refusal (a failed login, a lockout) in the current transaction, folded: when the
    /// same kind of refusal for the same target was recorded within ``auditFoldWindow``, that row's
    /// count goes up and this one's time and client address become its last ones (it keeps its
    /// first), so an attacker cannot bury a user's real events under copies of their own, and
    /// both where a run of refusals started and where it is now show. The target is the device,
    /// else the user, else (for unknown usernames and address blocks) the client address. The log
    /// folds alike: a line when the count reaches 1, 2, 4, 8, …
    func auditRefusal(
        _ connection: any SQLConnection, _ context: RequestContext, _ type: AuditEventType,
        method: AuditMethod? = nil, userID: String? = nil, deviceID: String? = nil
    ) throws {
        // Every block that starts is an event, folded in the audit or not.
        try emitAudited(
            connection, now: context.now, type, method: method, userID: userID, deviceID: deviceID,
            sessionID: nil,
            details: [])
        var conditions = ["type = ?", "last_at >= ?"]
        var parameters: [SQLValue] = [
            .text(type.rawValue), .date(context.now.adding(seconds: -Self.auditFoldWindow)),
        ]
        // `column = NULL` never matches in SQL: an absent value is matched with IS NULL.
        for (column, value) in [("method", method?.rawValue), ("user_id", userID), ("device_id", deviceID)] {
            if let value {
                conditions.append("\(column) = ?")
                parameters.append(.text(value))
            } else {
                conditions.append("\(column) IS NULL")
            }
        }
        if userID == nil, deviceID == nil {
            conditions.append("client_address = ?")
            parameters.append(.text(context.clientAddress.text))
        }
        let existing = try connection.queryOne(
            """
            SELECT id, count FROM audit_events WHERE \(conditions.joined(separator: " AND "))
            ORDER BY last_at DESC LIMIT 1
            """, parameters)
        guard let existing else {
            try insertAuditRow(
                connection, now: context.now, clientAddress: context.clientAddress.text, type, method: method,
                userID: userID, deviceID: deviceID, sessionID: nil)
            return
        }
        let count = try existing.integer(1) + 1
        try connection.execute(
            "UPDATE audit_events SET count = ?, last_at = ?, last_client_address = ? WHERE id = ?",
            [
                .integer(count), .date(context.now), .text(context.clientAddress.text),
                .text(try existing.text(0)),
            ])
        if count & (count - 1) == 0 {
            logAudit(
                type, method: method, userID: userID, deviceID: deviceID, sessionID: nil,
                clientAddress: context.clientAddress.text, count: count)
        }
    }

    /// Inserts one audit row (count 1), logs it, and emits the webhook event it reports
    /// (``emitAudited(_:now:_:method:userID:deviceID:sessionID:details:)``). `clientAddress` is
    /// nil for what an operator did on the server's own machine. `actorID` is the administrator
    /// who did it on the console, `detail` what a change that names no user was about.
    func insertAuditEvent(
        _ connection: any SQLConnection, now: Date, clientAddress: String?, _ type: AuditEventType,
        method: AuditMethod?, userID: String?, deviceID: String?, sessionID: String?, actorID: String? = nil,
        detail: String? = nil, details: [JSONMember] = []
    ) throws {
        try insertAuditRow(
            connection, now: now, clientAddress: clientAddress, type, method: method, userID: userID,
            deviceID: deviceID, sessionID: sessionID, actorID: actorID, detail: detail)
        try emitAudited(
            connection, now: now, type, method: method, userID: userID, deviceID: deviceID,
            sessionID: sessionID,
            details: details)
    }

    /// Inserts one audit row (count 1) and logs it.
    private func insertAuditRow(
        _ connection: any SQLConnection, now: Date, clientAddress: String?, _ type: AuditEventType,
        method: AuditMethod?, userID: String?, deviceID: String?, sessionID: String?, actorID: String? = nil,
        detail: String? = nil
    ) throws {
        try connection.executeLater(
            """
            INSERT INTO audit_events (id, time, type, method, user_id, device_id, session_id, client_address,
                count, last_at, last_client_address, actor_id, detail)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
            """,
            [
                .text(SecureRandomBytes.timeOrderedIdentifier("evt", milliseconds: now.milliseconds)),
                .date(now),
                .text(type.rawValue),
                (method?.rawValue).sql, userID.sql, deviceID.sql, sessionID.sql, clientAddress.sql,
                .date(now), clientAddress.sql, actorID.sql, detail.sql,
            ])
        logAudit(
            type, method: method, userID: userID, deviceID: deviceID, sessionID: sessionID,
            clientAddress: clientAddress, count: 1, actorID: actorID)
    }

    /// Logs an audit event once its transaction has committed (``AfterCommit``): a row that was
    /// rolled back leaves no line.
    private func logAudit(
        _ type: AuditEventType, method: AuditMethod?, userID: String?, deviceID: String?, sessionID: String?,
        clientAddress: String?, count: Int64, actorID: String? = nil
    ) {
        AfterCommit.run { [logger] in
            logger.log(
                .info, "audit",
                [
                    ("event", type.rawValue), ("method", method?.rawValue), ("user_id", userID),
                    ("device_id", deviceID), ("session_id", sessionID), ("client", clientAddress),
                    ("count", Int(count)), ("actor_id", actorID),
                ])
        }
    }

    /// `GET /v1/audit`: the caller's own events, newest activity first.
    func auditEvents(_ context: RequestContext) throws -> AuditListResponse {
        let caller = try authenticate(context)
        var limit = 100
        if let text = context.request.query["limit"] {
            guard let value = Int(text), (1...500).contains(value) else {
                throw APIError.invalid("limit must be an integer from 1 to 500")
            }
            limit = value
        }
        // Newest activity first: a folded row that is still growing stays at the top.
        let events = try database.read { connection in
            try connection.query(
                AuditEvent.self,
                """
                SELECT \(AuditEvent.columns) FROM audit_events WHERE user_id = ?
                ORDER BY last_at DESC, id LIMIT ?
                """, [.text(caller.userID), .integer(Int64(limit))])
        }
        return AuditListResponse(events: events)
    }
}

extension AuditEvent: SQLRecord {
    static let columns = """
        time, type, method, user_id, device_id, session_id, client_address, count, last_at, last_client_address,
            actor_id, detail
        """

    init(row: inout SQLRowReader) throws {
        self.init(
            time: try row.date(), type: AuditEventType(rawValue: try row.text()),
            method: try row.optionalText().map(AuditMethod.init(rawValue:)), userID: try row.optionalText(),
            deviceID: try row.optionalText(), sessionID: try row.optionalText(),
            clientAddress: try row.optionalText(), count: Int(try row.integer()), lastTime: try row.date(),
            lastClientAddress: try row.optionalText(), actorID: try row.optionalText(),
            detail: try row.optionalText())
    }
}
