import Foundation
import KeyboundCrypto
import KeyboundServer
import KeyboundTestSupport
import KeyboundWire
import Testing

/// `keybound receipt verify`: a receipt of an approval confirmed through a live server verifies
/// against the server's JWK Set, fetched over loopback or read from a file; a changed one fails
/// with the step that caught it and exit 1.
@Suite("keybound receipt verify")
struct ReceiptCommandTests {
    static let issuer = "http://127.0.0.1:8420"

    /// A live server with an issuer, alice's device, and the receipt of her approval.
    final class Approved {
        let sandbox: Sandbox
        let server: Server
        let receipt: String
        let deviceKey: P256SigningKey
        let receiptFile: URL
        /// `GET /oauth/jwks` on the live server.
        let jwksURL: String
        let jwks: Data

        init() async throws {
            sandbox = try Sandbox()
            var configuration = Configuration.testing(
                databasePath: sandbox.directory.appendingPathComponent("keybound.sqlite").path)
            configuration.issuer = ReceiptCommandTests.issuer
            configuration.serverID = "keybound-cli"
            server = try Server(configuration: configuration)
            try server.start()
            let base = try #require(server.baseURL).absoluteString
            jwksURL = (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/oauth/jwks"
            deviceKey = try P256SigningKey()
            receipt = try await Self.approve(server, deviceKey)
            receiptFile = sandbox.directory.appendingPathComponent("receipt.jwt")
            try Data((receipt + "\n").utf8).write(to: receiptFile)
            jwks = await server.handle(HTTPRequest(method: "GET", path: "/oauth/jwks")).body
        }

        deinit { server.stop(gracePeriod: 1) }

        /// alice signs up, binds a device, and approves a transfer of 0.5 ETH with it.
        private static func approve(_ server: Server, _ key: P256SigningKey) async throws -> String {
            func send(_ method: String, _ path: String, _ body: [String: Any]?, token: String? = nil)
                async throws
                -> [String: Any]
            {
                var headers = ["Content-Type": "application/json"]
                if let token { headers["Authorization"] = "Bearer \(token)" }
                let response = await server.handle(
                    HTTPRequest(
                        method: method, path: path, headers: headers,
                        body: try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()))
                #expect((200..<300).contains(response.status), "\(path): \(response.status)")
                return try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            }
            _ = try await send(
                "POST", "/v1/accounts", ["username": "alice", "password": "correct horse battery"])
            let login = try await send(
                "POST", "/v1/sessions/password",
                ["username": "alice", "password": "correct horse battery", "client_id": "cli-tests"])
            let token = try #require(login["access_token"] as? String)
            let device = try await send(
                "POST", "/v1/devices",
                [
                    "public_key": Base64URL.encode(key.publicKey.spkiDER), "name": "phone",
                    "key_protection": "emulator",
                ], token: token)
            let created = try await send(
                "POST", "/v1/approvals",
                [
                    "device_id": try #require(device["device_id"] as? String),
                    "action": ["type": "transfer", "amount": "0.5", "asset": "ETH", "to": "0x12ab34cd56ef"],
                ], token: token)
            let id = try #require(created["approval_id"] as? String)
            let encoded = try #require(created["payload"] as? String)
            let payload = try #require(Base64URL.decode(encoded))
            _ = try await send(
                "POST", "/v1/approvals/\(id)/confirm",
                ["signature": Base64URL.encode(try key.signature(for: payload).derRepresentation)],
                token: token)
            return try #require(
                try await send("GET", "/v1/approvals/\(id)", nil, token: token)["receipt"] as? String)
        }

        /// `keybound receipt verify FILE --jwks URL ARGUMENTS…`.
        func verify(_ file: URL? = nil, jwks: String? = nil, _ arguments: [String] = []) throws -> Reply {
            try sandbox.run(
                ["receipt", "verify", (file ?? receiptFile).path, "--jwks", jwks ?? jwksURL] + arguments)
        }

        /// Writes `text` to a file of the sandbox.
        func file(_ name: String, _ text: String) throws -> URL {
            let url = sandbox.directory.appendingPathComponent(name)
            try Data(text.utf8).write(to: url)
            return url
        }
    }

    /// Exit 1, `{"ok":false,"error":{"code":code,…}}` with `--json`.
    static func expectRefusal(_ reply: Reply, code: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        #expect(reply.status == 1, "\(reply.text) \(reply.stderr)", sourceLocation: sourceLocation)
        let error = try #require(try reply.object()["error"] as? JSONObject, sourceLocation: sourceLocation)
        #expect(error["code"] as? String == code, "\(error)", sourceLocation: sourceLocation)
    }

