import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundTestSupport
import KeyboundVerifier
import KeyboundWire
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Story 3: transaction approval — what you see is what you sign.
@Suite("Story 3: transaction approval")
struct ApprovalTests {
    static let recipient = "0x12a4c8b2e19d7f3a5c6b8e0d4f2a1b3c9d7e5fef"
    /// The whole recipient in groups of four, as the app and the prompt show it.
    static let grouped = "0x12 a4c8 b2e1 9d7f 3a5c 6b8e 0d4f 2a1b 3c9d 7e5f ef"

    static func transfer(_ amount: String, to recipient: String = recipient) throws -> ApprovalAction {
        .transfer(try TransferAction(amount: DecimalAmount(amount), asset: "ETH", to: recipient))
    }

    /// A logged-in app with a bound device key, and its approval flow.
    struct Bound {
        let app: BiometricLogin
        let deviceID: String
        let approvals: TransactionApproval
    }

    static func bound(
        _ backend: Backend, _ phone: EmulatedDevice, policy: AccessPolicy = .biometryCurrentSet,
        urlSession: URLSession? = nil
    ) async throws -> Bound {
        try await backend.createUser("ada")
        let app = try backend.app(.deviceKey, device: phone, policy: policy, urlSession: urlSession)
        try await app.loginWithPassword(username: "ada", password: Backend.password)
        try await app.enable()
        let deviceID = try #require(try await app.boundDeviceID())
        let approvals = try TransactionApproval(
            client: app.client, device: DeviceBackends(phone), deviceID: deviceID, serverID: Backend.serverID,
            keyName: "acme-deviceKey.device-key", policy: policy, clock: backend.clientClock)
        return Bound(app: app, deviceID: deviceID, approvals: approvals)
    }

    @Test func theAppListsWhatWaitsShowsThePayloadAndDenies() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let bound = try await Self.bound(backend, phone)
        // Two approvals wait (asked for by the app here; by a payment service through CIBA later).
        let small = try await bound.approvals.request(try Self.transfer("0.5"))
        let large = try await bound.approvals.request(try Self.transfer("12"))
        #expect(await bound.app.client.currentSession?.isDPoPBound == true)

        // The list comes through the DPoP-bound session; what it shows is parsed from the payloads.
        let listed = try await bound.approvals.pending()
        #expect(Set(listed.map(\.approvalID)) == [small.approvalID, large.approvalID])
        let shown = try #require(listed.first { $0.approvalID == large.approvalID })
        #expect(shown.promptText == "Send 12 ETH to \(Self.grouped)")
        #expect(shown.payloadBytes == large.payloadBytes)

