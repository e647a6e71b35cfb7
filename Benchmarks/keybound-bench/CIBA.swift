import Foundation
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire

/// The CIBA client the bench registers: a payment back end asking users' phones to approve
/// transfers (OpenID CIBA Core 1.0 in poll mode, a RAR `keybound_transfer`).
enum BenchCIBA {
    /// What every request asks to approve: 0.5 ETH to a whole address.
    static func authorizationDetails() throws -> String {
        let transfer = try TransferAction(
            amount: DecimalAmount("0.5"), asset: "ETH", to: "0x12a4c8b2e19d7f3a5c6b8e0d4f2a1b3c9d7e5fef")
        return String(
            decoding: JSON.serialize(TransferAuthorizationDetails.json(.transfer(transfer))), as: UTF8.self)
    }

    /// Registers the back end, confidential and `--ciba`, on `configuration`'s database (which
    /// must name the issuer), through the operators' API.
    /// - Returns: the header fields of its form POSTs: `client_secret_basic` with its secret.
    static func registerClient(_ configuration: Configuration) throws -> [String: String] {
        var registration = OAuthClientRegistration(name: "bench wallet", redirectURIs: [])
        registration.confidential = true
        registration.ciba = true
        let client = try ProviderAdministration(configuration: configuration).addClient(registration)
        guard let secret = client.secret else {
            throw HTTPClientError(description: "the CIBA client was given no secret")
        }
        var headers = BenchProvider.formHeaders
        headers["Authorization"] = "Basic " + Data("\(client.clientID):\(secret)".utf8).base64EncodedString()
        return headers
    }
}

/// One CIBA round trip, as a payment back end and a user's phone make it: the back end's
/// `POST /oauth/bc-authorize` (form-encoded, `client_secret_basic`, `login_hint`, `scope openid`,
/// a binding message and the transfer); the phone's `GET /v1/approvals?status=pending`, a P-256
/// signature of the listed payload with its bound key and `POST /v1/approvals/{id}/confirm`; the
/// back end's `POST /oauth/token` with the CIBA grant, answered with the tokens and the receipt.
/// The back end polls once, after the decision (a poll before it would be answered
/// `authorization_pending`, and one sooner than the interval after it `slow_down`). Per round trip
/// the server writes four times (the request and its approval, the decision, the redemption
/// with a session and its tokens), verifies the device's signature and signs three ES256 JWTs
/// (the access token, the ID token and the receipt).
final class CIBAWorker: LoadWorker, @unchecked Sendable {
    /// The user's phone: its account, bound key and session (the back end shares its connection).
    private let phone: DeviceLoginWorker
    private let headers: [String: String]
    private let authorizeBody: Data
    private static let tokenPrefix =
        BenchProvider.form([("grant_type", "urn:openid:params:grant-type:ciba")]) + "&auth_req_id="

    /// Creates the user, binds the phone's key, and makes one round trip.
    init(port: UInt16, username: String, headers: [String: String]) throws {
        phone = try DeviceLoginWorker(port: port, username: username)
        self.headers = headers
        authorizeBody = Data(
            BenchProvider.form([
                ("login_hint", username), ("scope", "openid"), ("binding_message", "bench transfer"),
                ("authorization_details", try BenchCIBA.authorizationDetails()),
            ]).utf8)
        guard try step() else { throw HTTPClientError(description: "the first CIBA round trip failed") }
    }

    func step() throws -> Bool {
        let connection = phone.connection
        let asked = try connection.send(
            "POST", OAuthPaths.backchannelAuthentication, exactHeaders: headers, body: authorizeBody)
        guard asked.status == 200,
            let requestID = try JSON.parse(asked.body)[member: "auth_req_id"]?.stringValue
        else { return false }
        let listed = try connection.send(
            "GET", API.listApprovals.template + "?status=pending", bearer: phone.accessToken)
        guard listed.status == 200,
            let pending = try PendingApprovalListResponse(jsonData: listed.body).approvals.first
        else { return false }
        let signature = try phone.key.signature(for: pending.payload).derRepresentation
        let confirmed = try connection.send(
            API.confirmApproval, ConfirmApprovalRequest(signature: signature),
            parameters: [pending.approvalID],
            bearer: phone.accessToken)
        guard confirmed.status == 200 else { return false }
        let tokens = try connection.send(
            "POST", OAuthPaths.token, exactHeaders: headers, body: Data((Self.tokenPrefix + requestID).utf8))
        guard tokens.status == 200 else { return false }
        return try JSON.parse(tokens.body)[member: "keybound_receipt"]?.stringValue != nil
    }
}

