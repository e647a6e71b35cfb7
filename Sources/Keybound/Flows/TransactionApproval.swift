import Foundation
import KeyboundWire

/// What you see is what you sign: approving an action with the bound device key.
///
/// The server issues a payload naming the action; the prompt shows the action *parsed from
/// that payload* ("Send 0.5 ETH to 0x12…ef"); a fresh verification is required for every
/// approval (no reuse window); the key signs the exact payload bytes.
///
/// ```swift
/// let pending = try await approvals.request(.transfer(try TransferAction(amount: .init("0.5"), asset: "ETH", to: to)))
/// // pending.promptText == "Send 0.5 ETH to 0x12…ef"
/// try await approvals.approve(pending)
/// ```
public struct TransactionApproval: Sendable {
    /// An approval waiting for the user.
    public struct Pending: Sendable, Hashable {
        /// The server's id of this approval, for ``KeyboundClient/confirmApproval(_:signature:)``.
        public let approvalID: String
        /// The exact bytes to sign.
        public let payloadBytes: Data
        /// The payload as parsed (and checked) on the device.
        public let payload: SigningPayload
        /// The prompt text, built from the parsed payload.
        public let promptText: String
    }

    private let client: KeyboundClient
    private let keys: ProtectedKeys
    private let verifier: any UserVerifier
    private let keyName: ItemName
    private let deviceID: String
    private let serverID: String
    private let policy: AccessPolicy
    private let clock: Clock

    /// Approvals signed by one bound device's key.
    ///
    /// - Parameters:
    ///   - client: the API client holding the user's session.
    ///   - device: the device whose bound key signs (its vault, store and verifier).
    ///   - deviceID: the bound device (from ``BiometricLogin/boundDeviceID()``).
    ///   - serverID: the server's id; a payload naming another server is refused.
    ///   - keyName: the bound key's name (`"<namespace>.device-key"` for ``BiometricLogin``).
    ///   - policy: the key's policy; its reuse window is ignored: every approval verifies afresh.
    ///   - clock: time, to refuse expired payloads.
    public init(
        client: KeyboundClient, device: DeviceBackends, deviceID: String, serverID: String,
        keyName: ItemName = "keybound.device-key", policy: AccessPolicy = .biometryCurrentSet,
        clock: Clock = .system
    ) throws {
        self.client = client
        keys = ProtectedKeys(vault: device.vault, markers: device.store, verifier: device.verifier)
        verifier = device.verifier
        self.keyName = keyName
        self.deviceID = deviceID
        self.serverID = serverID
        self.policy = try policy.reusing(for: 0)
        self.clock = clock
    }

    /// Asks the server for a payload to approve `action`, and checks it names exactly that
    /// action, this server and this device.
    /// - Throws: ``KeyboundError/payloadMismatch`` when the payload says anything else.
    public func request(_ action: ApprovalAction) async throws -> Pending {
        let response = try await client.requestApproval(deviceID: deviceID, action: action)
        let pending = try check(approvalID: response.approvalID, payload: response.payload)
        guard pending.payload.action == action else {
            throw KeyboundError(.payloadMismatch, message: "the server's payload names another action")
        }
        return pending
    }

    /// Parses and checks a payload (purpose `approve`, server, device, not expired) and builds
    /// the prompt from what it says.
    public func check(approvalID: String, payload bytes: Data) throws -> Pending {
        let payload = try PayloadCheck.parse(
            bytes, purpose: .approve, serverID: serverID, deviceID: deviceID, now: clock.now())
        guard let action = payload.action else {
            throw KeyboundError(.payloadMismatch, message: "an approval payload without an action")
        }
        return Pending(
            approvalID: approvalID, payloadBytes: bytes, payload: payload,
            promptText: Self.promptText(for: action))
    }

    /// Verifies the user afresh, signs the exact payload bytes and confirms with the server.
    public func approve(_ pending: Pending) async throws -> ConfirmApprovalResponse {
        let signature = try await sign(pending)
        return try await client.confirmApproval(pending.approvalID, signature: signature)
    }

    /// Verifies the user afresh and signs the payload (without sending it).
    public func sign(_ pending: Pending) async throws -> Data {
        let prompt = try VerificationPrompt(reason: pending.promptText, fallbackTitle: "")
        let verification = try await verifier.verify(policy, prompt: prompt)
        return try await keys.sign(pending.payloadBytes, with: keyName, verification: verification)
    }

    /// "Send 0.5 ETH to 0x1234…cdef": the action as the user must see it.
    public static func promptText(for action: ApprovalAction) -> String {
        switch action {
        case .transfer(let transfer):
            "Send \(transfer.amount.text) \(transfer.asset) to \(shortened(transfer.to))"
        }
    }

    /// Long recipients keep their first 6 and last 4 characters, the parts people compare.
    static func shortened(_ recipient: String) -> String {
        guard recipient.count > 14 else { return recipient }
        return "\(recipient.prefix(6))…\(recipient.suffix(4))"
    }
}
