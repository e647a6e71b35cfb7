import Foundation
import KeyboundWire

extension Harness {
    /// Every request and response body of Server API v1 (the server reads requests, the SDK reads
    /// responses). Input: one byte choosing the message type, then the JSON body. A message that
    /// decodes must encode to a body that decodes to the same message.
    static let wireMessages = Harness(
        name: "wire-messages",
        covers: "KeyboundWire: every WireMessage's init(json:) (bodies), ApprovalAction, round trips"
    ) { data in
        var input = FuzzInput(data)
        let type = wireMessageTypes[Int(input.byte()) % wireMessageTypes.count]
        roundTrip(type, input.rest())
    }

    /// The decoders under test: add a message type here when you add one.
    static let wireMessageTypes: [any (WireMessage & Hashable).Type] = [
        HealthResponse.self, CreateAccountRequest.self, CreateAccountResponse.self,
        PasswordLoginRequest.self, RefreshRequest.self, TokenResponse.self, MeResponse.self,
        BindDeviceRequest.self, BindDeviceResponse.self, DeviceInfo.self, DeviceListResponse.self,
        ChallengeRequest.self, ChallengeResponse.self, DeviceLoginRequest.self,
        CreateApprovalRequest.self, ApprovalChallengeResponse.self, ConfirmApprovalRequest.self,
        ConfirmApprovalResponse.self, ApprovalResponse.self, AuditEvent.self, AuditListResponse.self,
        Problem.self, ApprovalActionMessage.self,
    ]
}

private func roundTrip<Message: WireMessage & Hashable>(_ type: Message.Type, _ body: Data) {
    guard let message = try? Message(jsonData: body) else { return }
    expect(
        (try? Message(jsonData: message.jsonData)) == message,
        "\(Message.self) does not decode its own encoding \(String(decoding: message.jsonData, as: UTF8.self))"
    )
}

/// An approval action as a message of its own, so it is fuzzed like the bodies that embed it.
private struct ApprovalActionMessage: WireMessage, Hashable {
    static let schemaName = "TransferAction"
    let action: ApprovalAction
    init(json: JSONValue) throws(WireFailure) { action = try ApprovalAction(json: json) }
    var json: JSONValue { action.json }
}