/// CIBA round trips on one engine (issue 24, item 7), with the raw verifies measured around them.
struct CIBANumbers {
    /// `SQLite synchronous=full`, `PostgreSQL 16.4 synchronous_commit=on`.
    let engine: String
    let result: LoadResult
    let verifies: VerifiesAround
    let clients: Int
}

extension Benchmark {
    /// CIBA round trips on a new server on `configuration` (its database migrated, the issuer
    /// set), one user and phone per client. Printed, not asserted.
    func measureCIBA(_ configuration: Configuration, engine: String) throws {
        let headers = try BenchCIBA.registerClient(configuration)
        let (server, port) = try start(configuration)
        defer { server.stop(gracePeriod: 1) }
        let workers = try parallelMap(options.concurrency, threads: options.concurrency) { index in
            try CIBAWorker(port: port, username: "bench-ciba-\(index)", headers: headers)
        }
        progress(
            "CIBA round trips (bc-authorize, the phone lists, signs and confirms, token), \(engine), "
                + "\(workers.count) clients, \(durations.ciba) s")
        let (result, verifies) = try loadBetweenVerifies(
            workers, duration: durations.ciba, "the CIBA round trips")
        report.ciba.append(
            CIBANumbers(engine: engine, result: result, verifies: verifies, clients: workers.count))
    }

    /// ``measureCIBA(_:engine:)`` on SQLite, on a database of its own.
    func measureSQLiteCIBA() throws {
        var configuration = configuration("ciba", synchronous: options.synchronous)
        configuration.issuer = BenchProvider.issuer
        try Seed.createSchema(path: String(configuration.databaseURL.dropFirst("sqlite:".count)))
        try measureCIBA(configuration, engine: "SQLite synchronous=\(options.synchronous.rawValue)")
    }

    /// `--ciba`: only the CIBA round trips, on SQLite, then on a throwaway PostgreSQL cluster.
    func measureCIBAOnly() throws {
        report.raw.verifiesPerSecond = try measureVerify()
        try measureSQLiteCIBA()
        guard options.postgres, let cluster = postgresCluster() else { return }
        try measurePostgresCIBA(cluster, version: (try? cluster.sql("SHOW server_version")) ?? "?")
    }
}

extension Report {
    /// Issue 24's figure without a target: CIBA round trips on each engine.
    var cibaInformation: [(title: String, line: String, numbers: [String: Any])] {
        ciba.map { numbers in
            let result = numbers.result
            let ratio = numbers.verifies.ratio(of: result.perSecond)
            return (
                "CIBA round trips/s / raw P-256 verifies/s (1 core), \(numbers.engine)",
                "\(f(result.perSecond, 0)) round trips/s = \(f(ratio, 3)) x \(f(numbers.verifies.perSecond, 0)) "
                    + "verifies/s; one = POST /oauth/bc-authorize (client_secret_basic, a keybound_transfer: the "
                    + "request and its approval written) + GET /v1/approvals?status=pending + P-256 sign + POST "
                    + "/v1/approvals/{id}/confirm (verified, decided) + POST /oauth/token CIBA grant (redeemed: a "
                    + "session, access token, ID token and receipt: 3 ES256 signs); \(latency(result)), "
                    + "\(failures(result)), \(numbers.clients) clients",
                [
                    "engine": numbers.engine, "per_second": result.perSecond, "ratio_to_verifies": ratio,
                    "verifies_per_second": numbers.verifies.perSecond, "p50_ms": result.percentile(0.5),
                    "p99_ms": result.percentile(0.99), "cpu_us_each": result.cpuPerOperation,
                    "failed": result.failed, "seconds": result.window, "clients": numbers.clients,
                ]
            )
        }
    }
}
