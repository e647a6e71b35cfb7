import Foundation
import KeyboundWire

// The console's users pages (docs/console.md): search, one user's devices, passkeys, sessions,
// approvals and events, and what an administrator does to them. Every change runs through
// ``Application/consoleChange(_:_:)``: checked in its own transaction, audited with the
// administrator's id.

extension Application {
    /// `GET /admin/v1/users?query=TEXT`: up to 50 users whose username contains `query` (all
    /// users, by name, without one).
    func consoleUsers(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        let query = context.request.query["query"] ?? ""
        guard query.utf8.count <= 64 else { throw APIError.invalid("query is at most 64 bytes") }
        // LIKE's own characters stand for themselves.
        let escaped = query.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
            of: "%", with: "\\%"
        )
        .replacingOccurrences(of: "_", with: "\\_")
        let users = try database.read { connection in
            try connection.query(
                """
                SELECT u.id, u.username, u.created_at, u.locked_at, r.role FROM users u
                LEFT JOIN user_roles r ON r.user_id = u.id AND r.role = ?
                WHERE u.username LIKE ? ESCAPE '\\' ORDER BY u.username LIMIT 50
                """, [.text(Role.admin.name), .text("%" + escaped + "%")]
            ).map { row in
                JSONValue.object([
                    JSONMember("user_id", .string(try row.text(0))),
                    JSONMember("username", .string(try row.text(1))),
                    JSONMember("created_at", .time(Date(milliseconds: try row.integer(2)))),
                    JSONMember("locked_at", .time(try row.optionalInteger(3).map(Date.init(milliseconds:)))),
                    JSONMember("admin", .bool(try row.optionalText(4) != nil)),
                ])
            }
        }
        return .console([JSONMember("users", .array(users))])
    }

    /// `GET /admin/v1/users/{id}`: the user, their devices (attested or not), passkeys, live
    /// sessions, latest approvals with their receipts, latest audit events and throttles.
    func consoleUser(_ context: RequestContext) throws -> HTTPResponse {
        _ = try consoleAdmin(context)
        let userID = context.parameter("id")
        guard Grammar.isIdentifier(userID) else { throw APIError.notFound }
        return try database.read { connection in
            guard
                let user = try connection.queryOne(
                    "SELECT username, created_at, locked_at, password_hash FROM users WHERE id = ?",
                    [.text(userID)])
            else { throw APIError.notFound }
            let username = try user.text(0)
            let roles = try connection.query(
                "SELECT role FROM user_roles WHERE user_id = ? ORDER BY role", [.text(userID)]
            ).map { JSONValue.string(try $0.text(0)) }
            let devices = try connection.query(
                DeviceInfo.self,
                """
                SELECT \(DeviceInfo.columns) FROM devices d LEFT JOIN app_attest_keys k ON k.device_id = d.id
                WHERE d.user_id = ? ORDER BY d.created_at, d.id
                """, [.text(userID)])
            let passkeys = try connection.query(
                PasskeyInfo.self,
                "SELECT \(PasskeyInfo.columns) FROM passkeys WHERE user_id = ? ORDER BY created_at, id",
                [.text(userID)])
            // Suspended as cloned: it signs in again once its user has signed in another way.
            var suspended: [String: Date] = [:]
            for row in try connection.query(
                "SELECT id, clone_detected_at FROM passkeys WHERE user_id = ? AND clone_detected_at IS NOT NULL",
                [.text(userID)])
            {
                suspended[try row.text(0)] = Date(milliseconds: try row.integer(1))
            }
            let sessions = try connection.query(
                """
                SELECT id, client_id, auth_method, auth_time, created_at, device_id, passkey_id, scope FROM sessions
                WHERE user_id = ? AND revoked_at IS NULL AND created_at > ? ORDER BY created_at DESC LIMIT 100
                """, [.text(userID), .date(context.now.adding(seconds: -configuration.sessionMaxAge))]
            ).map { row in
                JSONValue.object([
                    JSONMember("session_id", .string(try row.text(0))),
                    JSONMember("client_id", .string(try row.text(1))),
                    JSONMember("auth_method", .string(try row.text(2))),
                    JSONMember("auth_time", .time(Date(milliseconds: try row.integer(3)))),
                    JSONMember("created_at", .time(Date(milliseconds: try row.integer(4)))),
                    JSONMember("device_id", .text(try row.optionalText(5))),
                    JSONMember("passkey_id", .text(try row.optionalText(6))),
                    JSONMember("oauth_scope", .text(try row.optionalText(7))),
                ])
            }
            let approvals = try connection.query(
                ApprovalResponse.self,
                """
                SELECT \(ApprovalResponse.columns) FROM approvals
                WHERE user_id = ? ORDER BY created_at DESC, id LIMIT 50
                """, [.text(userID)])
            let events = try connection.query(
                AuditEvent.self,
                "SELECT \(AuditEvent.columns) FROM audit_events WHERE user_id = ? ORDER BY last_at DESC, id LIMIT 50",
                [.text(userID)])
            let throttles = try connection.query(
                "SELECT scope, failures, blocked_until FROM throttles WHERE \(Self.userThrottles)",
                Self.userThrottleParameters(userID: userID, username: username)
            ).map { row in
                JSONValue.object([
                    JSONMember("scope", .string(try row.text(0))),
                    JSONMember("failures", .integer(Int(try row.integer(1)))),
                    // 0: counted, not blocked.
                    JSONMember(
                        "blocked_until",
                        .time(try row.integer(2) == 0 ? nil : Date(milliseconds: try row.integer(2)))),
                ])
            }
            return .console([
                JSONMember("user_id", .string(userID)), JSONMember("username", .string(username)),
                JSONMember("created_at", .time(Date(milliseconds: try user.integer(1)))),
                JSONMember("locked_at", .time(try user.optionalInteger(2).map(Date.init(milliseconds:)))),
                JSONMember("has_password", .bool(!(try user.text(3)).isEmpty)),
                JSONMember("roles", .array(roles)),
                JSONMember("devices", .array(devices.map(\.json))),
                JSONMember(
                    "passkeys",
                    .array(
                        passkeys.map { passkey in
                            guard case .object(var members) = passkey.json else { return passkey.json }
                            members.append(JSONMember("suspended_at", .time(suspended[passkey.passkeyID])))
                            return .object(members)
                        })),
                JSONMember("sessions", .array(sessions)),
                JSONMember("approvals", .array(approvals.map { $0.asOf(context.now).json })),
                JSONMember("events", .array(events.map(\.json))),
                JSONMember("throttles", .array(throttles)),
            ])
        }
    }

    /// The throttle rows that hold a user back: their account's, their account's from each
    /// address, their devices' and their passkeys'.
    private static let userThrottles = """
        scope = ? OR scope LIKE ? ESCAPE '\\'
            OR scope IN (SELECT 'device:' || id FROM devices WHERE user_id = ?)
            OR scope IN (SELECT 'passkey:' || id FROM passkeys WHERE user_id = ?)
        """

    private static func userThrottleParameters(userID: String, username: String) -> [SQLValue] {
        let escaped = username.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
        return [
            .text(ThrottleScope.account(username)), .text("account-address:" + escaped + " %"), .text(userID),
            .text(userID),
        ]
    }

    /// `POST /admin/v1/users/{id}/lock` and `/unlock`: ``setLocked(_:userID:_:_:)``.
    func consoleLock(_ locked: Bool) -> @Sendable (RequestContext) throws -> HTTPResponse {
        { [self] context in
            try consoleChange(context) { connection, context, _ in
                let userID = try existingUser(context, connection)
                try setLocked(locked, userID: userID, connection, context)
            }
            return HTTPResponse.noContent
        }
    }

    /// `DELETE /admin/v1/users/{id}/sessions`: ends every session of the user, API and OAuth.
    func consoleEndSessions(_ context: RequestContext) throws -> HTTPResponse {
        try consoleChange(context) { connection, context, _ in
            let userID = try existingUser(context, connection)
            try revokeSessions(
                connection, where: "user_id = ?", [.text(userID)], reason: "admin", now: context.now)
            try audit(connection, context, .sessionRevoked, userID: userID)
        }
        return HTTPResponse.noContent
    }

    /// `DELETE /admin/v1/users/{id}/throttles`: forgets the user's failed logins everywhere.
    func consoleClearThrottles(_ context: RequestContext) throws -> HTTPResponse {
        try consoleChange(context) { connection, context, _ in
            let userID = try existingUser(context, connection)
            guard
                let row = try connection.queryOne("SELECT username FROM users WHERE id = ?", [.text(userID)])
            else { throw APIError.notFound }
            try connection.execute(
                "DELETE FROM throttles WHERE \(Self.userThrottles)",
                Self.userThrottleParameters(userID: userID, username: try row.text(0)))
            try audit(connection, context, .throttlesCleared, userID: userID)
        }
        return HTTPResponse.noContent
    }

    /// `DELETE /admin/v1/devices/{id}`: revokes the device and ends its sessions; its next login
    /// is refused (`device_revoked`).
    func consoleRevokeDevice(_ context: RequestContext) throws -> HTTPResponse {
        try consoleChange(context) { connection, context, _ in
            let deviceID = context.parameter("id")
            guard Grammar.isIdentifier(deviceID), let device = try loadDevice(connection, id: deviceID) else {
                throw APIError.notFound
            }
            if !device.revoked { try revoke(connection, context, deviceID: device.id, userID: device.userID) }
        }
        return HTTPResponse.noContent
    }

    /// `DELETE /admin/v1/passkeys/{id}`: removes the passkey and ends the sessions it opened, even
    /// the account's last way to sign in (an administrator removes a passkey they do not trust).
    func consoleRemovePasskey(_ context: RequestContext) throws -> HTTPResponse {
        try consoleChange(context) { connection, context, _ in
            let passkeyID = context.parameter("id")
            guard Grammar.isIdentifier(passkeyID),
                let row = try connection.queryOne(
                    "SELECT user_id FROM passkeys WHERE id = ?", [.text(passkeyID)])
            else { throw APIError.notFound }
            try deletePasskey(
                connection, context, passkeyID: passkeyID, userID: try row.text(0), sessionID: nil)
        }
        return HTTPResponse.noContent
    }

    /// `DELETE /admin/v1/sessions/{id}`: ends one session.
    func consoleRevokeSession(_ context: RequestContext) throws -> HTTPResponse {
        try consoleChange(context) { connection, context, _ in
            let sessionID = context.parameter("id")
            guard Grammar.isIdentifier(sessionID),
                let row = try connection.queryOne(
                    "SELECT user_id, device_id FROM sessions WHERE id = ?", [.text(sessionID)])
            else { throw APIError.notFound }
            try revokeSessions(
                connection, where: "id = ?", [.text(sessionID)], reason: "admin", now: context.now)
            try audit(
                connection, context, .sessionRevoked, userID: try row.text(0),
                deviceID: try row.optionalText(1),
                sessionID: sessionID)
        }
        return HTTPResponse.noContent
    }

    /// The id of the user the path names, who must exist.
    private func existingUser(_ context: RequestContext, _ connection: any SQLConnection) throws -> String {
        let userID = context.parameter("id")
        guard Grammar.isIdentifier(userID),
            try connection.queryOne("SELECT 1 FROM users WHERE id = ?", [.text(userID)]) != nil
        else { throw APIError.notFound }
        return userID
    }
}

extension JSONValue {
    /// A time as the API writes it (RFC 3339, UTC, milliseconds), or null.
    static func time(_ date: Date?) -> JSONValue { date.map { .string(Timestamp.format($0)) } ?? .null }
    /// A string, or null.
    static func text(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }
}

extension HTTPResponse {
    /// A console API answer: a JSON object, never cached.
    static func console(_ members: [JSONMember], status: Int = 200) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: JSON.serialize(.object(members)))
    }
}
