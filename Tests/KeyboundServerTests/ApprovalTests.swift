import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Transaction approval")
struct ApprovalTests {
    @Test(arguments: Engine.all) func approveATransferOnce(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        let action = try transfer("0.5", asset: "ETH", to: "0x12ab34cd56ef")
        let created = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: action),
            token: tokens.accessToken)
        #expect(created.status == 201)
        let approval = try created.decode(ApprovalChallengeResponse.self)

        // The device shows what it signs, parsed from the payload bytes.
        let payload = try SigningPayload(parsing: approval.payload)
        #expect(payload.purpose == .approve)
        #expect(payload.device == deviceID)
        #expect(payload.server == "keybound-test")
        #expect(payload.action == action)
        #expect(Int(payload.expires.timeIntervalSince(live.clock.now)) == 300)

        let pending = try await live.client.send(
            API.approvalStatus, parameters: [approval.approvalID], token: tokens.accessToken)
        #expect(try pending.decode(ApprovalResponse.self).status == .pending)

        let signature = try sign(approval.payload, with: key)
        let confirm = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [approval.approvalID],
            token: tokens.accessToken)
        #expect(confirm.status == 200)
        #expect(try confirm.decode(ConfirmApprovalResponse.self).status == .approved)

        let status = try await live.client.send(
            API.approvalStatus, parameters: [approval.approvalID], token: tokens.accessToken
        )
        .decode(ApprovalResponse.self)
        #expect(status.status == .approved)
        #expect(status.action == action)
        #expect(status.decidedAt != nil)

        let replay = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [approval.approvalID],
            token: tokens.accessToken)
        #expect(replay.status == 409)
        #expect(replay.problem?.code == .challengeUsed)
    }

    @Test(arguments: ["amount", "recipient", "server", "asset", "purpose"], Engine.all)
    func tamperedPayloadIsRefused(_ field: String, engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        let created = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let original = try SigningPayload(parsing: created.payload)
        let tampered: SigningPayload
        switch field {
        case "amount":
            tampered = try SigningPayload(
                purpose: .approve, server: original.server, device: deviceID, challenge: original.challenge,
                expires: original.expires, action: transfer("500"))
        case "recipient":
            tampered = try SigningPayload(
                purpose: .approve, server: original.server, device: deviceID, challenge: original.challenge,
                expires: original.expires, action: transfer(to: "0xattacker"))
        case "asset":
            tampered = try SigningPayload(
                purpose: .approve, server: original.server, device: deviceID, challenge: original.challenge,
                expires: original.expires, action: transfer(asset: "BTC"))
        case "purpose":
            tampered = try SigningPayload(
                purpose: .login, server: original.server, device: deviceID, challenge: original.challenge,
                expires: original.expires, action: nil)
        default:
            tampered = try SigningPayload(
                purpose: .approve, server: "other-server", device: deviceID, challenge: original.challenge,
                expires: original.expires, action: original.action)
        }
        let reply = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(signature: sign(tampered.bytes, with: key)),
            parameters: [created.approvalID], token: tokens.accessToken)
        #expect(reply.status == 401)
        #expect(reply.problem?.code == .signatureInvalid)
        // The failed attempt used the approval up: not even the right signature works now.
        let retry = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(signature: sign(created.payload, with: key)),
            parameters: [created.approvalID], token: tokens.accessToken)
        #expect(retry.status == 409)
        let status = try await live.client.send(
            API.approvalStatus, parameters: [created.approvalID], token: tokens.accessToken)
        #expect(try status.decode(ApprovalResponse.self).status == .failed)
    }

    @Test(arguments: Engine.all) func anotherUsersApprovalCannotBeConfirmed(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (alice, aliceKey, aliceDevice) = try await live.client.userWithDevice("alice")
        let (bob, _, _) = try await live.client.userWithDevice("bob")
        let created = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: aliceDevice, action: transfer()),
            token: alice.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let signature = try sign(created.payload, with: aliceKey)
        let byBob = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [created.approvalID],
            token: bob.accessToken)
        #expect(byBob.status == 404)
        #expect(
            try await live.client.send(
                API.approvalStatus, parameters: [created.approvalID], token: bob.accessToken
            ).status
                == 404)
        // Still pending for alice.
        let confirm = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [created.approvalID],
            token: alice.accessToken)
        #expect(confirm.status == 200)
    }

    @Test(arguments: Engine.all) func approvalSignedByAnotherDeviceOfTheSameUserIsRefused(engine: Engine)
        async throws
    {
        let live = try TestServer(engine: engine)
        let (phone, _, phoneDevice) = try await live.client.userWithDevice("alice", clientID: "phone")
        let laptop = try await live.client.login("alice", clientID: "laptop")
        let (laptopKey, _) = try await live.client.bindDevice(laptop.accessToken)
        let created = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: phoneDevice, action: transfer()),
            token: phone.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let reply = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(signature: sign(created.payload, with: laptopKey)),
            parameters: [created.approvalID],
            token: phone.accessToken)
        #expect(reply.status == 401)
    }

    @Test(arguments: Engine.all) func approvalsExpireAfterFiveMinutes(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        let created = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        live.clock.advance(by: 301)
        let session = try await live.client.login("alice")
        let reply = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(signature: sign(created.payload, with: key)),
            parameters: [created.approvalID], token: session.accessToken)
        #expect(reply.status == 410)
        #expect(reply.problem?.code == .challengeExpired)
        let status = try await live.client.send(
            API.approvalStatus, parameters: [created.approvalID], token: session.accessToken)
        #expect(try status.decode(ApprovalResponse.self).status == .expired)
    }

    @Test(arguments: Engine.all) func invalidActionsAreRejected(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (tokens, _, deviceID) = try await live.client.userWithDevice("alice")
        let bodies = [
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":0.5,"asset":"ETH","to":"0x1"}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":"1e3","asset":"ETH","to":"0x1"}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":"0","asset":"ETH","to":"0x1"}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":"01","asset":"ETH","to":"0x1"}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":"1","asset":"eth","to":"0x1"}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":"1","asset":"ETH","to":"0x1 "}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"mint","amount":"1","asset":"ETH","to":"0x1"}}"#,
            #"{"device_id":"\#(deviceID)","action":{"type":"transfer","amount":"1","asset":"ETH","to":"0x1","memo":"x"}}"#,
        ]
        for body in bodies {
            let reply = try await live.client.send(
                API.createApproval, raw: Data(body.utf8), token: tokens.accessToken)
            #expect(reply.status == 400, "\(body)")
        }
    }
}