        // Denied: gone from the list, and the device's signature can no longer approve it.
        let denied = try await bound.approvals.deny(shown)
        #expect(denied.status == .denied)
        #expect(try await bound.approvals.pending().map(\.approvalID) == [small.approvalID])
        await phone.present(.match)
        do {
            _ = try await bound.approvals.approve(shown.confirm())
            Issue.record("a denied approval was approved")
        } catch let error as KeyboundError {
            #expect(error.serverCode == .challengeUsed, "\(error)")
        }
        #expect(try await bound.app.client.approval(large.approvalID).status == .denied)
        // The other one is still approvable.
        await phone.present(.match)
        #expect(try await bound.approvals.approve(small.confirm()).status == .approved)
        #expect(try await bound.approvals.pending().isEmpty)
    }

    @Test func approveATransferThenReplayAndTamperingAreRefused() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let bound = try await Self.bound(backend, phone)
        let client = bound.app.client

        // The prompt is built from the payload the server issued, not from the app's request.
        let pending = try await bound.approvals.request(try Self.transfer("0.5"))
        #expect(pending.promptText == "Send 0.5 ETH to \(Self.grouped)")
        #expect(pending.payload.purpose == .approve)
        #expect(pending.payload.server == Backend.serverID)
        #expect(pending.payload.device == bound.deviceID)
        #expect(try await client.approval(pending.approvalID).status == .pending)

        await phone.present(.match)
        let signature = try await bound.approvals.sign(pending.confirm())
        #expect(
            try await client.confirmApproval(pending.approvalID, signature: signature).status == .approved)
        let decided = try await client.approval(pending.approvalID)
        #expect(decided.status == .approved)
        #expect(decided.action == (try Self.transfer("0.5")))
        #expect(decided.decidedAt != nil)

        // Replay of the same signature: the approval was used.
        await expectKeyboundError(.server, serverCode: .challengeUsed) {
            try await client.confirmApproval(pending.approvalID, signature: signature)
        }

        // Malware swaps the amount in the payload before the prompt: the user would see (and
        // sign) 50 ETH, but the server only accepts a signature over the bytes it issued.
        let second = try await bound.approvals.request(try Self.transfer("0.5"))
        let tamperedBytes = Data(
            String(decoding: second.payloadBytes, as: UTF8.self)
                .replacingOccurrences(of: "\"amount\":\"0.5\"", with: "\"amount\":\"50\"").utf8)
        #expect(tamperedBytes != second.payloadBytes)
        let tampered = try bound.approvals.check(approvalID: second.approvalID, payload: tamperedBytes)
        #expect(tampered.promptText == "Send 50 ETH to \(Self.grouped)")
        await phone.present(.match)
        let tamperedSignature = try await bound.approvals.sign(tampered.confirm())
        await expectKeyboundError(.server, serverCode: .signatureInvalid) {
            try await client.confirmApproval(second.approvalID, signature: tamperedSignature)
        }
        // The first confirmation decides: the approval is spent, even for an honest signature.
        #expect(try await client.approval(second.approvalID).status == .failed)
        await phone.present(.match)
        let honest = try await bound.approvals.sign(second.confirm())
        await expectKeyboundError(.server, serverCode: .challengeUsed) {
            try await client.confirmApproval(second.approvalID, signature: honest)
        }

        // A signature is good for its own payload only: one approval's signature for another.
        let third = try await bound.approvals.request(try Self.transfer("0.5"))
        let fourth = try await bound.approvals.request(try Self.transfer("0.5"))
        await phone.present(.match)
        let thirdSignature = try await bound.approvals.sign(third.confirm())
        await expectKeyboundError(.server, serverCode: .signatureInvalid) {
            try await client.confirmApproval(fourth.approvalID, signature: thirdSignature)
        }
        // One flipped bit of a valid signature.
        var flipped = thirdSignature
        flipped[flipped.count - 1] ^= 0x01
        await expectKeyboundError(.server, serverCode: .signatureInvalid) {
            try await client.confirmApproval(third.approvalID, signature: flipped)
        }
        #expect(try await client.approval(third.approvalID).status == .failed)

        // The user still approves the next one normally (good signatures reset the count).
        let fifth = try await bound.approvals.request(try Self.transfer("0.25"))
        #expect(fifth.promptText == "Send 0.25 ETH to \(Self.grouped)")
        await phone.present(.match)
        #expect(try await bound.approvals.approve(fifth.confirm()).status == .approved)
        #expect(try await client.devices().first?.status == .active)
    }

    /// The request to the server is rewritten on the way (50 ETH to the attacker instead of
    /// 0.5 ETH to the user's recipient). The server issues a genuine payload for the attacker's
    /// action; the app compares it with what the user asked for and refuses before any prompt.
    @Test func aServerPayloadNamingAnotherActionIsRefused() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let port = try #require(backend.baseURL.port)
        let attacked = Backend.makeURLSession(protocolClasses: [ManInTheMiddle.self])
        defer {
            ManInTheMiddle.stop(port: port)
            attacked.finishTasksAndInvalidate()
        }
        let bound = try await Self.bound(backend, phone, urlSession: attacked)
        let attacker = "0xbadbadbadbadbadbadbadbadbadbadbadbadbad0"
        ManInTheMiddle.intercept(port: port) { method, path, body in
            guard method == API.createApproval.method.rawValue, path == API.createApproval.path() else {
                return body
            }
            return Data(
                String(decoding: body, as: UTF8.self)
                    .replacingOccurrences(of: "\"amount\":\"0.5\"", with: "\"amount\":\"50\"")
                    .replacingOccurrences(of: Self.recipient, with: attacker).utf8)
        }

        await phone.present(.match)
        await expectKeyboundError(.payloadMismatch) {
            try await bound.approvals.request(try Self.transfer("0.5"))
        }
        #expect(await phone.snapshot().queuedOutcomes == 1, "no prompt for a payload that was not asked for")
        // The man in the middle really was there: the server holds a pending 50 ETH approval.
        ManInTheMiddle.stop(port: port)
        let created = try await backend.requests(API.createApproval, status: 201)
        #expect(created == 1)
        // Without him, the same request goes through.
        let pending = try await bound.approvals.request(try Self.transfer("0.5"))
        #expect(pending.promptText == "Send 0.5 ETH to \(Self.grouped)")
        #expect(try await bound.approvals.approve(pending.confirm()).status == .approved)
    }

    /// Every approval verifies afresh, even when the key's policy has a reuse window: one
    /// match queued, two approvals: the second prompt finds nobody and is cancelled.
    @Test func everyApprovalNeedsAFreshVerification() async throws {
        let backend = try Backend()
        defer { backend.shutDown() }
        let phone = try makePhone()
        let reusable = try AccessPolicy.biometryCurrentSet.reusing(for: 300)
        let bound = try await Self.bound(backend, phone, policy: reusable)
        #expect(try await phone.keyPolicy("acme-deviceKey.device-key").reuseDuration == 300)

        let first = try await bound.approvals.request(try Self.transfer("0.5"))
        let second = try await bound.approvals.request(try Self.transfer("1.5"))
        await phone.present(.match)
        #expect(try await bound.approvals.approve(first.confirm()).status == .approved)
        await expectKeyboundError(.userCancel, recovery: .silent) {
            try await bound.approvals.approve(second.confirm())
        }
        #expect(try await bound.app.client.approval(second.approvalID).status == .pending)
        // With a new prompt, it goes through.
        await phone.present(.match)
        #expect(try await bound.approvals.approve(second.confirm()).status == .approved)
    }
}

