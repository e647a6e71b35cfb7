import Foundation
import KeyboundTestSupport
import KeyboundWire

/// `GET /v1/me` of a DPoP-bound session (RFC 9449): a password login with a proof opens it, then
/// every request carries a fresh proof by the session's key, naming the nonce of the latest
/// answer. Per request: one P-256 sign here, one P-256 verify and one write (the proof's single
/// use) in the server.
final class DPoPMeWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let key: DPoPTestKey
    private let accessToken: String
    private var nonce: String?
    /// Every request carries `Host: 127.0.0.1`: the proofs' URIs are on it.
    private static let base = "http://127.0.0.1"

    init(port: UInt16, username: String) throws {
        connection = try HTTPConnection(port: port, keepsHeaders: true)
        key = try DPoPTestKey()
        let password = "bench password of " + username
        try expect(
            connection.send(
                API.createAccount, CreateAccountRequest(username: try Username(username), password: password)),
            201, "create account")
        // Any answer to a request with a DPoP header carries the server's nonce.
        nonce = try connection.send(API.health, headers: [DPoP.proofHeader: "none"]).headers["dpop-nonce"]
        let login = try connection.send(
            API.passwordLogin,
            PasswordLoginRequest(
                username: try Username(username), password: password, clientID: "bench-dpop"),
            headers: [
                DPoP.proofHeader: try key.proof(
                    "POST", Self.base + API.passwordLogin.template, at: Date(), nonce: nonce)
            ])
        try expect(login, 200, "password login with a DPoP proof")
        let tokens = try TokenResponse(jsonData: login.body)
        guard tokens.tokenType == DPoP.scheme else {
            throw HTTPClientError(description: "the login with a proof opened a \(tokens.tokenType) session")
        }
        accessToken = tokens.accessToken
        guard try step() else { throw HTTPClientError(description: "the first DPoP GET /v1/me failed") }
    }

    func step() throws -> Bool {
        let proof = try key.proof(
            "GET", Self.base + API.me.template, at: Date(), nonce: nonce, accessToken: accessToken)
        let reply = try connection.send(
            API.me, headers: ["Authorization": "\(DPoP.scheme) \(accessToken)", DPoP.proofHeader: proof])
        if let fresh = reply.headers["dpop-nonce"] { nonce = fresh }
        return reply.status == 200
    }
}

/// DPoP-bound `GET /v1/me` with the raw verifies measured right before and right after it.
struct DPoPNumbers {
    let result: LoadResult
    let clients: Int
    let verifiesAround: (before: Double, after: Double)

    /// The raw verify rate the ratio is taken to: the mean of the two.
    var verifiesPerSecond: Double { (verifiesAround.before + verifiesAround.after) / 2 }
    var ratio: Double { verifiesPerSecond > 0 ? result.perSecond / verifiesPerSecond : 0 }
}

extension Benchmark {
    /// DPoP-bound `GET /v1/me` on the server of the device logins (target 8): each request needs
    /// one verify, as a device login does, and one write.
    func measureDPoPReads(port: UInt16) throws {
        let clients = try parallelMap(options.concurrency, threads: options.concurrency) { index in
            try DPoPMeWorker(port: port, username: "bench-dpop-\(index)")
        }
        progress("DPoP-bound GET /v1/me, \(clients.count) clients, \(durations.reads) s")
        let before = try measureVerify("just before the DPoP requests")
        let result = runLoad(clients, warmup: durations.warmup, duration: durations.reads)
        let after = try measureVerify("just after the DPoP requests")
        report.dpopReads = DPoPNumbers(
            result: result, clients: clients.count, verifiesAround: (before, after))
    }
}

extension Report {
    /// Target 8 (issue 23): DPoP-bound `GET /v1/me` per second against raw P-256 verifies.
    var dpopVerdicts: [Verdict] {
        guard let dpop = dpopReads else { return [] }
        var details = [
            "\(f(dpop.result.perSecond, 0)) requests/s (a fresh proof each: P-256 sign here, verify and "
                + "single-use write in the server) vs \(f(dpop.verifiesPerSecond, 0)) raw verifies/s (mean of "
                + "\(f(dpop.verifiesAround.before, 0)) just before and \(f(dpop.verifiesAround.after, 0)) just after)",
            "\(dpop.clients) clients, SQLite synchronous=\(options.synchronous.rawValue), \(latency(dpop.result)), "
                + "\(failures(dpop.result))",
        ]
        if let reads {
            details.append(
                "bearer GET /v1/me on the same server: \(f(reads.me.perSecond, 0))/s; DPoP-bound reaches "
                    + "\(f(reads.me.perSecond > 0 ? dpop.result.perSecond / reads.me.perSecond : 0, 2)) of it"
            )
        }
        return [
            Verdict(
                number: "8", id: "dpop_me",
                title: "DPoP-bound GET /v1/me per s / raw P-256 verifies/s (1 core)",
                ratio: dpop.ratio, comparison: ">=", target: 0.5, stretch: nil, details: details,
                numbers: [
                    "requests_per_second": dpop.result.perSecond,
                    "verifies_per_second": dpop.verifiesPerSecond,
                    "clients": dpop.clients, "p50_ms": dpop.result.percentile(0.5),
                    "p99_ms": dpop.result.percentile(0.99), "cpu_us_each": dpop.result.cpuPerOperation,
                    "failed": dpop.result.failed, "seconds": dpop.result.window,
                ])
        ]
    }
}
