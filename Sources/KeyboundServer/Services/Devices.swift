import Foundation
import KeyboundCrypto
import KeyboundWire

/// A device row, as the device services need it, with its App Attest key if it was bound with
/// an attestation (its row in `app_attest_keys`).
struct DeviceRecord {
    let id: String
    let userID: String
    let clientID: String
    /// The public key as stored: base64url of its SubjectPublicKeyInfo DER.
    let publicKey: String
    let revoked: Bool
    let appAttestKey: AppAttestKey?

    /// Whether an App Attest attestation vouched for its binding.
    var attested: Bool { appAttestKey != nil }

    /// Whether `signature` (DER) verifies over the exact payload bytes the server issued.
    func signatureIsValid(_ signature: Data, over payload: Data) -> Bool {
        guard let key = ParsedKeys.key(publicKey),
            let parsed = try? P256Signature(derRepresentation: signature)
        else { return false }
        return key.isValidSignature(parsed, for: payload)
    }
}

extension DeviceRecord: SQLRecord {
    static let columns = "d.id, d.user_id, d.client_id, d.public_key, d.revoked_at, \(AppAttestKey.columns)"

    init(row: inout SQLRowReader) throws {
        self.init(
            id: try row.text(), userID: try row.text(), clientID: try row.text(), publicKey: try row.text(),
            revoked: try row.optionalDate() != nil, appAttestKey: try AppAttestKey(row: &row))
    }
}

/// Device and DPoP public keys, parsed once: a login or a DPoP proof then neither decodes nor
/// parses its key again, and the key's verification contexts are reused. A stored key text (or a
/// key's thumbprint) always means the same key, so nothing here can go stale; the cache is
/// bounded by starting over when it is full.
enum ParsedKeys {
    private static let cache = Locked<[String: P256PublicKey]>([:])
    private static let capacity = 1024

    /// The key stored as `text` (base64url SPKI DER), or nil when it is not a P-256 key.
    static func key(_ text: String) -> P256PublicKey? {
        cached(text) { Base64URL.decode(text).flatMap { try? P256PublicKey(spkiDER: $0) } }
    }

    /// The key of a JWK whose RFC 7638 thumbprint is `thumbprint` (a DPoP proof's), or nil when
    /// its point is not on the curve.
    static func key(_ jwk: ECPublicJWK, thumbprint: String) -> P256PublicKey? {
        // A thumbprint is no SPKI's base64url (those start "MFkw"): the two kinds never meet.
        cached("jkt:" + thumbprint) { try? P256PublicKey(x963Representation: jwk.x963) }
    }

    private static func cached(_ name: String, parse: () -> P256PublicKey?) -> P256PublicKey? {
        if let key = cache.withLock({ $0[name] }) { return key }
        guard let key = parse() else { return nil }
        cache.withLock { keys in
            if keys.count >= capacity { keys.removeAll(keepingCapacity: true) }
            keys[name] = key
        }
        return key
    }
}

extension Application {
    /// The device with this id, revoked or not; nil when there is none.
    func loadDevice(_ connection: any SQLConnection, id: String) throws -> DeviceRecord? {
        guard Grammar.isIdentifier(id) else { return nil }
        return try DeviceRecord.first(of: connection.queries([Self.deviceQuery(id: id)])[0])
    }

    /// The statement of ``loadDevice(_:id:)``, to go with others (``SQLConnection/queries(_:)``);
    /// its rows give the device with ``SQLRecord/first(of:)``. For an id already checked to be an
    /// identifier.
    static func deviceQuery(id: String) -> SQLStatement {
        SQLStatement(
            """
            SELECT \(DeviceRecord.columns)
            FROM devices d LEFT JOIN app_attest_keys k ON k.device_id = d.id WHERE d.id = ?
            """, [.text(id)])
    }

    /// Refuses revoked devices, and under ``Configuration/requireAppAttest`` devices bound
    /// without App Attest: bound before the flag was turned on, they would otherwise log in and
    /// approve with no assertion at all; they must be bound again. Called before any signature
    /// is checked, so a refusal writes nothing. (Devices are never suspended: a caller without
    /// the key must not be able to lock its owner out.)
    func checkUsable(_ device: DeviceRecord) -> APIError? {
        if device.revoked { return .deviceRevoked }
        if configuration.requireAppAttest, !device.attested { return .unattestedDevice }
        return nil
    }

    /// Verifies an approval signature over the exact payload bytes the server issued; a bad one
    /// is audited (folded) as `approval_failed`.
    /// - Returns: nil when valid, otherwise the error to answer with (after committing).
    func verifyDeviceSignature(
        _ connection: any SQLConnection, _ context: RequestContext, device: DeviceRecord, payload: Data,
        signature: Data, method: AuditMethod
    ) throws -> APIError? {
        if device.signatureIsValid(signature, over: payload) {
            try connection.execute(
                "UPDATE devices SET last_used_at = ? WHERE id = ?", [.date(context.now), .text(device.id)])
            return nil
        }
        try auditRefusal(
            connection, context, .approvalFailed, method: method, userID: device.userID, deviceID: device.id)
        return .signatureInvalid
    }

