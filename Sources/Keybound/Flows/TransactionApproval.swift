import Foundation

/// What you see is what you sign: approving an action with the bound device key.
///
/// The server issues a payload naming the action. ``request(_:)`` (or ``check(approvalID:payload:)``
/// for a payload that came another way) parses and checks those exact bytes and returns a
/// ``PendingApproval``: the amount, the asset and the *whole* recipient, as the payload says
/// them. The app shows them on its own confirmation screen; only when the user confirms there
/// does it call ``PendingApproval/confirm()``, and only the ``ConfirmedApproval`` that returns
/// can reach the key: ``approve(_:)`` and ``sign(_:)`` take nothing else, so signing without
/// the confirmation step does not compile. Then a fresh verification (no reuse window) lets the
/// key sign the exact payload bytes.
///
/// - Important: The app's confirmation screen is what the user actually reads. With Face ID the
///   system shows the prompt's reason text ("Send 0.5 ETH to …") only after a *failed* match; a
///   face that matches at once signs without the text ever appearing. Touch ID shows the reason
///   while it waits for a finger. So show the whole ``PendingApproval/groupedRecipient`` (never
///   a shortened one: an address that agrees in its first and last characters is cheap to make)
///   and the amount and asset on your own screen, and confirm only from that screen's button.
///
/// ```swift
/// let pending = try await approvals.request(.transfer(try TransferAction(amount: .init("0.5"), asset: "ETH", to: to)))
/// // Your confirmation screen shows pending.amount, pending.asset and pending.groupedRecipient;
/// // when the user taps "Send":
/// try await approvals.approve(pending.confirm())
/// ```
public struct TransactionApproval: Sendable {
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
    /// - Returns: what the app must show on its confirmation screen before ``PendingApproval/confirm()``.
    /// - Throws: ``KeyboundError/payloadMismatch`` when the payload says anything else.
    public func request(_ action: ApprovalAction) async throws -> PendingApproval {
        let response = try await client.requestApproval(deviceID: deviceID, action: action)
        let pending = try check(approvalID: response.approvalID, payload: response.payload)
        guard pending.action == action else {
            throw KeyboundError(.payloadMismatch, message: "the server's payload names another action")
        }
        return pending
    }

    /// Parses and checks a payload (purpose `approve`, this server, this device, not expired)
    /// and describes what it says, for the app's confirmation screen.
    /// - Throws: ``KeyboundError/payloadMismatch`` for anything else, or for bytes that are not
    ///   the canonical encoding.
    public func check(approvalID: String, payload bytes: Data) throws -> PendingApproval {
        let payload = try PayloadCheck.parse(
            bytes, purpose: .approve, serverID: serverID, deviceID: deviceID, now: clock.now())
        guard let action = payload.action else {
            throw KeyboundError(.payloadMismatch, message: "an approval payload without an action")
        }
        return PendingApproval(approvalID: approvalID, payloadBytes: bytes, payload: payload, action: action)
    }

    /// The approvals waiting for this device, newest first, each parsed and checked as
    /// ``check(approvalID:payload:)`` does: what the app lists and shows is what the payload
    /// says, never a description the server sent beside it (an approval another system asked
    /// for carries that system's name and message too, ``PendingApproval/requestedBy`` and
    /// ``PendingApproval/bindingMessage``, to show beside the action). Approvals for the user's
    /// other devices are left out (this device cannot sign them).
    /// - Throws: ``KeyboundError/payloadMismatch`` when a payload for this device names another
    ///   server or purpose or does not parse: the server is not to be trusted then, so nothing is
    ///   listed.
    public func pending() async throws -> [PendingApproval] {
        try await client.pendingApprovals().filter { $0.deviceID == deviceID }.compactMap { listed in
            // One that expired since the server listed it is simply gone.
            guard listed.expiresAt > clock.now() else { return nil }
            let checked = try check(approvalID: listed.approvalID, payload: listed.payload)
            return PendingApproval(
                approvalID: checked.approvalID, payloadBytes: checked.payloadBytes, payload: checked.payload,
                action: checked.action, bindingMessage: listed.bindingMessage, requestedBy: listed.clientName)
        }
    }

    /// Refuses `pending` on the user's behalf: the server records it `denied`, and it can never
    /// be approved afterwards. No verification is asked for: refusing only stops what the
    /// approval would have allowed.
    /// - Throws: ``KeyboundError`` with the server's `challenge_used` when it was decided
    ///   already, `challenge_expired` when it expired.
    @discardableResult
    public func deny(_ pending: PendingApproval) async throws -> ApprovalResponse {
        try await client.denyApproval(pending.approvalID)
    }

    /// Verifies the user afresh, signs the exact payload bytes and confirms with the server.
    /// - Parameter confirmed: from ``PendingApproval/confirm()``, after the app's confirmation screen.
    public func approve(_ confirmed: ConfirmedApproval) async throws -> ConfirmApprovalResponse {
        let signature = try await sign(confirmed)
        return try await client.confirmApproval(confirmed.pending.approvalID, signature: signature)
    }

