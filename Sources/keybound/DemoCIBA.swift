import Foundation
import Keybound
import KeyboundEmulator
import KeyboundServer
import KeyboundVerifier
import KeyboundWire

// Chapter 9 of the demo: the system that acts on an approval asks for it itself. Acme's wallet
// back end asks, through OpenID CIBA with a RAR transfer, for Ada's approval of 0.5 ETH to a whole
// address; her phone lists the request and shows what its key will sign, Face ID matches, the key
// signs; the back end's poll gets tokens naming that transfer and a receipt, which
// `keybound receipt verify` checks offline, and which fails once one byte of it is changed.

extension DemoStory {
    /// What the wallet shows beside its request, and the phone beside the transfer.
    private static let bindingMessage = "Acme wallet withdrawal W-1042"
    /// The CIBA grant type (CIBA Core §10.1).
    private static let cibaGrant = "urn:openid:params:grant-type:ciba"

    /// Chapter 9.
    /// - Parameters:
    ///   - phone: Ada's genuine app of chapter 7, whose attested key was bound last: the server
    ///     asks that device.
    ///   - directory: where the back end keeps the receipt and the issuer's JWK Set.
    func backchannelApproval(
        configuration: Configuration, device: EmulatedDevice, phone: BiometricLogin, directory: URL
    ) async throws {
        narrator.chapter("9. The wallet's back end asks the phone: CIBA, and a receipt anyone can check")
        let issuer = try requireValue(configuration.issuer, "the provider's issuer")
        var registration = OAuthClientRegistration(name: "Acme wallet", redirectURIs: [])
        registration.confidential = true
        registration.ciba = true
        let wallet = try ProviderAdministration(configuration: configuration).addClient(registration)
        let secret = try requireValue(wallet.secret, "a confidential client should get a secret")
        try check(wallet.ciba == .poll, "a CIBA client without a notification endpoint should poll")
        narrator.step(
            "The operator registers Acme's wallet back end: keybound client add \"Acme wallet\" --confidential --ciba",
            "client \(wallet.clientID.prefix(8))…, CIBA in poll mode")

        // The back end asks for exactly this transfer (RFC 9396), to the whole address.
        let transfer = try transferToRecipient()
        func backEnd(_ path: String, _ pairs: [(String, String)]) async throws -> (
            status: Int, json: JSONValue
        ) {
            try await Self.postForm(issuer + path, pairs, clientID: wallet.clientID, secret: secret)
        }
        let (asked, request) = try await backEnd(
            OAuthPaths.backchannelAuthentication,
            [
                ("login_hint", username), ("scope", "openid"), ("binding_message", Self.bindingMessage),
                ("authorization_details", Self.text(TransferAuthorizationDetails.json(transfer))),
            ])
        let authRequestID = try requireValue(
            request[member: "auth_req_id"]?.stringValue,
            "bc-authorize should answer an auth_req_id: \(asked) \(Self.text(request))")
        let interval = try requireValue(
            request[member: "interval"]?.integerValue, "bc-authorize should give an interval")
        let expiresIn = try requireValue(
            request[member: "expires_in"]?.integerValue, "bc-authorize should give expires_in")
        try check(
            asked == 200 && interval == 1 && (1...300).contains(expiresIn),
            "bc-authorize should accept, with the demo's interval of 1 s")
        narrator.step(
            "The wallet's back end asks for Ada's approval: POST \(OAuthPaths.backchannelAuthentication) "
                + "(client_secret_basic, login_hint \(username), scope openid, binding_message, "
                + "authorization_details keybound_transfer 0.5 ETH to \(recipient))",
            "auth_req_id \(authRequestID.prefix(8))…, expires_in \(expiresIn), interval \(interval) (--ciba-interval 1)"
        )

        let poll = [("grant_type", Self.cibaGrant), ("auth_req_id", authRequestID)]
        let (waiting, pendingAnswer) = try await backEnd(OAuthPaths.token, poll)
        let polled = Date()
        let pendingError = pendingAnswer[member: "error"]?.stringValue
        try check(
            waiting == 400 && pendingError == "authorization_pending",
            "the first poll should be pending: \(waiting) \(Self.text(pendingAnswer))")
        narrator.step(
            "The back end polls POST \(OAuthPaths.token) (grant_type \(Self.cibaGrant))",
            "400 authorization_pending: Ada has not decided yet")

        // Ada's phone: what it lists is parsed from the payload its key will sign.
        let deviceID = try requireValue(try await phone.boundDeviceID(), "the genuine app's device")
        let approvals = try TransactionApproval(
            client: phone.client, device: DeviceBackends(device), deviceID: deviceID,
            serverID: "demo.keybound.local", keyName: "demo-genuine.device-key")
        let listed = try await approvals.pending()
        let pending = try requireValue(listed.first, "the phone should list the wallet's request")
        try check(
            listed.count == 1 && pending.amount.text == "0.5" && pending.asset == "ETH"
                && pending.recipient == recipient,
            "the phone should list exactly the wallet's transfer: \(listed.map(\.promptText))")
        try check(
            pending.bindingMessage == Self.bindingMessage && pending.requestedBy == wallet.name,
            "the phone should show who asks, with its message")
        narrator.step(
            "Ada's phone lists its pending approvals (GET /v1/approvals?status=pending)",
            "one, from \(wallet.name), \"\(Self.bindingMessage)\"; the confirmation screen, parsed from the "
                + "payload the key will sign: \(pending.amount) \(pending.asset) to \(pending.groupedRecipient)"
        )

        await device.present(.match)
        let decided = try await approvals.approve(pending.confirm())
        try check(decided.status == .approved, "the approval should be approved")
        narrator.step(
            "Ada taps Approve on that screen; Face ID matches, the key signs the exact payload bytes",
            "approved")

        // A client waits out the interval between two polls (sooner: slow_down).
        let wait = TimeInterval(interval) - Date().timeIntervalSince(polled)
        if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000) + 50)) }
        let (answered, tokens) = try await backEnd(OAuthPaths.token, poll)
        try check(
            answered == 200,
            "the poll after the approval should get the tokens: \(answered) \(Self.text(tokens))")
        let keysBody = try await Self.get(try requireValue(URL(string: issuer + OAuthPaths.jwks), "")).body
        let keys = try JWKS(json: keysBody)
        let accessToken = try requireValue(tokens[member: "access_token"]?.stringValue, "an access token")
        let access = try AccessTokenVerifier(issuer: issuer, audience: issuer, keys: keys).verify(accessToken)
        let idToken = try JWTVerification.verify(
            try requireValue(tokens[member: "id_token"]?.stringValue, "an ID token"), type: "JWT",
            keys: keys.keySet)
        let details = try tokens[member: "authorization_details"].map(
            TransferAuthorizationDetails.action(from:))
        try check(
            details == transfer && access.approvedAction == transfer,
            "the token response and the access token should carry the transfer as asked")
        try check(
            access.authenticationMethods == ["hwk"] && idToken[member: "sub"]?.stringValue == access.subject,
            "the tokens should name Ada and her device key (amr hwk)")
        let receipt = try requireValue(tokens[member: "keybound_receipt"]?.stringValue, "a receipt")
        narrator.step(
            "The back end polls again once the interval has passed",
            "200: authorization_details exactly as asked, an ID token and an RFC 9068 access token (verified "
                + "offline: sub \(access.subject.prefix(8))…, amr [hwk], the transfer in it) and keybound_receipt"
        )

        // The back end keeps the receipt; anyone with the issuer's JWK Set can check it later.
        try Data((receipt + "\n").utf8).write(to: directory.appendingPathComponent("receipt.jwt"))
        try keysBody.write(to: directory.appendingPathComponent("jwks.json"))
        let checks = ["--jwks", "jwks.json", "--issuer", issuer, "--server-id", "demo.keybound.local"]
        let verified = try Self.keybound(["receipt", "verify", "receipt.jwt"] + checks, in: directory)
        let summary = verified.output.split(separator: "\n").first.map(String.init) ?? ""
        try check(
            verified.status == 0 && summary == "verified: transfer 0.5 ETH to \(recipient)"
                && verified.output.contains(Self.bindingMessage)
                && verified.output.contains("\(deviceID) (App Attest attested)"),
            "the receipt should verify: \(verified.status) \(verified.output) \(verified.errors)")
        narrator.step(
            "The back end saves the receipt and the issuer's JWK Set, and checks it as anyone can, offline: "
                + "keybound receipt verify receipt.jwt \(checks.joined(separator: " "))",
            "exit 0, \(summary), message \"\(Self.bindingMessage)\", device \(deviceID.prefix(8))… (App Attest attested)"
        )

        // One byte of the receipt's payload changed: the amount it claims.
        let tampered = try Self.tamperedAmount(receipt)
        try Data((tampered + "\n").utf8).write(to: directory.appendingPathComponent("receipt-tampered.jwt"))
        let refused = try Self.keybound(
            ["receipt", "verify", "receipt-tampered.jwt"] + checks, in: directory)
        let reason = refused.errors.trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "keybound receipt verify: receipt-tampered.jwt: ", with: "")
        try check(
            refused.status == 1 && reason.hasPrefix("step 1 (") && refused.output.isEmpty,
            "the tampered receipt should fail at the issuer's signature: \(refused.status) \(refused.errors)")
        narrator.step(
            "Someone changes one byte of a copy's payload (\"amount\":\"0.5\" becomes \"9.5\") and checks it",
            "exit 1: \(reason)")
    }

    /// `receipt` with one byte of its payload changed: the first `"amount":"0.5"` (the approved
    /// action's) says 9.5; header and signature stay as they were.
    private static func tamperedAmount(_ receipt: String) throws -> String {
        let parts = receipt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
            let range = payload.range(of: Data("\"amount\":\"0.5\"".utf8))
        else { throw DemoFailure(description: "the receipt should be a JWS whose claims name the amount") }
        var changed = payload
        changed[range.lowerBound + "\"amount\":\"".utf8.count] = UInt8(ascii: "9")
        return [parts[0], Base64URL.encode(changed), parts[2]].joined(separator: ".")
    }

    /// Runs this `keybound` binary with `arguments` in `directory`, as an operator would.
    private static func keybound(_ arguments: [String], in directory: URL) throws -> (
        status: Int32, output: String, errors: String
    ) {
        let process = Process()
        process.executableURL = Bundle.main.executableURL
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let (output, errors) = (Pipe(), Pipe())
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Its output is a few lines: neither pipe can fill while the other is read.
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let complained = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: printed, as: UTF8.self),
            String(decoding: complained, as: UTF8.self)
        )
    }
}
