import Foundation
import Testing

@testable import KeyboundWire

@Suite("Usernames, client ids and ids: one grammar each")
struct IdentifierTests {
    /// Literals go through `init(stringLiteral:)`; text from elsewhere through the checking
    /// `init(_:)`, as here.
    @Test func usernamesAreValidatedAndLowercased() throws {
        let mixedCase = "Ada.Lovelace+1@example"
        #expect(try Username(mixedCase).rawValue == "ada.lovelace+1@example")
        #expect(try Username(mixedCase) == "ada.lovelace+1@example")
        // The Kelvin sign (U+212A) lowercases to an ASCII "k": it must not pass as the user "k".
        for bad in [
            "", String(repeating: "a", count: 65), "ada lovelace", "ada/1", "ädä", "ada\n", "\u{212A}",
        ] {
            #expect(
                throws: WireError(.invalidRequest, "username must be 1-64 of a-z 0-9 . _ @ + -"), "\(bad)"
            ) {
                try Username(bad)
            }
        }
    }

    @Test func clientIDsShareTheRecipientGrammar() throws {
        let good = "iPhone-15:install_3.a"
        #expect(try ClientID(good).rawValue == good)
        for bad in ["", String(repeating: "a", count: 129), "a b", "a/b", "a@b", "é"] {
            #expect(throws: WireError.self, "\(bad)") { try ClientID(bad) }
            #expect(throws: WireError.self, "\(bad)") {
                try TransferAction(amount: DecimalAmount("1"), asset: "ETH", to: bad)
            }
        }
        _ = try TransferAction(amount: DecimalAmount("1"), asset: "ETH", to: good)
    }

    @Test func messagesRefuseWhatTheGrammarsRefuse() {
        #expect(throws: WireError.self) {
            try PasswordLoginRequest(
                jsonData: Data(#"{"username":"a b","password":"p","client_id":"c"}"#.utf8))
        }
        #expect(throws: WireError.self) {
            try PasswordLoginRequest(
                jsonData: Data(#"{"username":"a","password":"p","client_id":"c d"}"#.utf8))
        }
    }

    @Test func serverIDs() {
        #expect(Grammar.isIdentifier("dev_0123456789abcdef-x"))
        for bad in ["", String(repeating: "a", count: 65), "../me", "a.b", "a b", "a%2F"] {
            #expect(!Grammar.isIdentifier(bad), "\(bad)")
        }
    }
}

@Suite("Open vocabularies")
struct OpenVocabularyTests {
    /// A newer server's audit types, methods and problem codes decode in an older app: the
    /// list still reads, and the values keep their text.
    @Test func unknownValuesFromANewerServerDecode() throws {
        let events = try AuditListResponse(
            jsonData: Data(
                #"""
                {"events":[{"time":"2026-11-18T11:06:40Z","type":"passkey_added","method":"passkey",\#
                "user_id":"usr_1","device_id":null,"session_id":null,"client_address":null,"count":1,\#
                "last_time":"2026-11-18T11:06:40Z"}]}
                """#.utf8)
        ).events
        #expect(events.map(\.type) == [AuditEventType(rawValue: "passkey_added")])
        #expect(events.map(\.method) == [AuditMethod(rawValue: "passkey")])
        #expect(!AuditEventType.known.contains(events[0].type))
        let problem = try Problem(
            jsonData: Data(
                #"{"type":"urn:keybound:problem:passkey_needed","title":"t","status":403,"code":"passkey_needed","detail":"d"}"#
                    .utf8))
        #expect(problem.code.rawValue == "passkey_needed")
    }

    /// Closed sets refuse what they do not know: the client sends them, or must understand them.
    @Test func closedSetsRefuseUnknownValues() {
        #expect(throws: WireError.self) {
            try BindDeviceRequest(
                jsonData: Data(#"{"public_key":"AAAA","name":"n","key_protection":"tpm"}"#.utf8))
        }
    }

    @Test func knownValuesAreDistinctAndRoundTrip() {
        #expect(Set(AuditEventType.known).count == AuditEventType.known.count)
        #expect(Set(AuditMethod.known).count == AuditMethod.known.count)
        #expect(Set(ProblemCode.known).count == ProblemCode.known.count)
        #expect(AuditMethod(.device) == .device)
        #expect(AuditEventType(rawValue: "login") == .login)
    }
}
