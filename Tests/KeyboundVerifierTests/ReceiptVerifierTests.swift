import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@testable import KeyboundVerifier

/// The three steps of a receipt's verification, offline, on receipts made here: an issuer key in
/// the JWK Set, a device key that signs the payload, and claims changed one thing at a time.
@Suite("Receipt verification")
struct ReceiptVerifierTests {
    static let issuer = "https://login.example.com"
    static let server = "keybound"

    /// An issuer and a device, and receipts of what the device signed.
    struct Fixture {
        let issuerKey: P256SigningKey
        let kid: String
        let keys: JWKS
        let deviceKey: P256SigningKey
        let action: ApprovalAction

        init() throws {
            issuerKey = try P256SigningKey()
            var jwk = try ECPublicJWK(x963: issuerKey.publicKey.x963Representation, alg: "ES256", use: "sig")
            kid = jwk.thumbprint
            jwk.kid = kid
            keys = try JWKS(json: JSON.serialize(JWKSet(keys: [jwk]).json))
            deviceKey = try P256SigningKey()
            action = .transfer(
                try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: "0x12ab34cd56ef"))
        }

        /// The payload the server issues for `device`.
        func payload(
            server: String = ReceiptVerifierTests.server, device: String = "dev_1",
            action: ApprovalAction? = nil
        )
            throws -> Data
        {
            try SigningPayload(
                purpose: .approve, server: server, device: device, challenge: Data(repeating: 7, count: 32),
                expires: Date(timeIntervalSince1970: 1_800_000_300), action: action ?? self.action
            ).bytes
        }

        /// The claims of an approval of `payload`, signed by the device.
        func claims(payload: Data? = nil, bindingMessage: String? = nil) throws -> ReceiptClaims {
            let payload = try payload ?? self.payload()
            return ReceiptClaims(
                issuer: ReceiptVerifierTests.issuer, subject: "usr_1", issuedAt: 1_800_000_010,
                approvalID: "apr_1",
                decidedAt: Date(timeIntervalSince1970: 1_800_000_010), action: action,
                bindingMessage: bindingMessage, deviceID: "dev_1",
                deviceKey: try ECPublicJWK(x963: deviceKey.publicKey.x963Representation), attested: true,
                payload: payload, signature: try deviceKey.signature(for: payload).derRepresentation)
        }

        /// The receipt JWS: `claims` (or their JSON, changed) under `header`.
        func receipt(_ claims: JSONValue, header: [JSONMember]? = nil) throws -> String {
            let header =
                header ?? [
                    JSONMember("alg", .string("ES256")), JSONMember("typ", .string("keybound-receipt+jwt")),
                    JSONMember("kid", .string(kid)),
                ]
            return try CompactJWS.serialize(header: .object(header), payload: JSON.serialize(claims)) {
                try issuerKey.signature(for: $0).rawRepresentation
            }
        }

        var verifier: ReceiptVerifier {
            ReceiptVerifier(
                issuer: ReceiptVerifierTests.issuer, serverID: ReceiptVerifierTests.server, keys: keys)
        }

