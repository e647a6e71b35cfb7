import Foundation
import KeyboundServer
import KeyboundWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The demo's last chapter: the operator console (docs/console.md), on the listener of its own the
// demo's server opens, through its API as the console's page calls it.

extension DemoStory {
    /// The operator console: an administrator made from the command line signs in on the
    /// console's listener (where Ada's own password is refused), reads the overview of this run's
    /// traffic, finds Ada, revokes her device (whose next login challenge is then refused), and
    /// finds their own name on the change in the audit log.
    func operatorConsole(configuration: Configuration, baseURL: URL, consoleURL: URL) async throws {
        narrator.chapter("10. The operator console: what happened, and what must go")
        let administration = try AccountAdministration(configuration: configuration)
        let adminID = try administration.addUser(username: "ops", password: password)
        try administration.grant(.admin, to: "ops")
        narrator.step(
            "Make an administrator (keybound user add ops --admin)", "user \(adminID.prefix(8))…, role admin")

        let signIn = consoleURL.appendingPathComponent("admin/v1/sessions/password")
        func signInBody(_ name: String) -> JSONValue {
            .object([
                JSONMember("username", .string(name)), JSONMember("password", .string(password)),
                JSONMember("client_id", .string("console:demo")),
            ])
        }
        let refused = try await Self.send("POST", signIn, signInBody(username))
        try check(
            refused.status == 403 && refused.json[member: "code"]?.stringValue == "admin_required",
            "Ada's password on the console is refused")
        let signedIn = try await Self.send("POST", signIn, signInBody("ops"))
        let token = try requireValue(
            signedIn.json[member: "access_token"]?.stringValue, "the console's token")
        narrator.step(
            "Sign in on the console's own listener, \(consoleURL.absoluteString)",
            "ops signed in; Ada's right password there: 403 admin_required")

        let overview = try await Self.send(
            "GET", consoleURL.appendingPathComponent("admin/v1/overview"), token: token)
        var totals: [String: Int64] = [:]
        if case .array(let series)? = overview.json[member: "series"] {
            for item in series {
                guard let name = item[member: "name"]?.stringValue,
                    case .array(let counts)? = item[member: "counts"]
                else { continue }
                totals[name] = counts.compactMap(\.integerValue).reduce(0, +)
            }
        }
        let logins = ["password", "device", "passkey", "oauth"].map { "\($0) \(totals["login." + $0] ?? 0)" }
        try check(
            ["login.password", "login.device", "login.passkey", "login.oauth", "approval.approved"].allSatisfy
            {
                (totals[$0] ?? 0) > 0
            }, "the overview counts this run's logins and approvals")
        let failures = ["password", "device", "passkey"].map { totals["failure." + $0] ?? 0 }.reduce(0, +)
        narrator.step(
            "Read the overview (last 24 h, 5-minute buckets)",
            "logins: \(logins.joined(separator: ", ")); failed \(failures); approvals approved "
                + "\(totals["approval.approved"] ?? 0), denied \(totals["approval.denied"] ?? 0)")

        let found = try await Self.send(
            "GET",
            try requireValue(URL(string: consoleURL.absoluteString + "/admin/v1/users?query=ad"), "a URL"),
            token: token)
        guard case .array(let users)? = found.json[member: "users"],
            let ada = users.first(where: { $0[member: "username"]?.stringValue == username }),
            let userID = ada[member: "user_id"]?.stringValue
        else { throw DemoFailure(description: "the console did not find \(username)") }
        let detail = try await Self.send(
            "GET", consoleURL.appendingPathComponent("admin/v1/users/\(userID)"), token: token)
        guard case .array(let devices)? = detail.json[member: "devices"],
            let device = devices.last(where: { $0[member: "status"]?.stringValue == "active" }),
            let deviceID = device[member: "device_id"]?.stringValue
        else { throw DemoFailure(description: "Ada has no active device on the console") }
        let active = devices.filter { $0[member: "status"]?.stringValue == "active" }.count
        narrator.step(
            "Find Ada and her devices",
            "\(devices.count) bound, \(active) active; the newest: \(device[member: "name"]?.stringValue ?? "?") "
                + "(\(device[member: "attested"] == .bool(true) ? "App Attest" : "not attested"))")

        let revoked = try await Self.send(
            "DELETE", consoleURL.appendingPathComponent("admin/v1/devices/\(deviceID)"), token: token)
        try check(revoked.status == 204, "the console revokes the device")
        let challenge = try await Self.send(
            "POST", baseURL.appendingPathComponent("v1/challenges"),
            .object([JSONMember("device_id", .string(deviceID))]))
        try check(
            challenge.status == 403 && challenge.json[member: "code"]?.stringValue == "device_revoked",
            "the revoked device's next login is refused")
        narrator.step(
            "Revoke the device on the console", "204; its next login challenge: 403 device_revoked")

        let audit = try await Self.send(
            "GET",
            try requireValue(
                URL(
                    string: consoleURL.absoluteString + "/admin/v1/audit?user=\(username)&type=device_revoked"
                ), "a URL"),
            token: token)
        guard case .array(let events)? = audit.json[member: "events"],
            events.contains(where: { $0[member: "actor_id"]?.stringValue == adminID })
        else { throw DemoFailure(description: "the audit log does not name the administrator") }
        narrator.step("Read the audit log", "device_revoked, by administrator \(adminID.prefix(8))… (ops)")
    }

    /// A JSON request as the console's page sends it.
    /// - Returns: the status and the answer's JSON (null for none).
    static func send(_ method: String, _ url: URL, _ body: JSONValue? = nil, token: String? = nil)
        async throws
        -> (status: Int, json: JSONValue)
    {
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let token { request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = JSON.serialize(body)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data.isEmpty ? .null : try JSON.parse(data))
    }
}
