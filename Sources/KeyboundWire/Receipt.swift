import Foundation

/// The claims of an approval receipt (docs/approvals.md): what the issuer signs, as a JWT with
/// `typ: keybound-receipt+jwt`, once an approval is approved. The server writes them and
/// KeyboundVerifier reads them; both go through this type, so the two cannot disagree on a name.
///
/// ```
/// {"iss":…,"sub":<user id>,"iat":…,"jti":<approval id>,
///  "approval":{"id","status":"approved","decided_at","action"[,"binding_message"]},
///  "device":{"id","jwk","attested"},"payload":<base64url>,"signature":<base64url DER>}
/// ```
package struct ReceiptClaims: Sendable, Hashable {
    /// The JWS header's `typ`.
    package static let type = "keybound-receipt+jwt"

    /// The top-level member names, in the order they are written.
    package enum Member: String, MemberName {
        case iss, sub, iat, jti, approval, device, payload, signature
    }

    /// The members of `approval`.
    package enum ApprovalMember: String, MemberName {
        case id, status
        case decidedAt = "decided_at"
        case action
        case bindingMessage = "binding_message"
    }

    /// The members of `device`.
    package enum DeviceMember: String, MemberName { case id, jwk, attested }

    /// `iss`: the issuer.
    package let issuer: String
    /// `sub`: the user's id.
    package let subject: String
    /// `iat`, whole seconds.
    package let issuedAt: Int
    /// `jti` and `approval.id`: the approval's id.
    package let approvalID: String
    /// `approval.decided_at`.
    package let decidedAt: Date
    /// `approval.action`.
    package let action: ApprovalAction
    /// `approval.binding_message`, when the request that asked for the approval had one.
    package let bindingMessage: String?
    /// `device.id`.
    package let deviceID: String
    /// `device.jwk`: the device's P-256 public key.
    package var deviceKey: ECPublicJWK
    /// `device.attested`: whether an App Attest attestation vouched for the device's binding.
    package let attested: Bool
    /// `payload`: the exact bytes the device signed.
    package var payload: Data
    /// `signature`: the device's ECDSA signature over ``payload``, DER.
    package var signature: Data

    /// The claims from their values.
    package init(
        issuer: String, subject: String, issuedAt: Int, approvalID: String, decidedAt: Date,
        action: ApprovalAction, bindingMessage: String?, deviceID: String, deviceKey: ECPublicJWK,
        attested: Bool, payload: Data, signature: Data
    ) {
        self.issuer = issuer
        self.subject = subject
        self.issuedAt = issuedAt
        self.approvalID = approvalID
        self.decidedAt = decidedAt
        self.action = action
        self.bindingMessage = bindingMessage
        self.deviceID = deviceID
        self.deviceKey = deviceKey
        self.attested = attested
        self.payload = payload
        self.signature = signature
    }

    /// Reads the claims strictly: every member required (but `binding_message`), none unknown,
    /// `approval.status` `approved`, `jti` the approval's id.
    /// - Throws: ``WireError`` for anything else.
    package init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader<Member>(json)
        let approval = try JSONReader<ApprovalMember>(reader.value(.approval), path: "approval")
        let device = try JSONReader<DeviceMember>(reader.value(.device), path: "device")
        guard try approval.enumeration(.status, as: ApprovalStatus.self) == .approved else {
            throw WireError(.invalidRequest, "approval.status must be approved")
        }
        self.init(
            issuer: try reader.string(.iss), subject: try reader.string(.sub),
            issuedAt: try reader.integer(.iat),
            approvalID: try approval.string(.id), decidedAt: try approval.timestamp(.decidedAt),
            action: try ApprovalAction(json: approval.value(.action), path: "approval.action"),
            bindingMessage: try approval.optionalString(.bindingMessage), deviceID: try device.string(.id),
            deviceKey: try ECPublicJWK(json: device.value(.jwk)), attested: try device.bool(.attested),
            payload: try reader.bytes(.payload), signature: try reader.bytes(.signature))
        guard try reader.string(.jti) == approvalID else {
            throw WireError(.invalidRequest, "jti must be the approval's id")
        }
    }

    /// The claims as a JSON object, members in the order of ``Member``.
    package var json: JSONValue {
        var approval = JSONObjectBuilder<ApprovalMember>()
        approval.add(.id, approvalID)
        approval.add(.status, ApprovalStatus.approved)
        approval.add(.decidedAt, decidedAt)
        approval.add(.action, action.json)
        if let bindingMessage { approval.add(.bindingMessage, bindingMessage) }
        var device = JSONObjectBuilder<DeviceMember>()
        device.add(.id, deviceID)
        device.add(.jwk, deviceKey.json)
        device.add(.attested, .bool(attested))
        var claims = JSONObjectBuilder<Member>()
        claims.add(.iss, issuer)
        claims.add(.sub, subject)
        claims.add(.iat, issuedAt)
        claims.add(.jti, approvalID)
        claims.add(.approval, approval.value)
        claims.add(.device, device.value)
        claims.add(.payload, payload)
        claims.add(.signature, signature)
        return claims.value
    }
}