    /// Verifies the user afresh and signs the payload (without sending it). The prompt's reason
    /// is ``PendingApproval/promptText``, with the whole recipient.
    /// - Throws: ``KeyboundError/payloadMismatch`` when the payload expired while the
    ///   confirmation screen was up, or belongs to another flow's server or device; verification
    ///   and key errors as the backends report them.
    public func sign(_ confirmed: ConfirmedApproval) async throws -> Data {
        let pending = confirmed.pending
        // Checked again: the confirmation screen may have stayed up past the payload's expiry.
        let payload = try PayloadCheck.parse(
            pending.payloadBytes, purpose: .approve, serverID: serverID, deviceID: deviceID, now: clock.now())
        guard payload == pending.payload else {
            throw KeyboundError(.payloadMismatch, message: "the payload no longer says what was confirmed")
        }
        let prompt = try VerificationPrompt(reason: pending.promptText, fallbackTitle: "")
        let verification = try await verifier.verify(policy, prompt: prompt)
        return try await keys.sign(pending.payloadBytes, with: keyName, verification: verification)
    }

    /// "Send 0.5 ETH to 0x12 a4c8 …": the action as the user must see it, the whole recipient in
    /// groups of four.
    public static func promptText(for action: ApprovalAction) -> String {
        switch action {
        case .transfer(let transfer):
            "Send \(transfer.amount.text) \(transfer.asset) to \(grouped(transfer.to))"
        }
    }

    /// The whole recipient in groups of four characters ("0x12 a4c8 b2e1 …"), never shortened:
    /// people compare the first and last few characters, and an address that agrees there is
    /// cheap to make.
    public static func grouped(_ recipient: String) -> String {
        var groups: [Substring] = []
        var rest = recipient[...]
        while !rest.isEmpty {
            groups.append(rest.prefix(4))
            rest = rest.dropFirst(4)
        }
        return groups.joined(separator: " ")
    }
}

/// An approval the server issued, parsed and checked on the device: what the app must show on
/// its own confirmation screen. Only ``TransactionApproval`` makes one, from the payload bytes.
public struct PendingApproval: Sendable, Hashable {
    /// The server's id for this approval.
    public let approvalID: String
    /// The exact bytes the key will sign.
    public let payloadBytes: Data
    /// The payload as parsed (and checked) on the device.
    public let payload: SigningPayload
    /// What is approved, parsed from ``payloadBytes``.
    public let action: ApprovalAction
    /// For an approval another system asked for (a payment service, through CIBA): the message
    /// it shows its user beside the request ("Order 4711"), so the user can tell this is the one
    /// they started. Show it with the action; it is the server's word, not part of the signed
    /// payload, so never show it *instead of* ``amount``, ``asset`` and ``groupedRecipient``.
    public let bindingMessage: String?
    /// For an approval another system asked for: that system's name, as the server's operator
    /// registered it (the server's word, like ``bindingMessage``).
    public let requestedBy: String?

    fileprivate init(
        approvalID: String, payloadBytes: Data, payload: SigningPayload, action: ApprovalAction,
        bindingMessage: String? = nil, requestedBy: String? = nil
    ) {
        self.approvalID = approvalID
        self.payloadBytes = payloadBytes
        self.payload = payload
        self.action = action
        self.bindingMessage = bindingMessage
        self.requestedBy = requestedBy
    }

    /// How much, exactly as the payload says it.
    public var amount: DecimalAmount {
        switch action {
        case .transfer(let transfer): transfer.amount
        }
    }

    /// The asset code, as the payload says it.
    public var asset: String {
        switch action {
        case .transfer(let transfer): transfer.asset
        }
    }

    /// The whole recipient, exactly as the payload says it.
    public var recipient: String {
        switch action {
        case .transfer(let transfer): transfer.to
        }
    }

    /// The whole recipient in groups of four characters: what the confirmation screen shows.
    public var groupedRecipient: String { TransactionApproval.grouped(recipient) }

    /// "Send 0.5 ETH to 0x12 a4c8 …": also the system prompt's reason (which Face ID shows only
    /// after a failed match).
    public var promptText: String { TransactionApproval.promptText(for: action) }

    /// When the server stops accepting the signature.
    public var expires: Date { payload.expires }

    /// Records that the user confirmed this exact approval on the app's own screen. Call it
    /// from that screen's confirm button, never before the screen was shown.
    /// - Returns: the only value ``TransactionApproval/approve(_:)`` and
    ///   ``TransactionApproval/sign(_:)`` accept.
    public func confirm() -> ConfirmedApproval { ConfirmedApproval(self) }
}

/// An approval the user confirmed on the app's own screen. Only ``PendingApproval/confirm()``
/// makes one, so no code path reaches the key without that step.
public struct ConfirmedApproval: Sendable, Hashable {
    /// What the user confirmed.
    public let pending: PendingApproval

    fileprivate init(_ pending: PendingApproval) { self.pending = pending }
}