    /// `POST /v1/devices`: binds a device key to the caller's account, replacing the one of the
    /// same client.
    func bindDevice(_ context: RequestContext, _ body: RequestBody<BindDeviceRequest>) throws
        -> BindDeviceResponse
    {
        let caller = try checkCaller(context)
        // Step-up: a password or passkey authentication in this session within the window (the
        // end /v1/me states, so the SDK asks for it before it makes a key).
        try requireStepUp(caller, context, for: "Binding a device")
        let request = try body.decode()
        try Validate.deviceName(request.name)
        guard let key = try? P256PublicKey(spkiDER: request.publicKey) else {
            throw APIError(400, .invalidPublicKey, "public_key must be a P-256 SubjectPublicKeyInfo (DER).")
        }
        let attestation = try verifyAppAttestBinding(request, caller: caller, context)
        let deviceID = SecureRandomBytes.identifier("dev")
        return try authenticatedWrite(context) { connection, caller in
            // The cap counts active devices other than this client's, which the new key replaces.
            let others =
                try connection.queryOne(
                    "SELECT COUNT(*) FROM devices WHERE user_id = ? AND client_id <> ? AND revoked_at IS NULL",
                    [.text(caller.userID), .text(caller.clientID)])?
                .integer(0) ?? 0
            guard others < Int64(configuration.maxDevicesPerUser) else {
                throw APIError(
                    409, .deviceLimitReached,
                    "This account has \(configuration.maxDevicesPerUser) active devices; revoke one first.")
            }
            // A new key for the same client replaces the old one: revoke it and its sessions.
            let previous = try connection.query(
                "SELECT id FROM devices WHERE user_id = ? AND client_id = ? AND revoked_at IS NULL",
                [.text(caller.userID), .text(caller.clientID)])
            for row in previous {
                try revoke(connection, context, deviceID: try row.text(0), userID: caller.userID)
            }
            try Rows.insertDevice(
                connection, id: deviceID, userID: caller.userID, clientID: caller.clientID,
                name: request.name,
                keyProtection: request.keyProtection, publicKey: key.spkiDER, createdAt: context.now)
            if let attestation,
                try !storeAppAttestation(attestation, deviceID: deviceID, caller: caller, connection, context)
            {
                throw APIError.challengeUsed  // another binding used the challenge first: undo this one
            }
            try audit(
                connection, context, .deviceBound, method: attestation == nil ? nil : .appAttest,
                userID: caller.userID, deviceID: deviceID, sessionID: caller.sessionID,
                details: [
                    JSONMember("name", .string(request.name)),
                    JSONMember("key_protection", .string(request.keyProtection.rawValue)),
                ])
            return BindDeviceResponse(deviceID: deviceID)
        }
    }

    /// Revokes a device and ends the sessions it opened.
    func revoke(
        _ connection: any SQLConnection, _ context: RequestContext, deviceID: String, userID: String
    )
        throws
    {
        try connection.execute(
            "UPDATE devices SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            [.date(context.now), .text(deviceID)])
        try revokeSessions(
            connection, where: "device_id = ?", [.text(deviceID)], reason: "device_revoked", now: context.now)
        try audit(connection, context, .deviceRevoked, userID: userID, deviceID: deviceID)
    }

    /// `GET /v1/devices`: the caller's devices, oldest first.
    func listDevices(_ context: RequestContext) throws -> DeviceListResponse {
        let caller = try authenticate(context)
        let devices = try database.read { connection in
            try connection.query(
                DeviceInfo.self,
                """
                SELECT \(DeviceInfo.columns) FROM devices d LEFT JOIN app_attest_keys k ON k.device_id = d.id
                WHERE d.user_id = ? ORDER BY d.created_at, d.id
                """, [.text(caller.userID)])
        }
        return DeviceListResponse(devices: devices)
    }

    /// `DELETE /v1/devices/{id}`: revokes one of the caller's devices and ends its sessions.
    func revokeDevice(_ context: RequestContext) throws -> NoBody {
        try authenticatedWrite(context) { connection, caller in
            guard let device = try loadDevice(connection, id: context.parameter("id")),
                device.userID == caller.userID
            else { throw APIError.notFound }
            if !device.revoked { try revoke(connection, context, deviceID: device.id, userID: caller.userID) }
        }
        return NoBody()
    }
}

extension DeviceInfo: SQLRecord {
    static let columns =
        "d.id, d.name, d.key_protection, d.created_at, d.last_used_at, d.revoked_at, k.device_id"

    init(row: inout SQLRowReader) throws {
        let (id, name, protection) = (try row.text(), try row.text(), try row.text())
        let (created, lastUsed, revoked) = (try row.date(), try row.optionalDate(), try row.optionalDate())
        self.init(
            deviceID: id, name: name, keyProtection: KeyProtection(rawValue: protection) ?? .software,
            status: revoked == nil ? .active : .revoked, createdAt: created, lastUsedAt: lastUsed,
            attested: try row.optionalText() != nil)
    }
}
