import Foundation
import Testing

@testable import KeyboundWire

@Suite("Strict JSON")
struct JSONTests {
    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", ".5", "-", "1e", "tru", "nul",
        "\"\\x\"", "\"\\u12\"", "\"\\udc00\"", "\"\\ud800x\"", "{\"a\":1,\"a\":2}", "[] []", "\"\u{7}\"",
        "NaN", "Infinity", "'a'",
    ])
    func rejectsInvalidJSON(_ text: String) {
        #expect(throws: WireError.self) { try JSON.parse(Data(text.utf8)) }
    }

    /// Objects and arrays end alike: empty at once, or member by member until the bracket that
    /// closes them, which an error names.
    @Test func containersEndAtTheirOwnBracket() throws {
        #expect(try JSON.parse(Data("[ ]".utf8)) == .array([]))
        #expect(try JSON.parse(Data("{ }".utf8)) == .object([]))
        #expect(
            try JSON.parse(Data(#"[1 ,{"a" : [ ] } ]"#.utf8))
                == .array([.integer(1), .object([JSONMember("a", .array([]))])]))
        #expect(throws: WireError(.invalidRequest, "malformed JSON at byte 3: expected ',' or ']'")) {
            try JSON.parse(Data("[1 2]".utf8))
        }
        #expect(throws: WireError(.invalidRequest, "malformed JSON at byte 7: expected ',' or '}'")) {
            try JSON.parse(Data(#"{"a":1 "b":2}"#.utf8))
        }
        #expect(throws: WireError(.invalidRequest, "malformed JSON at byte 3: unexpected end")) {
            try JSON.parse(Data("[1 ".utf8))
        }
    }

    @Test func rejectsInvalidUTF8AndDeepNesting() {
        #expect(throws: WireError.self) { try JSON.parse(Data([0x22, 0xC3, 0x28, 0x22])) }
        #expect(throws: WireError.self) { try JSON.parse(Data([0x22, 0xFF, 0x22])) }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        #expect(throws: WireError.self) { try JSON.parse(Data(deep.utf8)) }
    }

    @Test func parsesAndWritesRoundTrip() throws {
        let text = #"{"a":[1,-2.5e3,true,false,null],"b":"x\"\\\/\b\f\n\r\t\u0001é😀","c":{}}"#
        let value = try JSON.parse(Data(text.utf8))
        let written = JSON.serialize(value)
        #expect(try JSON.parse(written) == value)
        #expect(
            String(decoding: written, as: UTF8.self)
                == #"{"a":[1,-2.5e3,true,false,null],"b":"x\"\\/\b\f\n\r\t\u0001é😀","c":{}}"#)
        #expect(try JSON.parse(Data(#""\ud83d\ude00""#.utf8)) == .string("😀"))
    }

    @Test func readerRejectsUnknownMembersAndWrongTypes() throws {
        #expect(throws: WireError(.unknownMember, "unknown member \"extra\"")) {
            try CreateAccountRequest(jsonData: Data(#"{"username":"a","password":"b","extra":1}"#.utf8))
        }
        #expect(throws: WireError.self) {
            try CreateAccountRequest(jsonData: Data(#"{"username":"a"}"#.utf8))
        }
        #expect(throws: WireError.self) {
            try CreateAccountRequest(jsonData: Data(#"{"username":1,"password":"b"}"#.utf8))
        }
        #expect(throws: WireError.self) { try TokenResponse(jsonData: Data(#"{"expires_in":1.5}"#.utf8)) }
        #expect(throws: WireError.self) {
            try BindDeviceRequest(
                jsonData: Data(#"{"public_key":"a+b=","name":"n","key_protection":"software"}"#.utf8))
        }
        #expect(throws: WireError.self) {
            try BindDeviceRequest(
                jsonData: Data(#"{"public_key":"AAAA","name":"n","key_protection":"tpm"}"#.utf8))
        }
    }

    @Test func messagesRoundTrip() throws {
        let tokens = TokenResponse(
            accessToken: "a", refreshToken: "r", expiresIn: 900, sessionID: "ses_1", userID: "usr_1")
        #expect(try TokenResponse(jsonData: tokens.jsonData) == tokens)
        #expect(
            String(decoding: tokens.jsonData, as: UTF8.self)
                == #"{"access_token":"a","refresh_token":"r","token_type":"Bearer","expires_in":900,"session_id":"ses_1","user_id":"usr_1"}"#
        )
        let device = DeviceInfo(
            deviceID: "dev_1", name: "Phone", keyProtection: .secureEnclave, status: .active,
            createdAt: Date(timeIntervalSince1970: 0), lastUsedAt: nil)
        #expect(try DeviceInfo(jsonData: device.jsonData) == device)
        let problem = Problem(
            status: 401, code: .invalidCredentials, title: "Invalid credentials", detail: "d")
        #expect(try Problem(jsonData: problem.jsonData) == problem)
        #expect(problem.type == "urn:keybound:problem:invalid_credentials")
    }
}

@Suite("Base64url, timestamps, amounts")
struct EncodingTests {
    @Test func base64URL() {
        #expect(Base64URL.encode(Data([0xFB, 0xFF])) == "-_8")
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
        #expect(Base64URL.decode("") == Data())
        for bad in ["-_8=", "+/8", "a", "ab c", "-_9"] { #expect(Base64URL.decode(bad) == nil, "\(bad)") }
    }

    @Test func timestamps() {
        #expect(Timestamp.format(unixSeconds: 0) == "1970-01-01T00:00:00Z")
        #expect(Timestamp.format(unixSeconds: 951_782_400) == "2000-02-29T00:00:00Z")
        #expect(Timestamp.format(unixSeconds: 1_795_000_000) == "2026-11-18T11:06:40Z")
        #expect(Timestamp.parseUnixSeconds("2026-11-18T11:06:40Z") == 1_795_000_000)
        #expect(Timestamp.format(Date(timeIntervalSince1970: 1.9)) == "1970-01-01T00:00:01Z")
        for bad in [
            "2026-11-18T10:13:20", "2026-11-18 10:13:20Z", "2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z", "2026-11-18T24:00:00Z", "2026-11-18T10:13:20.5Z",
            "2026-11-18T10:13:20+00:00",
        ] {
            #expect(Timestamp.parse(bad) == nil, "\(bad)")
        }
    }

    @Test(arguments: ["0.5", "1", "1200", "0.000000000000000001", "123456789012345678901234567890.5"])
    func validAmounts(_ text: String) throws {
        #expect(try DecimalAmount(text).text == text)
    }

    @Test(arguments: [
        "", "0", "0.0", "00.5", "01", ".5", "5.", "-1", "+1", "1e3", "1,5", " 1", "1.0000000000000000001",
        "1234567890123456789012345678901", "NaN", "٣",
    ])
    func invalidAmounts(_ text: String) {
        #expect(throws: WireError.self) { try DecimalAmount(text) }
    }
}

@Suite("Signing payload")
struct SigningPayloadTests {
    let challenge = Data((0..<32).map { UInt8($0) })
    let expires = Date(timeIntervalSince1970: 1_795_000_060)

    @Test func loginPayloadBytesAreExact() throws {
        let payload = try SigningPayload(
            purpose: .login, server: "bank.example", device: "dev_abc", challenge: challenge,
            expires: expires,
            action: nil)
        let expected =
            #"{"keybound":1,"purpose":"login","server":"bank.example","device":"dev_abc","#
            + #""challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8","expires":"2026-11-18T11:07:40Z"}"#
        #expect(String(decoding: payload.bytes, as: UTF8.self) == expected)
        #expect(try SigningPayload(parsing: payload.bytes) == payload)
    }

    @Test func approvePayloadCarriesTheActionInOrder() throws {
        let action = ApprovalAction.transfer(
            try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: "0x12ab"))
        let payload = try SigningPayload(
            purpose: .approve, server: "srv \"quoted\"", device: "dev_abc", challenge: challenge,
            expires: expires,
            action: action)
        let text = String(decoding: payload.bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"keybound":1,"purpose":"approve","server":"srv \"quoted\"","#))
        #expect(text.hasSuffix(#","action":{"type":"transfer","amount":"0.5","asset":"ETH","to":"0x12ab"}}"#))
        let parsed = try SigningPayload(parsing: payload.bytes)
        #expect(parsed.action == action)
        #expect(parsed.server == "srv \"quoted\"")
    }

    @Test func onlyTheCanonicalEncodingParses() throws {
        let payload = try SigningPayload(
            purpose: .login, server: "s", device: "d", challenge: challenge, expires: expires, action: nil)
        let text = String(decoding: payload.bytes, as: UTF8.self)
        let variants = [
            text.replacingOccurrences(of: ",", with: ", "),
            text.replacingOccurrences(
                of: #""keybound":1,"purpose":"login""#, with: #""purpose":"login","keybound":1"#),
            text.replacingOccurrences(of: #""keybound":1"#, with: #""keybound":2"#),
            text.replacingOccurrences(of: "}", with: #","extra":1}"#),
            text.replacingOccurrences(of: #""s""#, with: #""\u0073""#),
            text.replacingOccurrences(of: "login", with: "approve"),
            text.replacingOccurrences(of: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", with: "AAEC"),
            text + " ",
        ]
        for variant in variants {
            #expect(throws: WireError.self, "\(variant)") { try SigningPayload(parsing: Data(variant.utf8)) }
        }
    }

    @Test func invariants() {
        #expect(throws: WireError.self) {
            try SigningPayload(
                purpose: .login, server: "s", device: "d", challenge: Data(count: 31), expires: expires,
                action: nil)
        }
        #expect(throws: WireError.self) {
            try SigningPayload(
                purpose: .approve, server: "s", device: "d", challenge: challenge, expires: expires,
                action: nil)
        }
    }
}
