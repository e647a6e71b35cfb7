import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The user's side of approvals: listing what waits (`GET /v1/approvals?status=pending`) and
/// refusing it (`POST /v1/approvals/{id}/deny`).
@Suite("Approvals: pending and denied")
struct ApprovalDecisionTests {
    @Test(arguments: Engine.all) func theUserSeesOnlyHerOwnPendingApprovalsWithTheirPayloads(engine: Engine)
        async throws
    {
        let live = try TestServer(engine: engine)
        let (alice, aliceKey, aliceDevice) = try await live.client.userWithDevice("alice")
        let (bob, _, bobDevice) = try await live.client.userWithDevice("bob")
        let first = try await request(live, alice.accessToken, aliceDevice, try transfer("0.5"))
        live.clock.advance(by: 1)
        let second = try await request(live, alice.accessToken, aliceDevice, try transfer("2"))
        _ = try await request(live, bob.accessToken, bobDevice, try transfer("7"))
        // One decided already: it is no longer pending.
        live.clock.advance(by: 1)
        let decided = try await request(live, alice.accessToken, aliceDevice, try transfer("9"))
        let confirmed = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: sign(decided.payload, with: aliceKey)),
            parameters: [decided.approvalID], token: alice.accessToken)
        #expect(confirmed.status == 200)

        let listed = try await pending(live, alice.accessToken)
        // Newest first; bob's is not there; each carries the exact bytes to sign.
        #expect(listed.map(\.approvalID) == [second.approvalID, first.approvalID])
        #expect(listed.map(\.payload) == [second.payload, first.payload])
        #expect(listed.allSatisfy { $0.deviceID == aliceDevice })
        #expect(try await pending(live, bob.accessToken).count == 1)

        // Expired ones drop out: the first at 300 s, the second a second later.
        live.clock.advance(by: 298)
        #expect(try await pending(live, alice.accessToken).map(\.approvalID) == [second.approvalID])
        live.clock.advance(by: 1)
        #expect(try await pending(live, alice.accessToken).isEmpty)
    }

    @Test func aRevokedDevicesApprovalsAreNotListed() async throws {
        let live = try TestServer()
        let (tokens, _, deviceID) = try await live.client.userWithDevice("alice")
        _ = try await request(live, tokens.accessToken, deviceID, try transfer())
        #expect(try await pending(live, tokens.accessToken).count == 1)
        let session = try await live.client.login("alice")
        let revoked = try await live.client.send(
            API.revokeDevice, parameters: [deviceID], token: session.accessToken)
        #expect(revoked.status == 204)
        #expect(try await pending(live, session.accessToken).isEmpty)
    }

    @Test func theListNeedsStatusPendingAndASession() async throws {
        let live = try TestServer()
        let (tokens, _, _) = try await live.client.userWithDevice("alice")
        for query in ["", "status=approved", "status=Pending", "status=pending&status=pending"] {
            let reply = try await live.client.send(API.listApprovals, query: query, token: tokens.accessToken)
            #expect(reply.status == 400, "\(query)")
            #expect(reply.problem?.code == .invalidRequest, "\(query)")
        }
        let anonymous = try await live.client.send(API.listApprovals, query: "status=pending", token: nil)
        #expect(anonymous.status == 401)
    }

    @Test(arguments: Engine.all) func aDeniedApprovalCanNeverBeApproved(engine: Engine) async throws {
        // With an issuer, so that an approval would get a receipt: a denied one has none.
        let live = try TestServer(engine: engine) { $0.issuer = testIssuer }
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        let action = try transfer("0.5")
        let created = try await request(live, tokens.accessToken, deviceID, action)
        let denied = try await live.client.send(
            API.denyApproval, parameters: [created.approvalID], token: tokens.accessToken)
        #expect(denied.status == 200)
        let answer = try denied.decode(ApprovalResponse.self)
        #expect(answer.status == .denied)
        #expect(answer.action == action)
        #expect(answer.decidedAt == Date(milliseconds: live.clock.now.milliseconds))
        #expect(answer.receipt == nil)

        // The device's valid signature comes too late: decided is decided.
        let confirm = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: sign(created.payload, with: key)),
            parameters: [created.approvalID], token: tokens.accessToken)
        #expect(confirm.status == 409)
        #expect(confirm.problem?.code == .challengeUsed)
        let again = try await live.client.send(
            API.denyApproval, parameters: [created.approvalID], token: tokens.accessToken)
        #expect(again.status == 409)
        let status = try await live.client.send(
            API.approvalStatus, parameters: [created.approvalID], token: tokens.accessToken
        ).decode(ApprovalResponse.self)
        #expect(status.status == .denied)
        #expect(status.receipt == nil)
        #expect(try await pending(live, tokens.accessToken).isEmpty)
        let audit = try await live.client.send(API.audit, token: tokens.accessToken)
            .decode(AuditListResponse.self)
        #expect(audit.events.contains { $0.type == .approvalDenied && $0.deviceID == deviceID })
    }

    @Test(arguments: Engine.all) func onlyThePendingApprovalOfTheUserCanBeDenied(engine: Engine) async throws
    {
        let live = try TestServer(engine: engine)
        let (alice, aliceKey, aliceDevice) = try await live.client.userWithDevice("alice")
        let (bob, _, _) = try await live.client.userWithDevice("bob")
        let created = try await request(live, alice.accessToken, aliceDevice, try transfer())
        // Bob cannot deny alice's approval, nor learn that it exists.
        let byBob = try await live.client.send(
            API.denyApproval, parameters: [created.approvalID], token: bob.accessToken)
        #expect(byBob.status == 404)
        for id in ["apr_unknown", "not%20an%20id"] {
            let unknown = try await live.client.send(
                API.denyApproval, parameters: [id], token: alice.accessToken)
            #expect(unknown.status == 404, "\(id)")
        }
        #expect(
            try await live.client.send(API.denyApproval, parameters: [created.approvalID], token: nil).status
                == 401)
        // Approved: too late to deny.
        let approved = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: sign(created.payload, with: aliceKey)),
            parameters: [created.approvalID], token: alice.accessToken)
        #expect(approved.status == 200)
        let late = try await live.client.send(
            API.denyApproval, parameters: [created.approvalID], token: alice.accessToken)
        #expect(late.status == 409)
        // Expired: gone.
        let expiring = try await request(live, alice.accessToken, aliceDevice, try transfer())
        live.clock.advance(by: 300)
        let session = try await live.client.login("alice")
        let expired = try await live.client.send(
            API.denyApproval, parameters: [expiring.approvalID], token: session.accessToken)
        #expect(expired.status == 410)
        #expect(expired.problem?.code == .challengeExpired)
    }

    @Test(arguments: Engine.all) func ofAConfirmAndADenyRacingOneDecides(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        for _ in 0..<5 {
            let created = try await request(live, tokens.accessToken, deviceID, try transfer())
            let signature = try sign(created.payload, with: key)
            async let confirm = live.client.send(
                API.confirmApproval, ConfirmApprovalRequest(signature: signature),
                parameters: [created.approvalID], token: tokens.accessToken)
            async let deny = live.client.send(
                API.denyApproval, parameters: [created.approvalID], token: tokens.accessToken)
            let statuses = try await [confirm.status, deny.status]
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 409 }.count == 1, "\(statuses)")
            let final = try await live.client.send(
                API.approvalStatus, parameters: [created.approvalID], token: tokens.accessToken
            ).decode(ApprovalResponse.self)
            #expect((final.status == .approved) == (statuses[0] == 200))
            if final.status == .denied { #expect(final.receipt == nil) }
        }
    }

    private func request(_ live: TestServer, _ token: String, _ deviceID: String, _ action: ApprovalAction)
        async throws -> ApprovalChallengeResponse
    {
        try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: action), token: token
        ).decode(ApprovalChallengeResponse.self)
    }

    private func pending(_ live: TestServer, _ token: String) async throws -> [PendingApprovalInfo] {
        let reply = try await live.client.send(API.listApprovals, query: "status=pending", token: token)
        #expect(reply.status == 200)
        return try reply.decode(PendingApprovalListResponse.self).approvals
    }
}
