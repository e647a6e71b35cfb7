import Foundation
import KeyboundCrypto
import KeyboundWire

// Receipts (docs/approvals.md): the issuer's signed statement that a device approved an action,
// carrying the exact payload the device signed, its signature and its public key, so that anyone
// holding the issuer's JWK Set can check it offline, without Keybound.

extension Application {
    /// The receipt of an approval that is being approved in `connection`'s transaction: a JWT
    /// (``ReceiptClaims``, `typ: keybound-receipt+jwt`) under the issuer's current signing key,
    /// the same key and `kid` as the access tokens'. Made once, stored with the approval, so that
    /// every read returns the same bytes.
    /// - Parameters:
    ///   - decidedAt: when the approval was decided, as stored (whole milliseconds).
    ///   - bindingMessage: the message the user was shown with the action, if the request had one.
    /// - Returns: the compact JWS, or nil when no ``Configuration/issuer`` is set: without it
    ///   nothing publishes the keys a receipt would be checked with.
    func approvalReceipt(
        _ connection: any SQLConnection, approvalID: String, userID: String, device: DeviceRecord,
        action: ApprovalAction, bindingMessage: String? = nil, payload: Data, signature: Data, decidedAt: Date
    ) throws -> String? {
        guard let issuer = configuration.issuer else { return nil }
        guard let spki = Base64URL.decode(device.publicKey) else {
            throw DatabaseError.unexpectedType(column: 3)
        }
        let claims = ReceiptClaims(
            issuer: issuer, subject: userID, issuedAt: Int(decidedAt.milliseconds / 1000),
            approvalID: approvalID,
            decidedAt: decidedAt, action: action, bindingMessage: bindingMessage, deviceID: device.id,
            deviceKey: try ECPublicJWK(spki: spki), attested: device.attested, payload: payload,
            signature: signature)
        return try signJWT(type: ReceiptClaims.type, claims: claims.json, at: decidedAt, on: connection)
    }
}
