import Foundation
import KeyboundTestSupport
import Testing

/// `keybound webhook`: the secret is printed by `add` only, `list` shows what `add` made,
/// `--json` prints one object, private targets and unknown events are refused (exit 1), bad
/// usage exits 2.
@Suite("operator commands: webhook")
struct WebhookCommandTests {
    @Test(arguments: Engine.all) func addListDeliveriesRetryRemove(engine: Engine) throws {
        let database = try OperatorDatabase(engine)
        let url = "http://127.0.0.1:9/hook"

        // Loopback is refused unless allowed, on the command line or in the environment.
        let refused = try database.keybound(["webhook", "add", url, "--event", "device.bound", "--json"])
        #expect(refused.status == 1)
        let refusal = try refused.object()["error"] as? JSONObject
        #expect(refusal?["code"] as? String == "webhookRefused")
        #expect((refusal?["message"] as? String)?.contains("--allow-private-webhooks") == true)

        let added = try expectSuccess(
            try database.keybound(
                ["webhook", "add", url, "--event", "session.revoked", "--event", "device.bound", "--json"],
                environment: ["KEYBOUND_ALLOW_PRIVATE_WEBHOOKS": "1"]))
        let secret = try #require(added["secret"] as? String)
        #expect(secret.hasPrefix("whsec_") && Data(base64Encoded: String(secret.dropFirst(6)))?.count == 32)
        // In the order of the design, whatever the order given.
        #expect(added["events"] as? [String] == ["device.bound", "session.revoked"])

        let list = try database.keybound(["webhook", "list"])
        #expect(
            list.status == 0 && list.text.contains(url) && list.text.contains("device.bound,session.revoked"))
        #expect(!list.text.contains(secret))
        let listed = try expectSuccess(try database.keybound(["webhook", "list", "--json"]))
        let endpoints = try #require(listed["webhooks"] as? [JSONObject])
        #expect(endpoints.count == 1 && endpoints.first?["secret"] == nil)

        let deliveries = try expectSuccess(try database.keybound(["webhook", "deliveries", url, "--json"]))
        #expect((deliveries["deliveries"] as? [Any])?.isEmpty == true)
        let missing = try database.keybound(["webhook", "retry", "whd_nothing", "--json"])
        #expect(missing.status == 1)
        #expect((try missing.object()["error"] as? JSONObject)?["code"] as? String == "webhookNotFound")

        // The same URL twice, an unknown event: refused.
        let twice = try database.keybound(
            ["webhook", "add", url, "--event", "device.bound", "--allow-private-webhooks"])
        #expect(twice.status == 1 && twice.stderr.contains("registered already"))
        let unknown = try database.keybound(
            [
                "webhook", "add", "http://127.0.0.1:10/", "--event", "device.unknown",
                "--allow-private-webhooks",
            ])
        #expect(unknown.status == 1 && unknown.stderr.contains("unknown event 'device.unknown'"))

        #expect(try database.keybound(["webhook", "remove", url]).status == 0)
        #expect(try database.keybound(["webhook", "remove", url]).status == 1)
        expectUsageError(
            try database.keybound(["webhook", "add", url]), mentioning: "--event",
            command: "keybound webhook add")
        expectUsageError(
            try database.keybound(["webhook", "send"]), mentioning: "unknown command",
            command: "keybound webhook")
    }
}
