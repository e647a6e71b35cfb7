import Foundation
import KeyboundServer
import KeyboundWire

/// `keybound webhook`: the endpoints events are delivered to, and their deliveries, on the
/// server's database, for operators (docs/webhooks.md).
enum WebhookCommand {
    static let command = OperatorCommand(
        name: "webhook", title: "webhook endpoints and their deliveries, on the server's database",
        actions: [
            OperatorCommand.Action(
                name: "add", operands: .one("URL"),
                options: [
                    .value(
                        "event", "E", "an event type it receives; repeatable, at least one", required: true,
                        repeatable: true)
                ],
                settings: [ServeCommand.allowPrivateWebhooks]
            ) { invocation in
                let endpoint = try WebhookAdministration(configuration: invocation.configuration).add(
                    url: invocation.operand ?? "", events: invocation.arguments.values("event"))
                let secret = endpoint.secret ?? ""
                return OperatorCommand.Outcome(
                    members: endpoint.jsonMembers + [JSONMember("secret", .string(secret))],
                    text: """
                        id: \(endpoint.id)
                        secret: \(secret)
                        The secret is shown only now: give it to the receiver, which checks each delivery's signature with it.
                        """)
            },
            OperatorCommand.Action(name: "list", operands: .none) { invocation in
                let endpoints = try WebhookAdministration(configuration: invocation.configuration).endpoints()
                return OperatorCommand.Outcome(
                    members: [JSONMember("webhooks", .array(endpoints.map { .object($0.jsonMembers) }))],
                    text: endpoints.isEmpty
                        ? nil
                        : columns(
                            [["ID", "URL", "EVENTS", "REGISTERED"]]
                                + endpoints.map {
                                    [
                                        $0.id, $0.url, $0.events.joined(separator: ","),
                                        Timestamp.format($0.createdAt),
                                    ]
                                }, indent: 0),
                    notice: endpoints.isEmpty ? "no webhook endpoints" : nil)
            },
            OperatorCommand.Action(name: "remove", operands: .one("URL")) { invocation in
                let url = invocation.operand ?? ""
                try WebhookAdministration(configuration: invocation.configuration).remove(url: url)
                return OperatorCommand.Outcome(
                    members: [JSONMember("url", .string(url))],
                    text: "removed \(url); what it had not received is dropped")
            },
            OperatorCommand.Action(name: "deliveries", operands: .one("URL")) { invocation in
                let deliveries = try WebhookAdministration(configuration: invocation.configuration)
                    .deliveries(
                        url: invocation.operand ?? "")
                return OperatorCommand.Outcome(
                    members: [JSONMember("deliveries", .array(deliveries.map { .object($0.jsonMembers) }))],
                    text: deliveries.isEmpty ? nil : table(deliveries),
                    notice: deliveries.isEmpty ? "no deliveries" : nil)
            },
            OperatorCommand.Action(name: "retry", operands: .one("ID")) { invocation in
                let id = invocation.operand ?? ""
                try WebhookAdministration(configuration: invocation.configuration).retry(deliveryID: id)
                return OperatorCommand.Outcome(
                    members: [JSONMember("delivery_id", .string(id))],
                    text: "\(id) is sent again (a running server sends it within a second)")
            },
        ],
        notes: """
            Events are posted to each endpoint that takes their type, per Standard Webhooks: a JSON
            body {type, timestamp, data} with the headers webhook-id (the same on every retry),
            webhook-timestamp and webhook-signature (v1,<base64 HMAC-SHA256>). The event types are
            \(WebhookEventType.known.map(\.rawValue).joined(separator: ", ")).

            add registers an endpoint for the --event types given and prints its secret (whsec_…)
            only this once. The URL must resolve to public addresses only, unless
            --allow-private-webhooks (give serve the same flag, or deliveries to it are refused):

              keybound webhook add https://payments.example.com/keybound --event approval.decided --event device.revoked

            list shows each endpoint: its id, URL, event types and when it was registered.
            remove deletes an endpoint and what it had not received yet.

            deliveries lists the latest deliveries to an endpoint, newest first: each delivery's id,
            the event's id (webhook-id) and type, its status (pending, delivered, failed), its next
            attempt and every attempt's result. A 2xx within 10 s acknowledges; otherwise it is sent
            again after 5 s, 5 min, 30 min, 2 h, 5 h, then every 10 h, for 3 days; then failed.
            retry sends a delivery again now, whatever its status, with the same webhook-id:

              keybound webhook deliveries https://payments.example.com/keybound
              keybound webhook retry whd_AbCdEfGhIjKlMnOpQrStUv

            The server may be running meanwhile: it reads the endpoints from the database.
            """,
        refusals: "a URL or event refused, no such endpoint or delivery")

    static func run(_ raw: [String]) -> Int32 { command.run(raw) }

    /// One line per delivery under a header; the attempts' results last.
    private static func table(_ deliveries: [WebhookDeliveryInfo]) -> String {
        let header = ["DELIVERY", "WEBHOOK-ID", "TYPE", "STATUS", "CREATED", "NEXT", "ATTEMPTS"]
        let rows = deliveries.map { delivery in
            [
                delivery.id, delivery.messageID, delivery.type, delivery.status,
                Timestamp.format(delivery.createdAt), delivery.nextAttemptAt.map(Timestamp.format) ?? "-",
                delivery.attempts.isEmpty
                    ? "-" : delivery.attempts.map { "\($0.number):\($0.result)" }.joined(separator: " "),
            ]
        }
        return columns([header] + rows, indent: 0)
    }
}
