import Foundation
import KeyboundCrypto
import KeyboundTestSupport
import KeyboundWebAuthn
import KeyboundWire
import Testing

@testable import KeyboundServer

/// App Attest through the server's endpoints, under a test CA the server is configured to trust
/// in place of Apple's root: attested device binding, its refusals, `--require-app-attest`, and
/// assertions whose counter must keep rising.
@Suite("App Attest")
struct AppAttestTests {
    static let appID = "ABCDE12345.com.example.keybound"

    /// A server that trusts `ca` and accepts ``appID`` in the development environment.
    static func server(
        _ ca: TestAppAttestCA, _ engine: Engine, _ adjust: @escaping (inout Configuration) -> Void = { _ in }
    ) throws -> TestServer {
        try TestServer(.live, engine: engine) { configuration in
            configuration.appIDs = [appID]
            configuration.appAttestEnvironment = .development
            configuration.appAttestRoots = [ca.root]
            adjust(&configuration)
        }
    }

    /// A user logged in by password (fresh enough to bind a device).
    static func user(_ live: TestServer, _ name: String = "alice", clientID: String = "app-1") async throws
        -> TokenResponse
    {
        try await live.client.createAccount(name)
        return try await live.client.login(name, clientID: clientID)
    }

    /// What the app does: asks for a challenge, attests its App Attest key over the challenge and
    /// the device key, and binds the device key with the attestation. `attest` can change what is
    /// attested, to make every refusal.
    static func bind(
        _ live: TestServer, _ token: String, deviceKey: P256PublicKey, appKey: TestAppAttestKey,
        ca: TestAppAttestCA,
        attest: (_ challenge: Data) throws -> (keyID: Data, attestation: Data)
    ) async throws -> Reply {
        let issued = try await live.client.send(API.createAppAttestChallenge, token: token)
        #expect(issued.status == 201, "\(issued.text)")
        let challenge = try issued.decode(AppAttestChallengeResponse.self).challenge
        let (keyID, attestation) = try attest(challenge)
        return try await live.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: deviceKey.spkiDER, name: "iPhone", keyProtection: .secureEnclave,
                appAttest: AppAttestBinding(keyID: keyID, attestation: attestation)),
            token: token)
    }

    /// The attestation a genuine app makes for `deviceKey`.
    static func genuine(
        _ live: TestServer, appKey: TestAppAttestKey, ca: TestAppAttestCA, deviceKey: P256PublicKey,
        appID: String = appID, environment: AppAttest.Environment = .development
    ) -> (Data) throws -> (keyID: Data, attestation: Data) {
        { challenge in
            let hash = Digest.sha256(
                AppAttestClientData.binding(challenge: challenge, publicKey: deviceKey.spkiDER))
            return (
                appKey.keyID,
                try appKey.attestation(
                    ca: ca, appID: appID, environment: environment, clientDataHash: hash, now: live.clock.now)
            )
        }
    }

    @Test("an attested binding is verified, listed as attested and audited", arguments: Engine.all)
    func attestedBinding(engine: Engine) async throws {
        let ca = try TestAppAttestCA(now: Date())
        let live = try Self.server(ca, engine)
        let tokens = try await Self.user(live)
        let deviceKey = try P256SigningKey().publicKey
        let appKey = try TestAppAttestKey()
        let bound = try await Self.bind(
            live, tokens.accessToken, deviceKey: deviceKey, appKey: appKey, ca: ca,
            attest: Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey))
        #expect(bound.status == 201, "\(bound.text)")
        let deviceID = try bound.decode(BindDeviceResponse.self).deviceID
        // A second device, from another client, without App Attest.
        let other = try await live.client.login("alice", clientID: "app-2")
        let (_, plainID) = try await live.client.bindDevice(other.accessToken)

        let devices = try await live.client.send(API.listDevices, token: other.accessToken)
            .decode(DeviceListResponse.self).devices
        #expect(devices.first { $0.deviceID == deviceID }?.attested == true)
        #expect(devices.first { $0.deviceID == plainID }?.attested == false)
        let events = try await live.client.send(API.audit, token: other.accessToken)
            .decode(AuditListResponse.self).events
        #expect(
            events.contains {
                $0.type == .deviceBound && $0.method == .appAttest && $0.deviceID == deviceID
            })
        #expect(events.contains { $0.type == .deviceBound && $0.method == nil && $0.deviceID == plainID })
    }

    @Test(
        "another app, the other environment, another key id or device key, an expired leaf, an untrusted root: 400",
        arguments: Engine.all
    )
    func refusedAttestations(engine: Engine) async throws {
        let ca = try TestAppAttestCA(now: Date())
        let live = try Self.server(ca, engine)
        let tokens = try await Self.user(live)
        let token = tokens.accessToken
        let deviceKey = try P256SigningKey().publicKey
        let appKey = try TestAppAttestKey()
        func attempt(_ attest: @escaping (Data) throws -> (keyID: Data, attestation: Data)) async throws
            -> Reply
        {
            try await Self.bind(live, token, deviceKey: deviceKey, appKey: appKey, ca: ca, attest: attest)
        }
        func hash(_ challenge: Data, _ key: P256PublicKey = deviceKey) -> Data {
            Digest.sha256(AppAttestClientData.binding(challenge: challenge, publicKey: key.spkiDER))
        }

        try await expectProblem(
            attempt(
                Self.genuine(
                    live, appKey: appKey, ca: ca, deviceKey: deviceKey, appID: "ABCDE12345.com.other.app")),
            400, .rpIDMismatch)
        try await expectProblem(
            attempt(
                Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey, environment: .production)),
            400, .environmentMismatch)
        // The key id of another App Attest key.
        try await expectProblem(
            attempt { challenge in
                let (_, attestation) = try Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey)(
                    challenge)
                return (try TestAppAttestKey().keyID, attestation)
            }, 400, .invalidAttestation)
        // Made for another device key: the nonce does not cover the key being bound.
        let otherDeviceKey = try P256SigningKey().publicKey
        try await expectProblem(
            attempt(Self.genuine(live, appKey: appKey, ca: ca, deviceKey: otherDeviceKey)), 400,
            .invalidAttestation)
        // Apple's published samples hash nothing: the raw challenge as clientDataHash is refused.
        try await expectProblem(
            attempt { challenge in
                (
                    appKey.keyID,
                    try appKey.attestation(
                        ca: ca, appID: Self.appID, environment: .development, clientDataHash: challenge,
                        now: live.clock.now)
                )
            }, 400, .invalidAttestation)
        // A leaf that expired yesterday.
        try await expectProblem(
            attempt { challenge in
                let now = live.clock.now
                return (
                    appKey.keyID,
                    try appKey.attestation(
                        ca: ca, appID: Self.appID, environment: .development, clientDataHash: hash(challenge),
                        now: now, validity: (now - 4 * 86_400, now - 86_400))
                )
            }, 400, .invalidAttestation)
        // A CA the server does not trust.
        let stranger = try TestAppAttestCA(now: Date())
        try await expectProblem(
            attempt(Self.genuine(live, appKey: appKey, ca: stranger, deviceKey: deviceKey)), 400,
            .invalidAttestation)
        // Garbage where the attestation goes.
        try await expectProblem(
            attempt { _ in (appKey.keyID, Data([0xA1, 0x00])) }, 400, .malformedCredential)

        let events = try await live.client.send(API.audit, token: token).decode(AuditListResponse.self)
            .events
        let failures = events.filter { $0.type == .appAttestFailed && $0.method == .appAttest }
        #expect(failures.map(\.count).reduce(0, +) == 8)
        // None of them bound anything.
        let devices = try await live.client.send(API.listDevices, token: token).decode(
            DeviceListResponse.self)
        #expect(devices.devices.isEmpty)
    }

    @Test(
        "the challenge is the session's, single use, and expires; the default root is Apple's",
        arguments: Engine.all)
    func challenges(engine: Engine) async throws {
        let ca = try TestAppAttestCA(now: Date())
        let live = try Self.server(ca, engine) { $0.stepUpWindow = 3600 }
        let tokens = try await Self.user(live)
        let deviceKey = try P256SigningKey().publicKey
        let appKey = try TestAppAttestKey()
        // No challenge asked for.
        let attestation = try appKey.attestation(
            ca: ca, appID: Self.appID, environment: .development, clientDataHash: Data(count: 32),
            now: live.clock.now)
        let unasked = try await live.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: deviceKey.spkiDER, name: "iPhone", keyProtection: .secureEnclave,
                appAttest: AppAttestBinding(keyID: appKey.keyID, attestation: attestation)),
            token: tokens.accessToken)
        expectProblem(unasked, 400, .challengeMismatch)

        // Used once, then not again.
        var used: (keyID: Data, attestation: Data)?
        let first = try await Self.bind(
            live, tokens.accessToken, deviceKey: deviceKey, appKey: appKey, ca: ca,
            attest: { challenge in
                let made = try Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey)(challenge)
                used = made
                return made
            })
        #expect(first.status == 201, "\(first.text)")
        let replay = try #require(used)
        let again = try await live.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: deviceKey.spkiDER, name: "iPhone", keyProtection: .secureEnclave,
                appAttest: AppAttestBinding(keyID: replay.keyID, attestation: replay.attestation)),
            token: tokens.accessToken)
        expectProblem(again, 409, .challengeUsed)

        // Expired after five minutes.
        let issued = try await live.client.send(
            API.createAppAttestChallenge, token: tokens.accessToken)
        let challenge = try issued.decode(AppAttestChallengeResponse.self)
        #expect(Int(challenge.expiresAt.timeIntervalSince(live.clock.now)) == 300)
        live.clock.advance(by: 301)
        let late = try await live.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: deviceKey.spkiDER, name: "iPhone", keyProtection: .secureEnclave,
                appAttest: AppAttestBinding(keyID: replay.keyID, attestation: replay.attestation)),
            token: tokens.accessToken)
        expectProblem(late, 410, .challengeExpired)
        #expect(try await live.client.send(API.createAppAttestChallenge).status == 401)

        // A server left at Apple's root refuses the test CA's attestations.
        let apple = try TestServer(.live, engine: engine) { $0.appIDs = [Self.appID] }
        #expect(apple.server.configuration.appAttestRoots == [.appleAppAttestationRootCA])
        let appleUser = try await Self.user(apple)
        try await expectProblem(
            Self.bind(
                apple, appleUser.accessToken, deviceKey: deviceKey, appKey: appKey, ca: ca,
                attest: Self.genuine(
                    apple, appKey: appKey, ca: ca, deviceKey: deviceKey, environment: .production)),
            400, .invalidAttestation)
    }

    @Test(
        "--require-app-attest refuses an unattested binding and asks attested devices for assertions",
        arguments: Engine.all)
    func requireAppAttest(engine: Engine) async throws {
        let ca = try TestAppAttestCA(now: Date())
        let live = try Self.server(ca, engine) { $0.requireAppAttest = true }
        let tokens = try await Self.user(live)
        let plain = try await live.client.send(
            API.bindDevice,
            BindDeviceRequest(
                publicKey: try P256SigningKey().publicKey.spkiDER, name: "Phone", keyProtection: .software),
            token: tokens.accessToken)
        expectProblem(plain, 403, .appAttestRequired)

        let deviceKey = try P256SigningKey()
        let appKey = try TestAppAttestKey()
        let bound = try await Self.bind(
            live, tokens.accessToken, deviceKey: deviceKey.publicKey, appKey: appKey, ca: ca,
            attest: Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey.publicKey))
        #expect(bound.status == 201, "\(bound.text)")
        let deviceID = try bound.decode(BindDeviceResponse.self).deviceID
        let challenge = try await live.client.challenge(deviceID)
        let login = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: deviceKey))
        expectProblem(login, 403, .appAttestRequired)
    }

    /// Devices bound without App Attest before `--require-app-attest` was turned on: under the flag
    /// they get no login challenge, their logins and approvals are refused with 403
    /// `app_attest_required` before any signature is checked (a bad one too), nothing is written,
    /// and `keybound user devices --unattested` lists them. An attested device goes on.
    @Test(
        "--require-app-attest turned on later refuses devices bound without App Attest", arguments: Engine.all
    )
    func requireAppAttestRefusesDevicesBoundBefore(engine: Engine) async throws {
        let ca = try TestAppAttestCA(now: Date())
        let live = try Self.server(ca, engine)
        let tokens = try await Self.user(live)
        let (plainKey, plainID) = try await live.client.bindDevice(tokens.accessToken)
        let attestedTokens = try await live.client.login("alice", clientID: "app-2")
        let deviceKey = try P256SigningKey()
        let appKey = try TestAppAttestKey()
        let attestedID = try await Self.bind(
            live, attestedTokens.accessToken, deviceKey: deviceKey.publicKey, appKey: appKey, ca: ca,
            attest: Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey.publicKey)
        ).decode(BindDeviceResponse.self).deviceID
        // Asked for before the flag: a login challenge and an approval of the unattested device.
        let earlyChallenge = try await live.client.challenge(plainID)
        let earlyApproval = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: plainID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        live.server.stop(gracePeriod: 1)

        var configuration = live.server.configuration
        configuration.requireAppAttest = true
        let strict = try Server(configuration: configuration)
        try strict.start()
        defer { strict.stop(gracePeriod: 1) }
        let client = Client(baseURL: try #require(strict.baseURL))
        let database = try live.database.open()
        func stored() throws -> [[SQLValue]] {
            try database.read { connection in
                try [
                    "SELECT id, count, last_at FROM audit_events ORDER BY id",
                    "SELECT id FROM used_challenges ORDER BY id",
                    "SELECT scope, failures FROM throttles ORDER BY scope",
                    "SELECT id, status FROM approvals ORDER BY id",
                    "SELECT id, revoked_at FROM sessions ORDER BY id",
                    "SELECT id, last_used_at FROM devices ORDER BY id",
                ].flatMap { try connection.query($0, []).map(\.values) }
            }
        }
        let before = try stored()

        let challenge = try await client.send(API.createChallenge, ChallengeRequest(deviceID: plainID))
        expectProblem(challenge, 403, .appAttestRequired)
        #expect(challenge.problem?.detail.contains("bind the device again") == true, "\(challenge.text)")
        for signature in [try sign(earlyChallenge.payload, with: plainKey), Data("not a signature".utf8)] {
            try await expectProblem(
                client.deviceLogin(challengeID: earlyChallenge.challengeID, signature: signature), 403,
                .appAttestRequired)
        }
        try await expectProblem(
            client.send(
                API.createApproval, CreateApprovalRequest(deviceID: plainID, action: transfer()),
                token: tokens.accessToken), 403, .appAttestRequired)
        try await expectProblem(
            client.send(
                API.confirmApproval,
                ConfirmApprovalRequest(signature: sign(earlyApproval.payload, with: plainKey)),
                parameters: [earlyApproval.approvalID],
                token: tokens.accessToken), 403, .appAttestRequired)
        #expect(try stored() == before, "a refusal wrote something")

        // The operator finds the device to ask its user to bind again; the attested one is fine.
        let listed = try runKeybound(
            ["user", "devices", "--unattested", "--json", "--db", live.database.url], input: "",
            in: live.directory,
            environment: live.database.password.map { ["KEYBOUND_DB_PASSWORD": $0] } ?? [:])
        #expect(listed.status == 0, "\(listed.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any]
        let devices = object?["devices"] as? [[String: Any]] ?? []
        #expect(devices.compactMap { $0["device_id"] as? String } == [plainID], "\(listed.stdout)")
        #expect(devices.first?["username"] as? String == "alice")
        #expect(devices.first?["attested"] as? Bool == false)
        let all = try runKeybound(
            ["user", "devices", "alice", "--db", live.database.url], input: "", in: live.directory,
            environment: live.database.password.map { ["KEYBOUND_DB_PASSWORD": $0] } ?? [:])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains(plainID) && all.stdout.contains(attestedID), "\(all.stdout)")
        let unknown = try runKeybound(
            ["user", "devices", "nobody", "--db", live.database.url], input: "", in: live.directory,
            environment: live.database.password.map { ["KEYBOUND_DB_PASSWORD": $0] } ?? [:])
        #expect(unknown.status == 1 && unknown.stderr.contains("no user"), "\(unknown.stderr)")

        // The attested device logs in and approves, with its assertions.
        let attestedChallenge = try await client.send(
            API.createChallenge, ChallengeRequest(deviceID: attestedID)
        )
        .decode(ChallengeResponse.self)
        let login = try await client.send(
            API.deviceLogin,
            DeviceLoginRequest(
                challengeID: attestedChallenge.challengeID,
                signature: sign(attestedChallenge.payload, with: deviceKey),
                appAttestAssertion: appKey.assertion(
                    appID: Self.appID, clientData: attestedChallenge.payload, counter: 1)))
        #expect(login.status == 200, "\(login.text)")
        let session = try login.decode(TokenResponse.self).accessToken
        let approval = try await client.send(
            API.createApproval, CreateApprovalRequest(deviceID: attestedID, action: transfer()),
            token: session
        ).decode(ApprovalChallengeResponse.self)
        let confirmed = try await client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(
                signature: sign(approval.payload, with: deviceKey),
                appAttestAssertion: appKey.assertion(
                    appID: Self.appID, clientData: approval.payload, counter: 2)),
            parameters: [approval.approvalID],
            token: session)
        #expect(confirmed.status == 200, "\(confirmed.text)")
    }

    /// An assertion from a device bound without App Attest is a well-formed request whose
    /// credential the server does not know: 401 `unknown_credential`, not 400 (schemathesis
    /// counts a 400 for a schema-valid body as the spec missing a rule), for logins and approvals.
    @Test func assertionFromADeviceWithoutAppAttestKey() async throws {
        let live = try TestServer()
        let (tokens, deviceKey, deviceID) = try await live.client.userWithDevice("alice")
        let challenge = try await live.client.challenge(deviceID)
        let login = try await live.client.send(
            API.deviceLogin,
            DeviceLoginRequest(
                challengeID: challenge.challengeID, signature: sign(challenge.payload, with: deviceKey),
                appAttestAssertion: Data("not an assertion".utf8)))
        expectProblem(login, 401, .unknownCredential)
        let approval = try await live.client.send(
            API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
            token: tokens.accessToken
        ).decode(ApprovalChallengeResponse.self)
        let confirm = try await live.client.send(
            API.confirmApproval,
            ConfirmApprovalRequest(
                signature: sign(approval.payload, with: deviceKey), appAttestAssertion: Data("x".utf8)),
            parameters: [approval.approvalID],
            token: tokens.accessToken)
        expectProblem(confirm, 401, .unknownCredential)
    }

    @Test(
        "assertions of an attested device: the counter must rise, over the issued payload, for logins and approvals",
        arguments: Engine.all
    )
    func assertions(engine: Engine) async throws {
        let ca = try TestAppAttestCA(now: Date())
        let live = try Self.server(ca, engine)
        let tokens = try await Self.user(live)
        let deviceKey = try P256SigningKey()
        let appKey = try TestAppAttestKey()
        let bound = try await Self.bind(
            live, tokens.accessToken, deviceKey: deviceKey.publicKey, appKey: appKey, ca: ca,
            attest: Self.genuine(live, appKey: appKey, ca: ca, deviceKey: deviceKey.publicKey))
        let deviceID = try bound.decode(BindDeviceResponse.self).deviceID

        func login(counter: UInt32, over other: Data? = nil) async throws -> Reply {
            let challenge = try await live.client.challenge(deviceID)
            let assertion = try appKey.assertion(
                appID: Self.appID, clientData: other ?? challenge.payload, counter: counter)
            return try await live.client.send(
                API.deviceLogin,
                DeviceLoginRequest(
                    challengeID: challenge.challengeID, signature: sign(challenge.payload, with: deviceKey),
                    appAttestAssertion: assertion))
        }
        #expect(try await login(counter: 1).status == 200)
        try await expectProblem(login(counter: 1), 401, .replayedAssertion)
        try await expectProblem(login(counter: 7, over: Data("another request".utf8)), 401, .signatureInvalid)
        #expect(try await login(counter: 2).status == 200)
        // Without an assertion the device still logs in: the server does not require App Attest.
        let challenge = try await live.client.challenge(deviceID)
        let plain = try await live.client.deviceLogin(
            challengeID: challenge.challengeID, signature: sign(challenge.payload, with: deviceKey))
        #expect(plain.status == 200)
        // Each device login ended the session before it from the same client: go on with the last.
        let session = try plain.decode(TokenResponse.self).accessToken

        // Approvals: the assertion covers the approval's payload; a replayed counter fails it.
        func approve(counter: UInt32) async throws -> Reply {
            let approval = try await live.client.send(
                API.createApproval, CreateApprovalRequest(deviceID: deviceID, action: transfer()),
                token: session
            ).decode(ApprovalChallengeResponse.self)
            return try await live.client.send(
                API.confirmApproval,
                ConfirmApprovalRequest(
                    signature: sign(approval.payload, with: deviceKey),
                    appAttestAssertion: appKey.assertion(
                        appID: Self.appID, clientData: approval.payload, counter: counter)
                ), parameters: [approval.approvalID], token: session)
        }
        #expect(try await approve(counter: 3).status == 200)
        try await expectProblem(approve(counter: 3), 401, .replayedAssertion)

        // A device bound without App Attest has no key to assert with: its credential is unknown.
        let other = try await live.client.login("alice", clientID: "app-2")
        let (plainKey, plainID) = try await live.client.bindDevice(other.accessToken)
        let plainChallenge = try await live.client.challenge(plainID)
        let stray = try await live.client.send(
            API.deviceLogin,
            DeviceLoginRequest(
                challengeID: plainChallenge.challengeID,
                signature: sign(plainChallenge.payload, with: plainKey),
                appAttestAssertion: appKey.assertion(
                    appID: Self.appID, clientData: plainChallenge.payload, counter: 9)))
        expectProblem(stray, 401, .unknownCredential)

        let events = try await live.client.send(API.audit, token: other.accessToken)
            .decode(AuditListResponse.self).events
        #expect(events.contains { $0.type == .appAttestFailed && $0.deviceID == deviceID })
    }
}
