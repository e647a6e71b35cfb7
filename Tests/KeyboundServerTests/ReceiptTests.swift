import Foundation
import KeyboundCrypto
import KeyboundVerifier
import KeyboundWire
import Testing

@testable import KeyboundServer

/// Receipts of approvals confirmed through the live server: what they carry, that they verify
/// offline with KeyboundVerifier, that every change is caught by the step that must catch it, and
/// that only an approved approval has one.
@Suite("Approval receipts")
struct ReceiptTests {
    /// An approval confirmed through the server, and what the test knows of it.
    struct Approved {
        let fixture: OAuthFixture
        let tokens: TokenResponse
        let deviceKey: P256SigningKey
        let deviceID: String
        let approvalID: String
        let action: ApprovalAction
        let payload: Data
        let signature: Data
        let receipt: String
    }

    /// alice binds a device, asks for an approval of `action`, her device signs it, and the
    /// approval is read back.
    static func approve(_ fixture: OAuthFixture, action: ApprovalAction? = nil) async throws -> Approved {
        let action = try action ?? transfer("0.5", asset: "ETH", to: "0x12ab34cd56ef")
        let (tokens, key, deviceID) = try await fixture.client.userWithDevice("alice")
        let created = try await fixture.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: action),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let signature = try sign(created.payload, with: key)
        let confirm = try await fixture.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [created.approvalID],
            token: tokens.accessToken)
        #expect(confirm.status == 200, "\(confirm.text)")
        let status = try await approval(fixture, created.approvalID, tokens)
        #expect(status.status == .approved)
        return Approved(
            fixture: fixture, tokens: tokens, deviceKey: key, deviceID: deviceID,
            approvalID: created.approvalID,
            action: action, payload: created.payload, signature: signature,
            receipt: try #require(status.receipt, "an approved approval has a receipt"))
    }

    static func approval(_ fixture: OAuthFixture, _ id: String, _ tokens: TokenResponse) async throws
        -> ApprovalResponse
    {
        try await fixture.client.send(API.approvalStatus, parameters: [id], token: tokens.accessToken)
            .decode(ApprovalResponse.self)
    }

    static func verifier(_ keys: JWKS) -> ReceiptVerifier {
        ReceiptVerifier(issuer: testIssuer, serverID: "keybound-test", keys: keys)
    }

    /// The step at which `verify` refuses `receipt`, or nil when it accepts it.
    static func failingStep(_ receipt: String, _ keys: JWKS) -> ReceiptVerificationError.Step? {
        do {
            _ = try verifier(keys).verify(receipt)
            return nil
        } catch let error as ReceiptVerificationError {
            return error.step
        } catch {
            return nil
        }
    }

    @Test(
        "an approved approval's receipt carries what DESIGN.md says and verifies offline",
        arguments: Engine.all)
    func receiptVerifies(engine: Engine) async throws {
        let approved = try await Self.approve(try OAuthFixture(.live, engine: engine))
        let keys = try await approved.fixture.keys()
        let jws = try CompactJWS(approved.receipt)
        #expect(jws.algorithm == "ES256" && jws.type == "keybound-receipt+jwt")
        #expect(keys.keyIDs.contains(try #require(jws.keyID)), "the kid of the access tokens' JWK Set")

        // The claims, member by member.
        let claims = try jws.claims()
        guard case .object(let members) = claims, case .object(let approval)? = claims[member: "approval"],
            case .object(let device)? = claims[member: "device"]
        else { throw TestFailure("claims, approval and device are objects") }
        #expect(
            members.map(\.name) == ["iss", "sub", "iat", "jti", "approval", "device", "payload", "signature"])
        #expect(approval.map(\.name) == ["id", "status", "decided_at", "action"])
        #expect(device.map(\.name) == ["id", "jwk", "attested"])
        #expect(claims[member: "iss"]?.stringValue == testIssuer)
        #expect(claims[member: "sub"]?.stringValue == approved.tokens.userID)
        #expect(claims[member: "jti"]?.stringValue == approved.approvalID)
        #expect(
            claims[member: "iat"]?.integerValue
                == Int64(approved.fixture.test.clock.now.timeIntervalSince1970))
        #expect(claims[member: "approval"]?[member: "status"]?.stringValue == "approved")
        #expect(claims[member: "device"]?[member: "attested"] == .bool(false))
        #expect(
            claims[member: "payload"]?.stringValue == Base64URL.encode(approved.payload), "the exact bytes")
        #expect(claims[member: "signature"]?.stringValue == Base64URL.encode(approved.signature))
        let jwk = try ECPublicJWK(json: try #require(claims[member: "device"]?[member: "jwk"]))
        #expect(jwk.x963 == approved.deviceKey.publicKey.x963Representation)

        let verified = try Self.verifier(keys).verify(approved.receipt)
        #expect(verified.action == approved.action && verified.approvalID == approved.approvalID)
        #expect(verified.deviceID == approved.deviceID && verified.userID == approved.tokens.userID)
        #expect(verified.serverID == "keybound-test" && verified.issuer == testIssuer)
        #expect(verified.payload == approved.payload && !verified.deviceAttested)
        #expect(verified.bindingMessage == nil)
    }

    @Test("the receipt is made once: every read returns the same bytes, after a key rotation too")
    func receiptIsStored() async throws {
        let approved = try await Self.approve(try OAuthFixture(.live))
        let fixture = approved.fixture
        fixture.test.clock.advance(by: 5)
        _ = try fixture.administration.rotateKey()
        fixture.test.clock.advance(by: 600)  // the new key signs now; alice's access token still lives
        let again = try await Self.approval(fixture, approved.approvalID, approved.tokens)
        #expect(again.receipt == approved.receipt)
        // The receipt's key is no longer the one that signs, and stays published as long as tokens it
        // signed live: a verifier that keeps old JWK Sets keeps verifying old receipts.
        #expect(try CompactJWS(approved.receipt).keyID != fixture.administration.keys().first?.kid)
    }

    @Test("a changed byte anywhere in the header, the claims or the issuer's signature fails step 1")
    func everyChangedByteFailsStepOne() async throws {
        let approved = try await Self.approve(try OAuthFixture(.live))
        let keys = try await approved.fixture.keys()
        let parts = approved.receipt.split(separator: ".").map(String.init)
        var positions = 0
        for segment in 0..<3 {
            let bytes = [UInt8](try #require(Base64URL.decode(parts[segment])))
            for index in bytes.indices {
                var changed = bytes
                changed[index] ^= 0x01
                var tampered = parts
                tampered[segment] = Base64URL.encode(Data(changed))
                let step = Self.failingStep(tampered.joined(separator: "."), keys)
                #expect(
                    step == .issuerSignature, "segment \(segment), byte \(index): \(String(describing: step))"
                )
                positions += 1
            }
        }
        #expect(positions > 1000)
    }

    /// Claims the issuer itself signed (here: a key added to the JWK Set) but the device did not:
    /// a changed payload, device signature or device key fails step 2, whatever signs the JWS.
    @Test("what the device did not sign fails step 2, even under a valid issuer signature")
    func deviceSignatureIsStepTwo() async throws {
        let approved = try await Self.approve(try OAuthFixture(.live))
        let forger = try ReceiptForger(published: try await approved.fixture.keys())
        let claims = try ReceiptClaims(json: try CompactJWS(approved.receipt).claims())
        #expect(
            Self.failingStep(try forger.sign(claims), forger.keys) == nil, "the re-signed receipt verifies")

        for index in approved.payload.indices {
            var payload = approved.payload
            payload[index] ^= 0x01
            let step = Self.failingStep(try forger.sign(claims) { $0.payload = payload }, forger.keys)
            #expect(step == .deviceSignature, "payload byte \(index)")
        }
        for index in approved.signature.indices {
            var signature = approved.signature
            signature[index] ^= 0x01
            let step = Self.failingStep(try forger.sign(claims) { $0.signature = signature }, forger.keys)
            #expect(step == .deviceSignature, "signature byte \(index)")
        }
        let other = try ECPublicJWK(x963: P256SigningKey().publicKey.x963Representation)
        #expect(
            Self.failingStep(try forger.sign(claims) { $0.deviceKey = other }, forger.keys)
                == .deviceSignature)
        for index in 0..<32 {
            var x = [UInt8](claims.deviceKey.x)
            x[index] ^= 0x01
            let moved = try ECPublicJWK(x963: Data([0x04] + x) + claims.deviceKey.y)
            let step = Self.failingStep(try forger.sign(claims) { $0.deviceKey = moved }, forger.keys)
            #expect(step == .deviceSignature, "jwk x byte \(index)")
        }
    }

    @Test("a receipt signed by a key outside the JWK Set fails step 1, under a published kid too")
    func unpublishedKeyFailsStepOne() async throws {
        let approved = try await Self.approve(try OAuthFixture(.live))
        let keys = try await approved.fixture.keys()
        let claims = try ReceiptClaims(json: try CompactJWS(approved.receipt).claims())
        let outsider = try ReceiptForger(published: JWKS(JWKSet(keys: [])))
        #expect(Self.failingStep(try outsider.sign(claims), keys) == .issuerSignature)
        let published = try #require(keys.keyIDs.first)
        #expect(Self.failingStep(try outsider.sign(claims, kid: published), keys) == .issuerSignature)
    }

    /// The device really signed a payload, but not the one the claims describe.
    @Test(
        "a payload that names another action, server or device than the claims fails step 3",
        arguments: ["action", "server", "device", "purpose"])
    func payloadMismatchIsStepThree(_ field: String) async throws {
        let approved = try await Self.approve(try OAuthFixture(.live))
        let forger = try ReceiptForger(published: try await approved.fixture.keys())
        let claims = try ReceiptClaims(json: try CompactJWS(approved.receipt).claims())
        let original = try SigningPayload(parsing: approved.payload)
        let other = try SigningPayload(
            purpose: field == "purpose" ? .login : .approve,
            server: field == "server" ? "elsewhere" : original.server,
            device: field == "device" ? "dev_other" : original.device, challenge: original.challenge,
            expires: original.expires,
            action: field == "purpose" ? nil : field == "action" ? try transfer("500") : original.action)
        let signature = try sign(other.bytes, with: approved.deviceKey)
        let signed = try forger.sign(claims) {
            $0.payload = other.bytes
            $0.signature = signature
        }
        #expect(Self.failingStep(signed, forger.keys) == .payloadMatch)
    }

    @Test("a pending, failed or expired approval has no receipt", arguments: Engine.all)
    func onlyApprovedHasAReceipt(engine: Engine) async throws {
        let fixture = try OAuthFixture(.live, engine: engine)
        let (tokens, _, deviceID) = try await fixture.client.userWithDevice("alice")
        func create() async throws -> ApprovalChallengeResponse {
            try await fixture.client.send(
                API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
                token: tokens.accessToken
            ).decode(ApprovalChallengeResponse.self)
        }
        let pending = try await create()
        let read = try await fixture.client.send(
            API.approvalStatus, parameters: [pending.approvalID], token: tokens.accessToken)
        #expect(try JSON.parse(read.body)[member: "receipt"] == .null, "receipt is null while pending")
        #expect(try read.decode(ApprovalResponse.self).status == .pending)

        let failed = try await create()
        let wrong = try sign(failed.payload, with: P256SigningKey())
        let refused = try await fixture.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: wrong), parameters: [failed.approvalID],
            token: tokens.accessToken)
        #expect(refused.status == 401 || refused.status == 403, "\(refused.text)")
        let failedStatus = try await Self.approval(fixture, failed.approvalID, tokens)
        #expect(failedStatus.status == .failed && failedStatus.receipt == nil)

        let expiring = try await create()
        fixture.test.clock.advance(by: 301)
        let expired = try await Self.approval(fixture, expiring.approvalID, tokens)
        #expect(expired.status == .expired && expired.receipt == nil)
        #expect(try await Self.approval(fixture, pending.approvalID, tokens).receipt == nil)
    }

    @Test("without --issuer an approved approval has no receipt: nothing publishes keys to check it")
    func noIssuerNoReceipt() async throws {
        let live = try TestServer()
        let (tokens, key, deviceID) = try await live.client.userWithDevice("alice")
        let created = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let confirm = try await live.client.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: sign(created.payload, with: key)),
            parameters: [created.approvalID], token: tokens.accessToken)
        #expect(confirm.status == 200)
        let status = try await live.client.send(
            API.approvalStatus, parameters: [created.approvalID], token: tokens.accessToken
        ).decode(ApprovalResponse.self)
        #expect(status.status == .approved && status.receipt == nil)
    }
}

/// Signs receipt claims with a key of its own, which its ``keys`` publish beside the issuer's:
/// claims the issuer's signature cannot tell from real ones, to reach steps 2 and 3.
struct ReceiptForger {
    let key: P256SigningKey
    let kid: String
    /// The issuer's keys and this one.
    let keys: JWKS

    init(published: JWKS) throws {
        key = try P256SigningKey()
        var jwk = try ECPublicJWK(x963: key.publicKey.x963Representation, alg: "ES256", use: "sig")
        kid = jwk.thumbprint
        jwk.kid = kid
        keys = JWKS(JWKSet(keys: published.keySet.keys + [jwk]))
    }

    /// Signs `claims`, changed by `change`, under `kid` (its own unless given).
    func sign(_ claims: ReceiptClaims, kid: String? = nil, _ change: (inout ReceiptClaims) -> Void = { _ in })
        throws -> String
    {
        var claims = claims
        change(&claims)
        let header = JSONValue.object([
            JSONMember("alg", .string("ES256")), JSONMember("typ", .string(ReceiptClaims.type)),
            JSONMember("kid", .string(kid ?? self.kid)),
        ])
        return try ES256.sign(header: header, payload: JSON.serialize(claims.json), with: key)
    }
}