/// Story 3 for the systems that act on approvals: a payment service asks through CIBA, the
/// phone's SDK lists and shows the request, Face ID signs it, the service gets its tokens and a
/// receipt it checks offline.
@Suite("Story 3: a payment service asks (CIBA)")
struct BackchannelApprovalTests {

    /// The service's side: form posts with its client authentication (HTTP Basic).
    struct PaymentService {
        let baseURL: URL
        let session: URLSession
        let clientID: String
        let secret: String

        func post(_ path: String, _ pairs: [(String, String)]) async throws -> (Int, JSONValue) {
            var request = URLRequest(url: baseURL.appendingPathComponent(path))
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.setValue(
                "Basic " + Data("\(clientID):\(secret)".utf8).base64EncodedString(),
                forHTTPHeaderField: "Authorization")
            var form = URLComponents()
            form.queryItems = pairs.map { URLQueryItem(name: $0.0, value: $0.1) }
            // `+` is a space in a form: escaped, with the other reserved characters.
            request.httpBody = Data(
                (form.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B").utf8)
            let (data, response) = try await session.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, try JSON.parse(data))
        }

        func poll(_ authReqID: String) async throws -> (Int, JSONValue) {
            try await post(
                "/oauth/token",
                [("grant_type", "urn:openid:params:grant-type:ciba"), ("auth_req_id", authReqID)])
        }
    }

    @Test func aPaymentServiceAsksThePhoneShowsItFaceIDSignsTheServiceProvesIt() async throws {
        let provider = try ProviderBackend()
        defer { provider.shutDown() }
        let (backend, issuer) = (provider.backend, provider.issuer)
        var registration = OAuthClientRegistration(name: "Wallet backend", redirectURIs: [])
        registration.confidential = true
        registration.ciba = true
        let registered = try provider.administration.addClient(registration)
        let service = PaymentService(
            baseURL: backend.baseURL, session: backend.urlSession, clientID: registered.clientID,
            secret: try #require(registered.secret))
        let phone = try makePhone()
        let bound = try await ApprovalTests.bound(backend, phone)

        let details =
            #"[{"type":"keybound_transfer","amount":"0.5","asset":"ETH","recipient":"\#(ApprovalTests.recipient)"}]"#
        let (status, asked) = try await service.post(
            "/oauth/bc-authorize",
            [
                ("scope", "openid"), ("login_hint", "ada"), ("binding_message", "Order 4711 + fee"),
                ("authorization_details", details),
            ])
        #expect(status == 200, "\(asked)")
        let authReqID = try #require(asked[member: "auth_req_id"]?.stringValue)
        #expect(try await service.poll(authReqID).1[member: "error"]?.stringValue == "authorization_pending")

        // The phone: what it shows is parsed from the payload; the service's name and message beside it.
        let shown = try #require(try await bound.approvals.pending().first)
        #expect(shown.action == (try ApprovalTests.transfer("0.5")))
        #expect(shown.promptText == "Send 0.5 ETH to \(ApprovalTests.grouped)")
        #expect(shown.requestedBy == "Wallet backend" && shown.bindingMessage == "Order 4711 + fee")
        await phone.present(.match)
        #expect(try await bound.approvals.approve(shown.confirm()).status == .approved)

        backend.clock.advance(by: 5)
        let (granted, tokens) = try await service.poll(authReqID)
        #expect(granted == 200, "\(tokens)")
        #expect(tokens[member: "authorization_details"] == (try JSON.parse(Data(details.utf8))))
        // The service proves it offline: the receipt under the issuer's JWK Set.
        let (jwksData, _) = try await backend.urlSession.data(
            from: backend.baseURL.appendingPathComponent("/oauth/jwks"))
        let verifier = ReceiptVerifier(
            issuer: issuer, serverID: Backend.serverID, keys: try JWKS(json: jwksData))
        let receipt = try #require(tokens[member: "keybound_receipt"]?.stringValue)
        let approved = try verifier.verify(receipt)
        #expect(approved.action == (try ApprovalTests.transfer("0.5")))
        #expect(approved.bindingMessage == "Order 4711 + fee" && approved.deviceID == bound.deviceID)
        let access = try AccessTokenVerifier(
            issuer: issuer, audience: issuer, keys: try JWKS(json: jwksData)
        )
        .verify(try #require(tokens[member: "access_token"]?.stringValue), at: backend.clock.now)
        #expect(access.approvedAction == (try ApprovalTests.transfer("0.5")))
        // One changed character of the claims, and it no longer verifies.
        var parts = receipt.split(separator: ".").map(String.init)
        parts[1] =
            String(parts[1].prefix(40)) + (parts[1].dropFirst(40).first == "A" ? "B" : "A")
            + parts[1].dropFirst(41)
        #expect(throws: ReceiptVerificationError.self) { try verifier.verify(parts.joined(separator: ".")) }
        #expect(try await service.poll(authReqID).1[member: "error"]?.stringValue == "invalid_grant")
    }
}
