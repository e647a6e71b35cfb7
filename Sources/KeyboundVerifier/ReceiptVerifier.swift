import Foundation
import KeyboundCrypto
import KeyboundWire

/// Why a receipt was refused: the step of the verification that failed, and what exactly.
public struct ReceiptVerificationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The three steps of a receipt's verification, in the order they run.
    public enum Step: Int, Sendable, Hashable, CaseIterable {
        /// Step 1: the receipt is a JWS of the issuer (`alg: ES256`, `typ: keybound-receipt+jwt`,
        /// a `kid` of the JWK Set, its signature, `iss`), and its claims are a receipt's.
        case issuerSignature = 1
        /// Step 2: the device's signature (`signature`) verifies over `payload` with `device.jwk`.
        case deviceSignature = 2
        /// Step 3: the signed `payload` is an approval payload naming the claims' action and
        /// device, and the expected server.
        case payloadMatch = 3

        /// What the step checks, for messages: `the issuer's signature`.
        public var summary: String {
            switch self {
            case .issuerSignature: "the issuer's signature"
            case .deviceSignature: "the device's signature"
            case .payloadMatch: "the signed payload matches the receipt"
            }
        }
    }

    /// The step that failed.
    public let step: Step
    /// What exactly, for logs.
    public let detail: String

    /// - Parameters:
    ///   - step: the step that failed.
    ///   - detail: what exactly.
    public init(_ step: Step, _ detail: String) {
        self.step = step
        self.detail = detail
    }

    /// `step 2 (the device's signature) failed: …`.
    public var description: String { "step \(step.rawValue) (\(step.summary)) failed: \(detail)" }

    /// Equal when the steps are.
    public static func == (lhs: ReceiptVerificationError, rhs: ReceiptVerificationError) -> Bool {
        lhs.step == rhs.step
    }

    /// Hashes the step.
    public func hash(into hasher: inout Hasher) { hasher.combine(step) }
}

/// An approval whose receipt verified: what the user's device approved, and when.
public struct VerifiedApproval: Sendable, Hashable {
    /// `iss`: the issuer that signed the receipt.
    public let issuer: String
    /// The approval's id (`jti`).
    public let approvalID: String
    /// `sub`: the user's id.
    public let userID: String
    /// The action the device signed (a transfer: amount, asset, recipient).
    public let action: ApprovalAction
    /// The message the user was shown with the action, if the request had one.
    public let bindingMessage: String?
    /// When the approval was decided.
    public let decidedAt: Date
    /// The device that signed.
    public let deviceID: String
    /// Whether an App Attest attestation vouched for the device's binding.
    public let deviceAttested: Bool
    /// The server id the signed payload names (the issuer's `--server-id`).
    public let serverID: String
    /// The exact bytes the device signed.
    public let payload: Data
}

/// Verifies Keybound's approval receipts offline, against the issuer's published keys, in the
/// three steps of ``ReceiptVerificationError/Step``: the issuer's JWS, the device's own signature
/// over the payload it was shown, and that payload naming what the receipt says. A payment
/// service keeps the receipt as its proof that the user's device signed exactly this transfer.
///
/// ```swift
/// let keys = try JWKS(json: jwksData)                      // GET https://login.example.com/oauth/jwks
/// let verifier = ReceiptVerifier(issuer: "https://login.example.com", serverID: "keybound", keys: keys)
/// let approval = try verifier.verify(receipt)              // throws ReceiptVerificationError
/// ```
///
/// - Important: A receipt proves what was approved, not that it is still wanted: it does not
///   expire and cannot be revoked. Check its ``VerifiedApproval/approvalID`` against the
///   transfers already executed, so that one receipt pays once.
public struct ReceiptVerifier: Sendable {
    /// The `iss` receipts must carry.
    public let issuer: String
    /// The server id the signed payloads must name: the issuer's `--server-id`.
    public let serverID: String
    private let keys: JWKS

    /// - Parameters:
    ///   - issuer: the issuer's URL, exactly as in its discovery document.
    ///   - serverID: the issuer's server id (`keybound serve --server-id`, default `keybound`).
    ///   - keys: the issuer's JWK Set.
    public init(issuer: String, serverID: String, keys: JWKS) {
        self.issuer = issuer
        self.serverID = serverID
        self.keys = keys
    }

    /// Verifies `receipt`, a compact JWS.
    /// - Returns: the approval it proves.
    /// - Throws: ``ReceiptVerificationError`` naming the step that failed.
    public func verify(_ receipt: String) throws -> VerifiedApproval {
        try Self.verify(receipt, keys: keys, issuer: issuer, serverID: serverID)
    }

    /// The three steps, with `issuer` and `serverID` checked when given (`keybound receipt verify`
    /// without `--issuer` or `--server-id` shows what the receipt says instead).
    /// - Throws: ``ReceiptVerificationError``.
    package static func verify(_ receipt: String, keys: JWKS, issuer: String?, serverID: String?) throws
        -> VerifiedApproval
    {
        // Step 1: the issuer's JWS, and a receipt's claims in it.
        let claims: ReceiptClaims
        do {
            let json = try JWTVerification.verify(receipt, type: ReceiptClaims.type, keys: keys.keySet)
            if let issuer, json[member: "iss"]?.stringValue != issuer {
                throw VerificationError(.wrongIssuer, "iss is not \(issuer)")
            }
            claims = try ReceiptClaims(json: json)
        } catch let error as VerificationError {
            throw ReceiptVerificationError(.issuerSignature, "\(error.code.rawValue): \(error.detail)")
        } catch {
            throw ReceiptVerificationError(.issuerSignature, "not a receipt's claims: \(wireDetail(error))")
        }
        // Step 2: the device's signature over the payload, with the device's key.
        guard let deviceKey = try? P256PublicKey(x963Representation: claims.deviceKey.x963) else {
            throw ReceiptVerificationError(.deviceSignature, "device.jwk is not a P-256 point")
        }
        guard let signature = try? P256Signature(derRepresentation: claims.signature),
            deviceKey.isValidSignature(signature, for: claims.payload)
        else {
            throw ReceiptVerificationError(
                .deviceSignature, "signature does not verify over payload with device.jwk")
        }
        // Step 3: what the device signed is what the receipt says.
        let payload: SigningPayload
        do {
            payload = try SigningPayload(parsing: claims.payload)
        } catch {
            throw ReceiptVerificationError(
                .payloadMatch, "payload is not a signing payload: \(wireDetail(error))")
        }
        guard payload.purpose == .approve, payload.action == claims.action else {
            throw ReceiptVerificationError(
                .payloadMatch, "the signed payload's action is not approval.action")
        }
        guard payload.device == claims.deviceID else {
            throw ReceiptVerificationError(
                .payloadMatch, "the signed payload names device \(payload.device), not device.id")
        }
        if let serverID, payload.server != serverID {
            throw ReceiptVerificationError(
                .payloadMatch, "the signed payload names server \(payload.server), not \(serverID)")
        }
        return VerifiedApproval(
            issuer: claims.issuer, approvalID: claims.approvalID, userID: claims.subject,
            action: claims.action,
            bindingMessage: claims.bindingMessage, decidedAt: claims.decidedAt, deviceID: claims.deviceID,
            deviceAttested: claims.attested, serverID: payload.server, payload: claims.payload)
    }
}
