import Foundation
import Testing

@testable import KeyboundWire

/// Every message of the API, read by its strict reader and written by its builder, both from
/// its one `Member` enum. Duplicate members are refused (two parsers could otherwise disagree on
/// which value counts: a security property), and so are unknown members, wrong types and
/// missing required members.
@Suite("Every message is strict")
struct MessageStrictnessTests {
    @Test func everyMessage() throws {
        let time = Date(timeIntervalSince1970: 1_795_000_000)
        let action = ApprovalAction.transfer(
            try TransferAction(amount: DecimalAmount("0.5"), asset: "ETH", to: "0x12ab"))
        let device = DeviceInfo(
            deviceID: "dev_1", name: "Phone", keyProtection: .secureEnclave, status: .active, createdAt: time,
            lastUsedAt: time)
        let event = AuditEvent(
            time: time, type: .login, method: .password, userID: "usr_1", deviceID: "dev_1",
            sessionID: "ses_1",
            clientAddress: "192.0.2.1", count: 2, lastTime: time.addingTimeInterval(5),
            lastClientAddress: "198.51.100.2")
        try check(HealthResponse(), HealthResponse.Member.self)
        try check(CreateAccountRequest(username: "ada", password: "secret"), CreateAccountRequest.Member.self)
        try check(CreateAccountResponse(userID: "usr_1"), CreateAccountResponse.Member.self)
        try check(
            PasswordLoginRequest(username: "ada", password: "secret", clientID: "phone"),
            PasswordLoginRequest.Member.self)
        try check(RefreshRequest(refreshToken: "r"), RefreshRequest.Member.self)
        try check(
            TokenResponse(
                accessToken: "a", refreshToken: "r", expiresIn: 900, sessionID: "ses_1", userID: "usr_1"),
            TokenResponse.Member.self)
        try check(
            MeResponse(
                userID: "usr_1", username: "ada", sessionID: "ses_1", authMethod: .password, authTime: time,
                stepUpExpiresAt: time.addingTimeInterval(300)), MeResponse.Member.self)
        try check(
            BindDeviceRequest(
                publicKey: Data([1, 2, 3]), name: "Phone", keyProtection: .secureEnclave,
                appAttest: AppAttestBinding(keyID: Data([9]), attestation: Data([10]))),
            BindDeviceRequest.Member.self)
        try check(BindDeviceResponse(deviceID: "dev_1"), BindDeviceResponse.Member.self)
        try check(device, DeviceInfo.Member.self)
        try check(DeviceListResponse(devices: [device]), DeviceListResponse.Member.self)
        try check(ChallengeRequest(deviceID: "dev_1"), ChallengeRequest.Member.self)
        try check(
            ChallengeResponse(challengeID: "chl_1", payload: Data([4, 5]), expiresAt: time),
            ChallengeResponse.Member.self)
        try check(
            DeviceLoginRequest(challengeID: "chl_1", signature: Data([6]), appAttestAssertion: Data([11])),
            DeviceLoginRequest.Member.self)
        try check(CreateApprovalRequest(deviceID: "dev_1", action: action), CreateApprovalRequest.Member.self)
        try check(
            ApprovalChallengeResponse(approvalID: "apr_1", payload: Data([7]), expiresAt: time),
            ApprovalChallengeResponse.Member.self)
        try check(
            ConfirmApprovalRequest(signature: Data([8]), appAttestAssertion: Data([12])),
            ConfirmApprovalRequest.Member.self)
        try check(ConfirmApprovalResponse(), ConfirmApprovalResponse.Member.self)
        try check(
            ApprovalResponse(
                approvalID: "apr_1", status: .approved, deviceID: "dev_1", action: action, createdAt: time,
                expiresAt: time, decidedAt: time), ApprovalResponse.Member.self)
        try check(event, AuditEvent.Member.self)
        // Passkeys and App Attest.
        let tokens = TokenResponse(
            accessToken: "a", refreshToken: "r", expiresIn: 900, sessionID: "ses_1", userID: "usr_1")
        try check(
            PasskeyRegistrationOptionsRequest(
                username: "ada", displayName: "Ada", attestation: .direct, clientID: "web:1"),
            PasskeyRegistrationOptionsRequest.Member.self)
        try check(
            PasskeyCreationOptions(
                rpID: "example.org", rpName: "Example", userID: Data([1]), userName: "ada",
                userDisplayName: "Ada",
                challenge: Data([2]), algorithms: [-7], timeout: 300_000, excludeCredentials: [],
                userVerification: "required", attestation: .none), PasskeyCreationOptions.Member.self)
        try check(
            PasskeyRegistrationResult(
                credentialID: Data([3]), format: "none", algorithm: -7, signCount: 0, username: "ada",
                tokens: tokens), PasskeyRegistrationResult.Member.self)
        try check(
            PasskeyLoginOptionsRequest(username: "ada", clientID: "web:1"),
            PasskeyLoginOptionsRequest.Member.self)
        try check(
            PasskeyRequestOptions(
                challenge: Data([4]), timeout: 300_000, rpID: "example.org", userVerification: "required"),
            PasskeyRequestOptions.Member.self)
        try check(
            PasskeyLoginResult(username: "ada", credentialID: Data([5]), signCount: 1, tokens: tokens),
            PasskeyLoginResult.Member.self)
        let passkey = PasskeyInfo(
            passkeyID: "pky_1", credentialID: Data([6]), algorithm: -7, attestationFormat: "none",
            attested: false,
            backupEligible: true, backedUp: true, createdAt: time, lastUsedAt: time)
        try check(passkey, PasskeyInfo.Member.self)
        try check(PasskeyListResponse(passkeys: [passkey]), PasskeyListResponse.Member.self)
        try check(
            AppAttestChallengeResponse(challenge: Data([7]), expiresAt: time),
            AppAttestChallengeResponse.Member.self)
        try check(AppAttestBinding(keyID: Data([8]), attestation: Data([9])), AppAttestBinding.Member.self)
        try check(AuditListResponse(events: [event]), AuditListResponse.Member.self)
        try check(
            Problem(status: 401, code: .invalidCredentials, title: "Invalid credentials", detail: "d"),
            Problem.Member.self)
    }

