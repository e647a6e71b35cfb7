import Foundation
import KeyboundWire
import Testing

@testable import KeyboundServer

@Suite("Hostile input")
struct InputTests {
    static let postRoutes = [
        "/v1/accounts", "/v1/sessions/password", "/v1/sessions/refresh", "/v1/devices", "/v1/challenges",
        "/v1/sessions/device", "/v1/approvals", "/v1/approvals/apr_AAAAAAAAAAAAAAAAAAAAAA/confirm",
    ]

    static let badBodies: [(String, ProblemCode)] = [
        ("", .invalidRequest),
        ("{", .invalidRequest),
        ("[]", .invalidRequest),
        ("null", .invalidRequest),
        ("\"text\"", .invalidRequest),
        ("{\"username\":\"a\",\"username\":\"b\"}", .invalidRequest),
        ("{\"unexpected\":1}", .unknownMember),
        ("{\"username\":1,\"password\":true,\"client_id\":null}", .invalidRequest),
        ("{} trailing", .invalidRequest),
        (String(repeating: "[", count: 5000), .invalidRequest),
        ("{\"a\":\"\\ud800\"}", .invalidRequest),
        ("{\"a\":\"\u{01}\"}", .invalidRequest),
        (String(decoding: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], as: UTF8.self), .invalidRequest),
    ]

    @Test(arguments: Engine.all) func malformedUnknownAndMistypedBodiesGive400ProblemsNever500(engine: Engine)
        async throws
    {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let token = try await live.client.login("alice").accessToken
        for route in Self.postRoutes {
            for (body, code) in Self.badBodies {
                let reply = try await live.client.send("POST", route, body: Data(body.utf8), token: token)
                #expect(reply.status == 400, "\(route) \(body.prefix(40))")
                #expect(reply.header("Content-Type") == "application/problem+json")
                let problem = try #require(reply.problem, "\(route) \(body.prefix(40))")
                #expect(problem.status == 400)
                if route == "/v1/accounts" || body.hasPrefix("{\"unexpected") == false {
                    #expect(
                        problem.code == code || problem.code == .unknownMember, "\(route) \(body.prefix(40))")
                }
                #expect(problem.type == "urn:keybound:problem:\(problem.code.rawValue)")
            }
        }
        // Raw invalid UTF-8 bytes, not through a Swift string.
        let reply = try await live.client.send(
            "POST", "/v1/accounts", body: Data([0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D]))
        #expect(reply.status == 400)
    }

    @Test(arguments: Engine.all) func bodyOver64KiBIs413(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let padding = String(repeating: "a", count: 64 * 1024)
        let body = Data(#"{"username":"\#(padding)","password":"x"}"#.utf8)
        let reply = try await live.client.send("POST", "/v1/accounts", body: body)
        #expect(reply.status == 413)
        #expect(reply.problem?.code == .bodyTooLarge)
        // Exactly at the limit is accepted by the HTTP layer (and then judged on content).
        let atLimit = Data(repeating: 0x20, count: 64 * 1024 - 2) + Data("{}".utf8)
        let reply2 = try await live.client.send("POST", "/v1/accounts", body: atLimit)
        #expect(reply2.status == 400)
    }

    @Test(arguments: Engine.all) func wrongContentTypeUnknownPathAndMethod(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        let form = try await live.client.send(
            "POST", "/v1/accounts", body: Data("username=a".utf8),
            contentType: "application/x-www-form-urlencoded")
        #expect(form.status == 415)
        let missing = try await live.client.send("GET", "/v2/nothing", checkSpec: false)
        #expect(missing.status == 404)
        #expect(missing.problem?.code == .notFound)
        let method = try await live.client.send("PUT", "/v1/me", body: Data("{}".utf8), checkSpec: false)
        #expect(method.status == 405)
        #expect(method.header("Allow") == "GET")
    }

    @Test(arguments: Engine.all) func auditLimitIsValidated(engine: Engine) async throws {
        let live = try TestServer(engine: engine)
        try await live.client.createAccount("alice")
        let token = try await live.client.login("alice").accessToken
        #expect(try await live.client.get("/v1/audit?limit=0", token: token).status == 400)
        #expect(try await live.client.get("/v1/audit?limit=abc", token: token).status == 400)
        let reply = try await live.client.get("/v1/audit?limit=1", token: token)
        #expect(try reply.decode(AuditListResponse.self).events.count == 1)
    }
}
