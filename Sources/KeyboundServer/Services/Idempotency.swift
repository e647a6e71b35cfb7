import Foundation
import KeyboundCrypto
import KeyboundWire

// Idempotent retries (docs/server.md, "Idempotent retries"; draft-ietf-httpapi-idempotency-key-header):
// a POST with an `Idempotency-Key` keeps its answer in the transaction that makes its change, so
// that the same request sent again, by a client that never learnt whether the first one
// committed, gets that answer instead of a second account, device, approval or session.

/// A POST with an `Idempotency-Key`, while its handler runs (``current``). The write transaction
/// of the handler that returns the route's answer (``Route/answer``) keeps that answer in the row
/// of the key, in the same transaction (``write(_:_:)``, called by ``CommittedEffects``): the
/// change and its answer commit together or not at all.
///
/// **The row.** Its id is SHA-256 of the caller's credential (the `Authorization` header, empty
/// for a request without one) and the key: a key belongs to whoever presents the credential, so
/// someone else's session that sends the same key finds nothing and is served afresh. (A session
/// is not the scope: a login or a sign-up has none, and the client address changes when a phone
/// changes networks, which is when it retries.) The row holds the request's fingerprint
/// (SHA-256 of its method, path, query, credential, media type and body; not its DPoP proof,
/// which is new on every attempt, nor its client address) and the answer (status, headers,
/// body) sealed with AES-256-GCM under a key derived with HKDF from the Idempotency-Key and the
/// request: neither is stored, so the database never holds a usable token. Rows live
/// ``lifetime`` seconds; housekeeping deletes them after.
///
/// **Answers.** The same key with the same request: the kept answer, read before the handler
/// runs, without doing anything again. With another request: 422 `idempotency_key_reused`.
/// While the first is still running on this instance: 409 `idempotency_key_in_flight`; on
/// another instance, the later of the two writes finds the first one's row in its transaction
/// (PostgreSQL rolls one back with 40001 and runs it again), undoes its own work and answers
/// with the first one's answer. Refusals are not kept: a refused request changed nothing it
/// was asked to, and its retry is judged afresh.
final class IdempotentRequest: Sendable {
    /// The request whose handler is running on this thread, if it carries a key.
    @TaskLocal static var current: IdempotentRequest?

    /// How long a key is kept, in seconds: a day, as the draft's examples and common practice.
    static let lifetime = 86_400

    /// The row's id: hex of SHA-256 of the credential and the key.
    let id: String
    /// Hex of SHA-256 of the request.
    let fingerprint: String
    /// The AES-256-GCM key of the answer.
    private let sealingKey: Data
    private let now: Date
    /// The route's answer from a write's value (``Route/answer``).
    private let answer: @Sendable (Any, any SQLConnection) throws -> HTTPResponse?
    /// The answer a committed write of this request kept.
    let kept = Locked<HTTPResponse?>(nil)

    /// - Parameters:
    ///   - key: the header's String (``IdempotencyKey/parse(_:)``).
    ///   - answer: the route's ``Route/answer`` for this request.
    init(
        key: String, _ context: RequestContext,
        answer: @escaping @Sendable (Any, any SQLConnection) throws -> HTTPResponse?
    ) throws {
        let request = context.request
        let credential = Data((request.headers["authorization"] ?? "").utf8)
        let query = request.query.sorted { $0.key < $1.key }.map { $0.key + "=" + $0.value }
        let parts = [
            Data(request.method.utf8), Data(request.path.utf8), Data(query.joined(separator: "&").utf8),
            credential, Data((request.headers["content-type"] ?? "").utf8), request.body,
        ]
        id = Hex.encode(Self.digest("keybound idempotency key", [credential, Data(key.utf8)]))
        fingerprint = Hex.encode(Self.digest("keybound idempotency fingerprint", parts))
        sealingKey = try HKDFSHA256.deriveKey(
            inputKeyMaterial: Data(key.utf8), salt: Self.digest("keybound idempotency salt", parts),
            info: Data("keybound idempotent answer v1".utf8), outputByteCount: AES256GCM.keyByteCount)
        now = context.now
        self.answer = answer
    }

    /// SHA-256 of `label` and `parts`, each part after its length: no two lists of parts read
    /// the same.
    private static func digest(_ label: String, _ parts: [Data]) -> Data {
        var input = Data(label.utf8)
        for part in parts {
            input.append(contentsOf: Int64(part.count).bigEndianBytes)
            input.append(part)
        }
        return Digest.sha256(input)
    }

    /// Runs `body` as a write of this request on `connection`, inside its transaction: first
    /// looks for an answer kept meanwhile (by the same request on another instance), then, when
    /// `body` returns the route's answer, keeps it. Once the request has kept its answer, its
    /// later writes are plain ones.
    /// - Throws: ``KeptAnswer`` when the key's row exists: nothing of `body` is done then.
    func write<T>(_ connection: any SQLConnection, _ body: (any SQLConnection) throws -> T) throws -> T {
        if kept.withLock({ $0 }) != nil { return try body(connection) }
        if let earlier = try keptAnswer(connection, removingExpired: true) { throw earlier }
        let result = try body(connection)
        guard let response = try answer(result, connection) else { return result }
        let sealed = try AES256GCM.seal(
            Self.serialize(response), key: sealingKey, authenticating: Data(id.utf8))
        let inserted = try connection.execute(
            """
            INSERT INTO idempotency_keys (id, fingerprint, response, created_at, expires_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (id) DO NOTHING
            """,
            [
                .text(id), .text(fingerprint), .text(Base64URL.encode(sealed)), .date(now),
                .date(now.adding(seconds: Self.lifetime)),
            ])
        guard inserted == 1 else {
            // Committed by another transaction since this one looked (READ COMMITTED would let it).
            throw try keptAnswer(connection, removingExpired: false)
                ?? DatabaseError.engine(code: 0, message: "an idempotency key vanished while it was kept")
        }
        AfterCommit.run { [kept] in kept.withLock { $0 = response } }
        return result
    }