        /// The step that refuses `receipt`, or nil when it verifies.
        func failingStep(_ receipt: String) -> ReceiptVerificationError.Step? {
            do {
                _ = try verifier.verify(receipt)
                return nil
            } catch let error as ReceiptVerificationError {
                return error.step
            } catch {
                Issue.record("not a ReceiptVerificationError: \(error)")
                return nil
            }
        }
    }

    /// `claims` with member `name` of the object at `path` replaced (nil: removed).
    static func changing(_ claims: JSONValue, _ path: [String], _ name: String, to value: JSONValue?)
        -> JSONValue
    {
        guard case .object(var members) = claims else { return claims }
        if let first = path.first {
            if let index = members.firstIndex(where: { $0.name == first }) {
                members[index] = JSONMember(
                    first, changing(members[index].value, Array(path.dropFirst()), name, to: value))
            }
            return .object(members)
        }
        if let index = members.firstIndex(where: { $0.name == name }) {
            if let value { members[index] = JSONMember(name, value) } else { members.remove(at: index) }
        } else if let value {
            members.append(JSONMember(name, value))
        }
        return .object(members)
    }

    @Test("a receipt verifies and reads as it was written, binding message included")
    func verifies() throws {
        let fixture = try Fixture()
        let approval = try fixture.verifier.verify(
            try fixture.receipt(fixture.claims(bindingMessage: "Pay 0.5 ETH, order 42").json))
        #expect(
            approval.action == fixture.action && approval.approvalID == "apr_1" && approval.userID == "usr_1")
        #expect(approval.deviceID == "dev_1" && approval.deviceAttested && approval.serverID == "keybound")
        #expect(approval.bindingMessage == "Pay 0.5 ETH, order 42" && approval.issuer == Self.issuer)
        #expect(approval.decidedAt == Date(timeIntervalSince1970: 1_800_000_010))
        #expect(approval.payload == (try fixture.payload()))
    }

    @Test("step 1: another issuer, typ, alg or key, and claims that are not a receipt's")
    func stepOne() throws {
        let fixture = try Fixture()
        let claims = try fixture.claims().json
        let header = { (alg: String, typ: String, kid: String) in
            [
                JSONMember("alg", .string(alg)), JSONMember("typ", .string(typ)),
                JSONMember("kid", .string(kid)),
            ]
        }
        let refused: [(String, String)] = [
            (
                "iss",
                try fixture.receipt(Self.changing(claims, [], "iss", to: .string("https://evil.example")))
            ),
            ("typ", try fixture.receipt(claims, header: header("ES256", "at+jwt", fixture.kid))),
            (
                "alg",
                try fixture.receipt(claims, header: header("ES384", "keybound-receipt+jwt", fixture.kid))
            ),
            ("kid", try fixture.receipt(claims, header: header("ES256", "keybound-receipt+jwt", "other"))),
            (
                "status",
                try fixture.receipt(Self.changing(claims, ["approval"], "status", to: .string("pending")))
            ),
            ("jti", try fixture.receipt(Self.changing(claims, [], "jti", to: .string("apr_2")))),
            ("missing payload", try fixture.receipt(Self.changing(claims, [], "payload", to: nil))),
            (
                "unknown member",
                try fixture.receipt(Self.changing(claims, ["device"], "name", to: .string("x")))
            ),
            ("jwk", try fixture.receipt(Self.changing(claims, ["device"], "jwk", to: .string("x")))),
            ("not a JWS", "a.b"),
        ]
        for (label, receipt) in refused {
            #expect(fixture.failingStep(receipt) == .issuerSignature, "\(label)")
        }
        let error = #expect(throws: ReceiptVerificationError.self) {
            try fixture.verifier.verify(refused[0].1)
        }
        #expect(error?.description.hasPrefix("step 1 (the issuer's signature) failed: wrongIssuer") == true)
    }

    @Test("step 2: a signature that is not the device's over the payload")
    func stepTwo() throws {
        let fixture = try Fixture()
        let claims = try fixture.claims()
        let other = try P256SigningKey()
        let five = ApprovalAction.transfer(
            try TransferAction(amount: DecimalAmount("5"), asset: "ETH", to: "0x12ab34cd56ef"))
        var variants: [(String, ReceiptClaims)] = []
        var changed = claims
        changed.signature = try other.signature(for: claims.payload).derRepresentation
        variants.append(("another key's signature", changed))
        changed.signature = Data(repeating: 1, count: 64)
        variants.append(("not DER", changed))
        changed = claims
        changed.payload = try fixture.payload(action: five)
        variants.append(("another payload", changed))
        changed = claims
        changed.deviceKey = try ECPublicJWK(x963: other.publicKey.x963Representation)
        variants.append(("another device key", changed))
        for (label, variant) in variants {
            #expect(fixture.failingStep(try fixture.receipt(variant.json)) == .deviceSignature, "\(label)")
        }
    }

    @Test("step 3: a signed payload for another action, device or server, or not a payload at all")
    func stepThree() throws {
        let fixture = try Fixture()
        let other = ApprovalAction.transfer(
            try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: "0xattacker"))
        let payloads: [(String, Data)] = [
            ("action", try fixture.payload(action: other)),
            ("device", try fixture.payload(device: "dev_2")),
            ("server", try fixture.payload(server: "elsewhere")),
            ("not a payload", Data(#"{"keybound":1}"#.utf8)),
        ]
        for (label, payload) in payloads {
            let receipt = try fixture.receipt(fixture.claims(payload: payload).json)
            #expect(fixture.failingStep(receipt) == .payloadMatch, "\(label)")
        }
        // Without a server to expect (`keybound receipt verify` without --server-id), the server
        // is shown, not checked.
        let elsewhere = try fixture.receipt(
            fixture.claims(payload: fixture.payload(server: "elsewhere")).json)
        let shown = try ReceiptVerifier.verify(elsewhere, keys: fixture.keys, issuer: nil, serverID: nil)
        #expect(shown.serverID == "elsewhere")
    }
}