    @Test("a live receipt verifies against the JWK Set over loopback and from a file, and prints the action")
    func verifies() async throws {
        let approved = try await Approved()
        let plain = try approved.verify()
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.text.hasPrefix("verified: transfer 0.5 ETH to 0x12ab34cd56ef\n"), "\(plain.text)")
        #expect(
            plain.text.contains("server     keybound-cli") && plain.text.contains("issuer     \(Self.issuer)")
        )

        let jwksFile = try approved.file("jwks.json", String(decoding: approved.jwks, as: UTF8.self))
        let pinned = try expectSuccess(
            try approved.verify(
                jwks: jwksFile.path, ["--issuer", Self.issuer, "--server-id", "keybound-cli", "--json"]))
        let action = try #require(pinned["action"] as? JSONObject)
        #expect(action["amount"] as? String == "0.5" && action["to"] as? String == "0x12ab34cd56ef")
        #expect(
            pinned["server_id"] as? String == "keybound-cli" && pinned["device_attested"] as? Bool == false)
    }

    @Test("a changed byte in the header, the claims or the signature fails step 1, exit 1")
    func tamperedFailsStepOne() async throws {
        let approved = try await Approved()
        let parts = approved.receipt.split(separator: ".").map(String.init)
        for segment in 0..<3 {
            var bytes = [UInt8](try #require(Base64URL.decode(parts[segment])))
            bytes[bytes.count / 2] ^= 0x01
            var tampered = parts
            tampered[segment] = Base64URL.encode(Data(bytes))
            let file = try approved.file("tampered-\(segment).jwt", tampered.joined(separator: "."))
            try Self.expectRefusal(try approved.verify(file, ["--json"]), code: "issuer_signature_invalid")
            let plain = try approved.verify(file)
            #expect(plain.status == 1 && plain.text.isEmpty)
            #expect(plain.stderr.contains("step 1 (the issuer's signature) failed"), "\(plain.stderr)")
        }
        try Self.expectRefusal(
            try approved.verify(nil, ["--issuer", "https://other.example", "--json"]),
            code: "issuer_signature_invalid")
        try Self.expectRefusal(
            try approved.verify(nil, ["--server-id", "elsewhere", "--json"]), code: "payload_mismatch")
    }

    /// Claims re-signed by a key added to the JWK Set file: what the issuer's signature cannot
    /// catch, steps 2 and 3 do.
    @Test("a device signature that does not verify fails step 2, a payload naming another action step 3")
    func stepsTwoAndThree() async throws {
        let approved = try await Approved()
        let forger = try P256SigningKey()
        var jwk = try ECPublicJWK(x963: forger.publicKey.x963Representation)
        jwk.kid = "forger"
        let published = try JWKSet(json: JSON.parse(approved.jwks))
        let jwksFile = try approved.file(
            "jwks.json",
            String(decoding: JSON.serialize(JWKSet(keys: published.keys + [jwk]).json), as: UTF8.self))
        func forged(_ name: String, _ change: (inout ReceiptClaims) throws -> Void) throws -> URL {
            var claims = try ReceiptClaims(json: try CompactJWS(approved.receipt).claims())
            try change(&claims)
            let header = JSONValue.object([
                JSONMember("alg", .string("ES256")), JSONMember("typ", .string(ReceiptClaims.type)),
                JSONMember("kid", .string("forger")),
            ])
            let jws = try CompactJWS.serialize(header: header, payload: JSON.serialize(claims.json)) {
                try forger.signature(for: $0).rawRepresentation
            }
            return try approved.file(name, jws)
        }
        try expectSuccess(
            try approved.verify(try forged("same.jwt") { _ in }, jwks: jwksFile.path, ["--json"]))
        let signature = try forged("signature.jwt") { $0.signature[$0.signature.count - 1] ^= 0x01 }
        try Self.expectRefusal(
            try approved.verify(signature, jwks: jwksFile.path, ["--json"]), code: "device_signature_invalid")
        let key = try forged("jwk.jwt") { $0.deviceKey = jwk }
        try Self.expectRefusal(
            try approved.verify(key, jwks: jwksFile.path, ["--json"]), code: "device_signature_invalid")
        let mismatch = try forged("mismatch.jwt") { claims in
            let original = try SigningPayload(parsing: claims.payload)
            let other = try SigningPayload(
                purpose: .approve, server: original.server, device: original.device,
                challenge: original.challenge,
                expires: original.expires,
                action: .transfer(
                    try TransferAction(amount: DecimalAmount("500"), asset: "ETH", to: "0xattacker")))
            claims.payload = other.bytes
            claims.signature = try approved.deviceKey.signature(for: other.bytes).derRepresentation
        }
        try Self.expectRefusal(
            try approved.verify(mismatch, jwks: jwksFile.path, ["--json"]), code: "payload_mismatch")
        let plain = try approved.verify(mismatch, jwks: jwksFile.path)
        #expect(
            plain.stderr.contains("step 3 (the signed payload matches the receipt) failed"), "\(plain.stderr)"
        )
    }

    @Test(
        "a JWK Set that is not one, or cannot be fetched, is refused; --jwks is required; help lists receipt")
    func badInput() async throws {
        let approved = try await Approved()
        let notJWKS = try approved.file("not.json", #"{"keys": 1}"#)
        try Self.expectRefusal(try approved.verify(jwks: notJWKS.path, ["--json"]), code: "jwks_invalid")
        try Self.expectRefusal(
            try approved.verify(jwks: approved.jwksURL + "-missing", ["--json"]), code: "jwks_unavailable")
        let missing = try approved.sandbox.run(["receipt", "verify", approved.receiptFile.path])
        expectUsageError(
            missing, mentioning: "--jwks FILE|URL is required", command: "keybound receipt verify:")
        let root = try approved.sandbox.run(["--help"])
        #expect(root.text.contains("\n  receipt "), "\(root.text)")
        let help = try approved.sandbox.run(["receipt", "--help"])
        #expect(help.status == 0 && help.text.contains("usage: keybound receipt verify FILE --jwks FILE|URL"))
    }
}