    /// The answer kept under the key, if it has not expired. An expired row is deleted when
    /// `removingExpired` (in a write), so that the key can be kept again.
    func keptAnswer(_ connection: any SQLConnection, removingExpired: Bool) throws -> KeptAnswer? {
        guard
            let row = try connection.queryOne(
                "SELECT fingerprint, response, expires_at FROM idempotency_keys WHERE id = ?", [.text(id)])
        else { return nil }
        guard Date(milliseconds: try row.integer(2)) > now else {
            if removingExpired {
                try connection.execute("DELETE FROM idempotency_keys WHERE id = ?", [.text(id)])
            }
            return nil
        }
        return KeptAnswer(fingerprint: try row.text(0), sealed: try row.text(1))
    }

    /// The kept answer, for this request: 422 when it is another request's.
    /// - Throws: a storage error when the sealed answer does not open (it cannot, unless the row
    ///   was tampered with).
    func replay(_ kept: KeptAnswer) throws -> HTTPResponse? {
        guard kept.fingerprint == fingerprint else { return nil }
        guard let sealed = Base64URL.decode(kept.sealed),
            let opened = try? AES256GCM.open(sealed, key: sealingKey, authenticating: Data(id.utf8)),
            let response = Self.deserialize(opened)
        else { throw DatabaseError.engine(code: 0, message: "a kept idempotent answer does not open") }
        return response
    }

    /// `{"status":…,"headers":{…},"body":base64url}`, headers in name order.
    private static func serialize(_ response: HTTPResponse) -> Data {
        JSON.serialize(
            .object([
                JSONMember("status", .integer(response.status)),
                JSONMember(
                    "headers",
                    .object(
                        response.headers.sorted { $0.key < $1.key }.map {
                            JSONMember($0.key, .string($0.value))
                        })),
                JSONMember("body", .string(Base64URL.encode(response.body))),
            ]))
    }

    private static func deserialize(_ data: Data) -> HTTPResponse? {
        guard let value = try? JSON.parse(data), let status = value[member: "status"]?.integerValue,
            case .object(let headers)? = value[member: "headers"],
            let body = value[member: "body"]?.stringValue.flatMap(Base64URL.decode)
        else { return nil }
        var fields: [String: String] = [:]
        for header in headers {
            guard let text = header.value.stringValue else { return nil }
            fields[header.name] = text
        }
        return HTTPResponse(status: Int(status), headers: fields, body: body)
    }
}

/// The row of a key, found by a request that carries it: thrown out of a write, which it undoes.
struct KeptAnswer: Error {
    let fingerprint: String
    /// The answer, sealed (base64url).
    let sealed: String
}

extension Application {
    /// Runs `route`'s handler for `context`; a POST with an `Idempotency-Key` as
    /// ``IdempotentRequest`` says: the kept answer, 422, 409 (with `Retry-After`), or the handler's
    /// answer, kept by its write. A malformed key is 400 `invalid_request`. (In OAuth's format at
    /// the provider's endpoints, with the same codes.)
    func respond(_ route: Route, _ context: RequestContext) throws -> HTTPResponse {
        let request = context.request
        let name = IdempotencyKey.header.lowercased()
        guard let answer = route.answer, let field = request.headers[name] else {
            return try route.handler(self, context)
        }
        func refuse(_ status: Int, _ code: ProblemCode, _ detail: String, _ headers: [String: String] = [:])
            -> HTTPResponse
        {
            guard route.speaksOAuth else { return APIError(status, code, detail, headers: headers).response }
            return OAuthError(status: status, error: code.rawValue, description: detail, headers: headers)
                .response
        }
        guard !request.repeatedHeaderNames.contains(name), let key = IdempotencyKey.parse(field) else {
            return refuse(
                400, .invalidRequest,
                "Idempotency-Key must be one quoted string (RFC 8941) of \(IdempotencyKey.lengths) printable "
                    + "ASCII characters, such as a random UUID: \"8e03978e-40d5-43e8-bc93-6894a57f9324\".")
        }
        let idempotent = try IdempotentRequest(key: key, context) { [self] value, connection in
            try answer(self, context, value, connection)
        }
        guard idempotencyKeysInFlight.withLock({ $0.insert(idempotent.id).inserted }) else {
            return refuse(
                409, .idempotencyKeyInFlight,
                "The request first sent with this Idempotency-Key is still running: send it again shortly.",
                ["Retry-After": "1"])
        }
        defer { _ = idempotencyKeysInFlight.withLock { $0.remove(idempotent.id) } }
        let earlier: KeptAnswer
        if let kept = try database.read({ try idempotent.keptAnswer($0, removingExpired: false) }) {
            earlier = kept
        } else {
            do {
                let response = try IdempotentRequest.$current.withValue(idempotent) {
                    try route.handler(self, context)
                }
                return idempotent.kept.withLock { $0 } ?? response
            } catch let kept as KeptAnswer {
                earlier = kept  // kept by the same request on another instance, meanwhile
            }
        }
        guard let replay = try idempotent.replay(earlier) else {
            return refuse(
                422, .idempotencyKeyReused,
                "This Idempotency-Key was used with another request: send a new key with a new request.")
        }
        // A token bound to a DPoP key answers only with a proof by that key (checked, not used up:
        // a replay changes nothing), as the first request did.
        if PresentedToken.scheme(of: request) == .dpop { _ = try checkCaller(context) }
        return replay
    }
}
