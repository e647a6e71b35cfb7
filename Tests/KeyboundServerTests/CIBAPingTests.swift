import Foundation
import KeyboundTestSupport
import KeyboundWire
import Testing

@testable import KeyboundServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// CIBA's ping mode (CIBA Core §10.2) through a live server: the client's notification endpoint
/// is a receiver outside Keybound (Python's http.server on loopback), which logs what it gets.
@Suite("CIBA ping mode")
struct CIBAPingTests {
    /// A notification endpoint on loopback: answers 503 to its first `failFirst` requests, then
    /// 204, and logs each request's `Authorization` header and body as a JSON line.
    final class PingReceiver: Sendable {
        let port: UInt16
        private let directory: TemporaryDirectory
        private let child: ChildProcess

        var url: String { "http://127.0.0.1:\(port)/ciba/ping" }

        static let program = """
            import json, sys
            from http.server import BaseHTTPRequestHandler, HTTPServer
            port, log, fail_first = int(sys.argv[1]), open(sys.argv[2], "a"), int(sys.argv[3])
            seen = [0]
            class Handler(BaseHTTPRequestHandler):
                def do_POST(self):
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    seen[0] += 1
                    status = 503 if seen[0] <= fail_first else 204
                    log.write(json.dumps({"path": self.path, "authorization": self.headers.get("Authorization"),
                        "content_type": self.headers.get("Content-Type"), "body": body.decode(), "status": status}) + "\\n")
                    log.flush()
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                def log_message(self, *args):
                    pass
            server = HTTPServer(("127.0.0.1", port), Handler)
            print("listening", flush=True)
            server.serve_forever()
            """

        init(failFirst: Int = 0) async throws {
            directory = try TemporaryDirectory()
            port = try WebhookReceiver.freePort()
            try Self.program.write(toFile: directory.path("receiver.py"), atomically: true, encoding: .utf8)
            child = try ChildProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "python3", directory.path("receiver.py"), String(port), directory.path("pings.jsonl"),
                    String(failFirst),
                ],
                workingDirectory: directory.url, files: directory.url, name: "ping-receiver")
            try child.process.run()
            for _ in 0..<200 {
                if String(decoding: try child.output().stdout, as: UTF8.self).contains("listening") { return }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            stop()
            throw TestFailure("the ping receiver did not start")
        }

        deinit { stop() }

        func stop() {
            if child.process.isRunning {
                Foundation.kill(child.process.processIdentifier, SIGKILL)
                child.process.waitUntilExit()
            }
        }

        /// The requests logged so far.
        func pings() throws -> [JSONValue] {
            guard let text = try? String(contentsOfFile: directory.path("pings.jsonl"), encoding: .utf8)
            else {
                return []
            }
            return try text.split(separator: "\n").map { try JSON.parse(Data($0.utf8)) }
        }

        /// Waits up to 20 s for `count` requests.
        func wait(for count: Int) async throws -> [JSONValue] {
            for _ in 0..<400 {
                if try pings().count >= count { break }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            return try pings()
        }
    }

    @Test(
        "a decision pings the client with its bearer token and auth_req_id; it then fetches the tokens once",
        arguments: Engine.all)
    func pingThenFetch(engine: Engine) async throws {
        let receiver = try await PingReceiver()
        let setup = try await CIBATests.Setup(.live, engine: engine, ping: receiver.url) {
            $0.allowPrivateWebhooks = true
        }
        let token = "ping-token-" + SecureRandomBytes.token()
        let missing = try await setup.ask()
        #expect(missing.status == 400 && CIBATests.error(missing) == "invalid_request", "\(missing.text)")
        let id = try await setup.authReqID([("client_notification_token", token)])
        // Nothing is sent before the user decides.
        try await Task.sleep(nanoseconds: 1_500_000_000)
        #expect(try receiver.pings().isEmpty)
        let listed = try #require(try await setup.pending().first)
        #expect(try await setup.confirm(listed).status == 200)
        let pings = try await receiver.wait(for: 1)
        #expect(pings.count == 1)
        let ping = try #require(pings.first)
        #expect(ping[string: "authorization"] == "Bearer \(token)")
        #expect(ping[string: "path"] == "/ciba/ping")
        #expect(ping[string: "content_type"] == "application/json")
        #expect(
            try JSON.parse(Data(try #require(ping[string: "body"]).utf8))
                == .object([JSONMember("auth_req_id", .string(id))]))
        let granted = try await setup.poll(id)
        #expect(granted.status == 200, "\(granted.text)")
        #expect(CIBATests.error(try await setup.poll(id)) == "invalid_grant")
    }

    @Test("a ping the client's endpoint refuses is sent again after 5 s; a denial pings too")
    func retriedAndDenied() async throws {
        let receiver = try await PingReceiver(failFirst: 1)
        let setup = try await CIBATests.Setup(.live, ping: receiver.url) { $0.allowPrivateWebhooks = true }
        let id = try await setup.authReqID([("client_notification_token", "t0k3n")])
        let listed = try #require(try await setup.pending().first)
        let deny = try await setup.fixture.client.send(
            API.denyApproval, parameters: [listed.approvalID], token: setup.tokens.accessToken)
        #expect(deny.status == 200)
        #expect(try await receiver.wait(for: 1).first?[member: "status"] == .integer(503))
        setup.fixture.test.clock.advance(by: 6)
        let pings = try await receiver.wait(for: 2)
        #expect(pings.count == 2 && pings.last?[member: "status"] == .integer(204), "\(pings)")
        #expect(pings.last?[string: "body"] == pings.first?[string: "body"])
        #expect(CIBATests.error(try await setup.poll(id)) == "access_denied")
        // Delivered: no third ping, however long the server waits.
        setup.fixture.test.clock.advance(by: 3600)
        try await Task.sleep(nanoseconds: 1_500_000_000)
        #expect(try receiver.pings().count == 2)
    }

    @Test(
        "without --allow-private-webhooks a ping to loopback is refused by the SSRF guard; the client can still poll"
    )
    func ssrfGuard() async throws {
        let receiver = try await PingReceiver()
        let setup = try await CIBATests.Setup(.live, ping: receiver.url)
        let id = try await setup.authReqID([("client_notification_token", "t0k3n")])
        let listed = try #require(try await setup.pending().first)
        #expect(try await setup.confirm(listed).status == 200)
        try await Task.sleep(nanoseconds: 2_000_000_000)
        #expect(try receiver.pings().isEmpty)
        let result = try setup.fixture.test.database.open().read { connection in
            try connection.queryOne("SELECT last_result FROM ciba_pings", [])?.optionalText(0)
        }
        #expect(result?.contains("--allow-private-webhooks") == true, "\(result ?? "nil")")
        #expect(try await setup.poll(id).status == 200)
    }
}
