import Foundation
import Testing

@testable import KeyboundWire

@Suite("Passkey and App Attest messages")
struct WebAuthnMessagesTests {
    let tokens = TokenResponse(
        accessToken: "a", refreshToken: "r", expiresIn: 900, sessionID: "ses_1", userID: "usr_1")

    @Test("options are the W3C L3 JSON shape and round-trip")
    func options() throws {
        let creation = PasskeyCreationOptions(
            rpID: "example.org", rpName: "Example", userID: Data("usr_1".utf8), userName: "alice",
            userDisplayName: "Alice", challenge: Data(repeating: 7, count: 32), algorithms: [-7, -8, -257],
            timeout: 300_000, excludeCredentials: [PasskeyCredentialDescriptor(id: Data([1, 2]))],
            userVerification: "required", attestation: .none)
        #expect(try PasskeyCreationOptions(jsonData: creation.jsonData) == creation)
        let text = String(decoding: creation.jsonData, as: UTF8.self)
        #expect(
            text.hasPrefix(
                #"{"publicKey":{"rp":{"id":"example.org","name":"Example"},"user":{"id":"dXNyXzE""#))
        #expect(text.contains(#""pubKeyCredParams":[{"type":"public-key","alg":-7},"#))
        #expect(text.contains(#""excludeCredentials":[{"type":"public-key","id":"AQI"}]"#))
        #expect(
            text.contains(
                #""authenticatorSelection":{"residentKey":"required","requireResidentKey":true,"userVerification":"required"}"#
            ))

        let request = PasskeyRequestOptions(
            challenge: Data(repeating: 9, count: 32), timeout: 300_000, rpID: "example.org",
            userVerification: "required")
        #expect(try PasskeyRequestOptions(jsonData: request.jsonData) == request)
        #expect(String(decoding: request.jsonData, as: UTF8.self).contains(#""rpId":"example.org""#))
    }

    @Test("results carry the session's tokens as members of their own, all or none")
    func results() throws {
        let login = PasskeyLoginResult(
            username: "alice", credentialID: Data([1]), signCount: 0, tokens: tokens)
        #expect(try PasskeyLoginResult(jsonData: login.jsonData) == login)
        #expect(
            String(decoding: login.jsonData, as: UTF8.self)
                == #"{"verified":true,"username":"alice","credentialId":"AQ","signCount":0,"access_token":"a","refresh_token":"r","token_type":"Bearer","expires_in":900,"session_id":"ses_1","user_id":"usr_1"}"#
        )
        let signUp = PasskeyRegistrationResult(
            credentialID: Data([1]), format: "none", algorithm: -7, signCount: 0, username: "alice",
            tokens: tokens)
        #expect(try PasskeyRegistrationResult(jsonData: signUp.jsonData) == signUp)
        let added = PasskeyRegistrationResult(
            credentialID: Data([1]), format: "packed", algorithm: -8, signCount: 3, username: "alice",
            tokens: nil)
        #expect(try PasskeyRegistrationResult(jsonData: added.jsonData) == added)
        // Half a token response is not one.
        #expect(throws: WireError.self) {
            try PasskeyRegistrationResult(
                jsonData: Data(
                    #"{"verified":true,"credentialId":"AQ","fmt":"none","alg":-7,"signCount":0,"username":"a","access_token":"a"}"#
                        .utf8))
        }
        // Nor is a null token member (the spec's tokens are strings), which once read as no tokens.
        #expect(throws: WireError(.invalidRequest, "member \"access_token\" must be a string")) {
            try PasskeyRegistrationResult(
                jsonData: Data(
                    #"{"verified":true,"credentialId":"AQ","fmt":"none","alg":-7,"signCount":0,"username":"a","access_token":null}"#
                        .utf8))
        }
    }

    @Test("credential bodies read what browsers write and refuse the rest")
    func credentials() throws {
        // Chromium's toJSON() of a registration, with the members the server does not need.
        let chromium = Data(
            #"{"authenticatorAttachment":"platform","clientExtensionResults":{},"id":"AQID","rawId":"AQID","response":{"attestationObject":"oA","authenticatorData":"AA","clientDataJSON":"e30","publicKey":"AA","publicKeyAlgorithm":-7,"transports":["internal"]},"type":"public-key"}"#
                .utf8)
        let registration = try PasskeyRegistration(jsonData: chromium)
        #expect(
            registration.credentialID == Data([1, 2, 3]) && registration.attachment == "platform"
        )
        #expect(try PasskeyRegistration(jsonData: registration.jsonData) == registration)

        let assertion = PasskeyAssertion(
            credentialID: Data([1]), clientDataJSON: Data("{}".utf8), authenticatorData: Data([0]),
            signature: Data([2]), userHandle: nil)
        #expect(try PasskeyAssertion(jsonData: assertion.jsonData) == assertion)
        let withNullHandle = Data(
            #"{"id":"AQ","rawId":"AQ","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"Ag","userHandle":null}}"#
                .utf8)
        #expect(try PasskeyAssertion(jsonData: withNullHandle).userHandle == nil)

        for bad in [
            #"{"id":"AQ","rawId":"Ag","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"Ag"}}"#,
            #"{"id":"AQ","rawId":"AQ","type":"password","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"Ag"}}"#,
            #"{"id":"AQ","rawId":"AQ","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"Ag","extra":1}}"#,
            #"{"id":"AQ","rawId":"AQ","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"A+A","signature":"Ag"}}"#,
        ] {
            #expect(throws: WireError.self, "\(bad)") {
                try PasskeyAssertion(jsonData: Data(bad.utf8))
            }
        }
    }

    @Test("device binding carries an optional App Attest attestation; the client data is challenge ‖ key")
    func appAttest() throws {
        let binding = BindDeviceRequest(
            publicKey: Data([4, 5]), name: "iPhone", keyProtection: .secureEnclave,
            appAttest: AppAttestBinding(keyID: Data(repeating: 1, count: 32), attestation: Data([0xA0])))
        #expect(try BindDeviceRequest(jsonData: binding.jsonData) == binding)
        let plain = BindDeviceRequest(publicKey: Data([4]), name: "n", keyProtection: .software)
        #expect(String(decoding: plain.jsonData, as: UTF8.self).hasSuffix(#","app_attest":null}"#))
        #expect(try BindDeviceRequest(jsonData: plain.jsonData) == plain)
        #expect(throws: WireError.self) {
            try BindDeviceRequest(
                jsonData: Data(
                    #"{"public_key":"BA","name":"n","key_protection":"software","app_attest":{"key_id":"AQ"}}"#
                        .utf8))
        }
        #expect(
            AppAttestClientData.binding(challenge: Data([1, 2]), publicKey: Data([3])) == Data([1, 2, 3]))
        let login = DeviceLoginRequest(
            challengeID: "chl_1", signature: Data([1]), appAttestAssertion: Data([2]))
        #expect(try DeviceLoginRequest(jsonData: login.jsonData) == login)
        let confirm = ConfirmApprovalRequest(signature: Data([1]), appAttestAssertion: Data([2]))
        #expect(try ConfirmApprovalRequest(jsonData: confirm.jsonData) == confirm)
    }
}
