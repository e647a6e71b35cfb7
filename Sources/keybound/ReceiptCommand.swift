import Foundation
import KeyboundVerifier
import KeyboundWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `keybound receipt`: checks an approval's receipt offline (docs/approvals.md), with
/// KeyboundVerifier, as anyone holding the issuer's JWK Set can.
enum ReceiptCommand {
    static let command = OperatorCommand(
        name: "receipt", title: "approval receipts, checked offline against the issuer's JWK Set",
        actions: [
            OperatorCommand.Action(
                name: "verify", operands: .one("FILE"),
                options: [
                    .value(
                        "jwks", "FILE|URL",
                        "the issuer's JWK Set: a file, or its http(s) URL (GET /oauth/jwks)",
                        required: true),
                    .value("issuer", "URL", "the iss the receipt must carry (otherwise shown, not checked)"),
                    .value(
                        "server-id", "ID",
                        "the server id its signed payload must name (otherwise shown, not checked)"),
                ],
                perform: verify)
        ],
        notes: """
            verify checks the receipt in FILE (the compact JWS that GET /v1/approvals/{id} returns as
            receipt) in three steps, and prints the action the user's device approved:

              1. the issuer's signature: an ES256 JWS, typ keybound-receipt+jwt, under a key of
                 the JWK Set (and iss is --issuer, when given);
              2. the device's signature: signature verifies over payload with device.jwk;
              3. the signed payload matches: it is an approval of the receipt's action, for its
                 device (and for --server-id, when given).

            A receipt that fails prints the step that failed and exits 1. verify reads no database
            and needs no server but the one serving --jwks, if it is a URL:

              keybound receipt verify receipt.jwt --jwks https://login.example.com/oauth/jwks \\
                  --issuer https://login.example.com --server-id keybound
            """,
        refusals: "a receipt that does not verify, a JWK Set that cannot be read")

    static func run(_ raw: [String]) -> Int32 { command.run(raw) }

    /// The largest receipt or JWK Set read: a receipt is about 1.5 KB, a JWK Set a few keys.
    private static let fileLimit = 65_536

    private static func verify(_ invocation: OperatorCommand.Invocation) throws -> OperatorCommand.Outcome {
        let path = invocation.operand ?? ""
        let text = String(
            decoding: try readFile(path, label: "receipt", limit: fileLimit, what: "a receipt"), as: UTF8.self
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
        let keys: JWKS
        do {
            keys = try JWKS(json: try jwksData(invocation.arguments.value("jwks") ?? ""))
        } catch let error as VerificationError {
            throw OperatorCommand.Refusal("--jwks: \(error.detail)", code: "jwks_invalid")
        }
        let approval: VerifiedApproval
        do {
            approval = try ReceiptVerifier.verify(
                text, keys: keys, issuer: invocation.arguments.value("issuer"),
                serverID: invocation.arguments.value("server-id"))
        } catch let error as ReceiptVerificationError {
            throw OperatorCommand.Refusal("\(path): \(error)", code: code(error.step))
        }
        return OperatorCommand.Outcome(members: json(approval), text: summary(approval))
    }

    /// The JWK Set's bytes, from the file or the http(s) URL `source` names.
    private static func jwksData(_ source: String) throws -> Data {
        guard source.hasPrefix("http://") || source.hasPrefix("https://") else {
            return try readFile(source, label: "--jwks", limit: fileLimit, what: "an issuer's JWK Set")
        }
        guard let url = URL(string: source) else { throw UsageError("--jwks \(source): not a URL") }
        do {
            // Synchronous: FoundationNetworking fetches it, and a status other than 200 is an error.
            let data = try Data(contentsOf: url)
            guard data.count <= fileLimit else {
                throw OperatorCommand.Refusal("--jwks \(source): larger than \(fileLimit) bytes")
            }
            return data
        } catch let refusal as OperatorCommand.Refusal {
            throw refusal
        } catch {
            throw OperatorCommand.Refusal(
                "--jwks \(source): cannot fetch it (no answer, or not 200)", code: "jwks_unavailable")
        }
    }

    /// `--json`'s error code for a failed step.
    private static func code(_ step: ReceiptVerificationError.Step) -> String {
        switch step {
        case .issuerSignature: "issuer_signature_invalid"
        case .deviceSignature: "device_signature_invalid"
        case .payloadMatch: "payload_mismatch"
        }
    }

    /// `verified: transfer 0.5 ETH to 0x12ab…`, then what the receipt says about it.
    private static func summary(_ approval: VerifiedApproval) -> String {
        var lines = [("action", actionText(approval.action))]
        if let message = approval.bindingMessage { lines.append(("message", message)) }
        lines += [
            ("approval", approval.approvalID), ("user", approval.userID),
            (
                "device",
                approval.deviceID + (approval.deviceAttested ? " (App Attest attested)" : " (not attested)")
            ),
            ("decided", Timestamp.format(approval.decidedAt)), ("issuer", approval.issuer),
            ("server", approval.serverID),
        ]
        return "verified: \(actionText(approval.action))\n" + columns(lines, indent: 2)
    }

    private static func actionText(_ action: ApprovalAction) -> String {
        switch action {
        case .transfer(let transfer): "transfer \(transfer.amount) \(transfer.asset) to \(transfer.to)"
        }
    }

    /// The verified approval's members, as `--json` shows them.
    private static func json(_ approval: VerifiedApproval) -> [JSONMember] {
        [
            JSONMember("approval_id", .string(approval.approvalID)),
            JSONMember("user_id", .string(approval.userID)), JSONMember("action", approval.action.json),
            JSONMember("binding_message", approval.bindingMessage.map(JSONValue.string) ?? .null),
            JSONMember("decided_at", .string(Timestamp.format(approval.decidedAt))),
            JSONMember("device_id", .string(approval.deviceID)),
            JSONMember("device_attested", .bool(approval.deviceAttested)),
            JSONMember("issuer", .string(approval.issuer)),
            JSONMember("server_id", .string(approval.serverID)),
        ]
    }
}
