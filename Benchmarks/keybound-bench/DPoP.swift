import Foundation
import KeyboundCrypto
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
        // Any answer to a request with a DPoP header carries the server's nonce.
        nonce = try connection.send(API.health, headers: [DPoP.proofHeader: "none"]).headers["dpop-nonce"]
        let proof = try key.proof("POST", Self.base + API.passwordLogin.template, at: Date(), nonce: nonce)
        let tokens = try signUpAndLogIn(
            connection, username: username, clientID: "bench-dpop", headers: [DPoP.proofHeader: proof])
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

/// What a DPoP-bound `GET /v1/me` cannot go below here: a bearer `GET /v1/me` on the same server
/// and connections, plus the proof's own work done in this process — made and signed as
/// ``DPoPMeWorker`` does (same size, a nonce and `ath` included), then read as the server reads it
/// (`DPoPProofToken`), its key's thumbprint taken and its signature verified with the key parsed
/// once. What it leaves out is what DPoP adds in the server besides: the hand-over to a handler
/// thread, the proof's single use written through the group commit, and the small checks (nonce,
/// `htu`, `ath`, the replay id's hash).
final class DPoPBoundWorker: LoadWorker, @unchecked Sendable {
    private let connection: HTTPConnection
    private let accessToken: String
    private let key: DPoPTestKey
    /// A nonce of the length of the server's (base64url of 32 bytes).
    private let nonce = Base64URL.encode(Data(repeating: 7, count: 32))

    init(connection: HTTPConnection, accessToken: String) throws {
        self.connection = connection
        self.accessToken = accessToken
        key = try DPoPTestKey()
    }

    func step() throws -> Bool {
        let proof = try key.proof(
            "GET", "http://127.0.0.1" + API.me.template, at: Date(), nonce: nonce, accessToken: accessToken)
        guard try connection.send(API.me, bearer: accessToken).status == 200 else { return false }
        let token = try DPoPProofToken(proof)
        guard Base64URL.encode(Digest.sha256(token.key.thumbprintInput)) == key.thumbprint else {
            return false
        }
        return key.signingKey.publicKey.isValidSignature(
            try P256Signature(rawRepresentation: token.jws.signature), for: token.jws.signingInput)
    }
}

/// DPoP-bound `GET /v1/me`, in alternating rounds with its bound and with bearer `GET /v1/me`, and
/// the raw verifies measured right before and right after.
struct DPoPNumbers {
    let result: LoadResult
    /// ``DPoPBoundWorker``: bearer `GET /v1/me` + the proof's sign, parse and verify.
    let bound: LoadResult
    /// Bearer `GET /v1/me` on the same server and connections as the bound.
    let bearer: LoadResult
    let clients: Int
    let verifiesAround: VerifiesAround

    /// The raw verify rate the ratio is taken to.
    var verifiesPerSecond: Double { verifiesAround.perSecond }
    var ratio: Double { verifiesAround.ratio(of: result.perSecond) }
}

extension Benchmark {
    /// DPoP-bound `GET /v1/me` (target 8): each request needs one verify, as a device login does,
    /// and one write. Measured in alternating rounds with its bound and bearer `GET /v1/me` on the
    /// connections of `bearerClients` (device clients of the same server, with their access
    /// tokens), so that the CPU each costs can be compared.
    func measureDPoPReads(port: UInt16, bearerClients: [DeviceLoginWorker]) throws {
        let clients = try parallelMap(options.concurrency, threads: options.concurrency) { index in
            try DPoPMeWorker(port: port, username: "bench-dpop-\(index)")
        }
        let bound = try bearerClients.map {
            try DPoPBoundWorker(connection: $0.connection, accessToken: $0.accessToken)
        }
        let bearer = bearerClients.map {
            GetWorker(connection: $0.connection, endpoint: API.me, bearer: $0.accessToken)
        }
        progress(
            "DPoP-bound GET /v1/me, its bound (bearer + sign + verify) and bearer GET /v1/me alternating, "
                + "\(clients.count) clients, \(durations.reads) s each")
        let before = try measureVerify("just before the DPoP requests")
        let results = alternate(
            [clients, bound, bearer], names: ["dpop", "bound", "bearer"], rounds: 2,
            roundSeconds: durations.reads / 2, warmup: 0.1)
        let after = try measureVerify("just after the DPoP requests")
        report.dpopReads = DPoPNumbers(
            result: results[0], bound: results[1], bearer: results[2], clients: clients.count,
            verifiesAround: VerifiesAround(before, after))
    }
}

extension Report {
    /// Target 8 (issue 23): DPoP-bound `GET /v1/me` per second against raw P-256 verifies.
    var dpopVerdicts: [Verdict] {
        guard let dpop = dpopReads else { return [] }
        let (result, bound, bearer) = (dpop.result, dpop.bound, dpop.bearer)
        let details = [
            "\(f(result.perSecond, 0)) requests/s (a fresh proof each: P-256 sign here, verify and "
                + "single-use write in the server) vs \(f(dpop.verifiesPerSecond, 0)) raw verifies/s (mean of "
                + "\(f(dpop.verifiesAround.before, 0)) just before and \(f(dpop.verifiesAround.after, 0)) just after)",
            "\(dpop.clients) clients, SQLite synchronous=\(options.synchronous.rawValue), \(latency(result)), "
                + "\(failures(result))",
            "in alternating rounds: its bound (bearer GET /v1/me + the proof signed, read and verified in the "
                + "client) \(f(bound.perSecond, 0))/s, \(latency(bound)); bearer GET /v1/me \(f(bearer.perSecond, 0))/s, "
                + "\(latency(bearer)); DPoP reaches \(f(bound.perSecond > 0 ? result.perSecond / bound.perSecond : 0, 2)) "
                + "of its bound",
            "CPU per request: bearer \(f(bearer.cpuPerOperation, 0)) us + proof (sign, read, verify) "
                + "\(f(bound.cpuPerOperation - bearer.cpuPerOperation, 0)) us + the rest of DPoP in the server "
                + "(hand-over, single-use write, checks) \(f(result.cpuPerOperation - bound.cpuPerOperation, 0)) us",
        ]
        return [
            Verdict(
                number: "8", id: "dpop_me",
                title: "DPoP-bound GET /v1/me per s / raw P-256 verifies/s (1 core)",
                ratio: dpop.ratio, comparison: ">=", target: 0.5, stretch: nil, details: details,
                numbers: [
                    "requests_per_second": result.perSecond,
                    "verifies_per_second": dpop.verifiesPerSecond,
                    "clients": dpop.clients, "p50_ms": result.percentile(0.5),
                    "p99_ms": result.percentile(0.99), "cpu_us_each": result.cpuPerOperation,
                    "failed": result.failed, "seconds": result.window,
                    "bound_per_second": bound.perSecond, "bound_cpu_us_each": bound.cpuPerOperation,
                    "bound_p50_ms": bound.percentile(0.5), "bound_failed": bound.failed,
                    "bearer_per_second": bearer.perSecond, "bearer_cpu_us_each": bearer.cpuPerOperation,
                    "bearer_p50_ms": bearer.percentile(0.5), "bearer_failed": bearer.failed,
                ])
        ]
    }
}