    /// The checks for one message, from a sample whose optional members are all present.
    private func check<Message: WireMessage & Equatable, Member: MemberName>(
        _ sample: Message, _ member: Member.Type, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let name = "\(Message.self)"
        guard case .object(let members) = sample.json else {
            Issue.record("\(name) is not an object", sourceLocation: sourceLocation)
            return
        }
        // The builder writes exactly the reader's members, in the enum's order, and reads back.
        #expect(
            members.map(\.name) == Member.allCases.map(\.rawValue), "\(name)", sourceLocation: sourceLocation)
        #expect(try Message(jsonData: sample.jsonData) == sample, "\(name)", sourceLocation: sourceLocation)

        func decode(_ members: [JSONMember]) throws(WireFailure) -> Message {
            try Message(jsonData: JSON.serialize(.object(members)))
        }
        #expect(
            throws: WireError(.unknownMember, "unknown member \"extra\""), "\(name)",
            sourceLocation: sourceLocation
        ) {
            try decode(members + [JSONMember("extra", .integer(1))])
        }
        for (index, member) in members.enumerated() {
            let label = "\(name).\(member.name)"
            var duplicated = members
            duplicated.insert(member, at: index + 1)
            #expect(
                throws: WireError(.invalidRequest, "duplicate member \"\(member.name)\""), "\(label)",
                sourceLocation: sourceLocation
            ) { try decode(duplicated) }

            var mistyped = members
            mistyped[index].value = Self.ofAnotherType(member.value)
            #expect(throws: WireError.self, "\(label)", sourceLocation: sourceLocation) {
                try decode(mistyped)
            }

            // A missing member is an error, unless it is optional: then it reads as null.
            var removed = members
            removed.remove(at: index)
            if let decoded = try? decode(removed) {
                guard case .object(let written) = decoded.json else { continue }
                #expect(
                    written.first { $0.name == member.name }?.value == .null, "\(label) may not be missing",
                    sourceLocation: sourceLocation)
            }
        }
    }

    /// A value of another JSON type than `value`.
    private static func ofAnotherType(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string: .integer(1)
        case .number: .string("1")
        case .bool: .string("true")
        case .array: .object([])
        case .object, .null: .array([])
        }
    }

    /// JSON built in code gets no duplicate past the reader either (the parser refuses them in text).
    @Test func theReaderRefusesADuplicateTheParserDidNotSee() {
        let value = JSONValue.object([
            JSONMember("device_id", .string("a")), JSONMember("device_id", .string("b")),
        ])
        #expect(throws: WireError(.invalidRequest, "duplicate member \"device_id\"")) {
            try ChallengeRequest(json: value)
        }
    }
}
