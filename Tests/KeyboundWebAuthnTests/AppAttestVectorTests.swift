import Foundation
import KeyboundCrypto
import KeyboundWebAuthn
import KeyboundWire
import Testing

/// Real App Attest attestations (Apple's guide samples of 2024 and 2026, seven iPhones on
/// iOS 14) and their assertions: each verifies at its pinned time, and each is refused after its
/// leaf expires, for another app, in the other environment, with another key id, and with a
/// hashed clientDataHash. Assertions are refused on replay, over other client data, and for
/// another app.
@Suite("App Attest vectors")
struct AppAttestVectorTests {
    struct Entry {
        let id: String
        let attestation: Data
        let keyId: Data
        let clientDataHash: Data
        let appId: String
        let environment: AppAttest.Environment
        let time: Date
        let leafNotAfter: Date
        let vector: JSONValue

        init(_ vector: JSONValue) throws {
            self.vector = vector
            id = try vector.string("id")
            attestation = try vector.base64("attestation_b64")
            keyId = try vector.base64("keyId_b64")
            clientDataHash = try vector.base64("clientDataHash_b64")
            appId = try vector.string("appId")
            environment = try #require(AppAttest.Environment(rawValue: vector.string("environment")))
            time = try vector.date("verify_at")
            leafNotAfter = try vector.member("leaf").date("not_after")
        }

        func verifier(appIds: [String]? = nil, environment: AppAttest.Environment? = nil) -> AppAttest {
            AppAttest(appIds: appIds ?? [appId], environment: environment ?? self.environment)
        }

        func verify(
            with verifier: AppAttest? = nil, keyId: Data? = nil, clientDataHash: Data? = nil,
            at time: Date? = nil
        ) throws -> AppAttest.AttestedKey {
            try (verifier ?? self.verifier()).verifyAttestation(
                attestation, keyId: keyId ?? self.keyId,
                clientDataHash: clientDataHash ?? self.clientDataHash,
                at: time ?? self.time)
        }
    }

    static func entries() throws -> [Entry] {
        try Vectors.json("app_attest/app_attest_vectors.json").array("vectors").map(Entry.init)
    }

    @Test("all nine attestations verify at their pinned time")
    func attestationsVerify() throws {
        let entries = try Self.entries()
        #expect(entries.count == 9)
        for entry in entries {
            let key = try entry.verify()
            #expect(key.keyId == entry.keyId, "\(entry.id)")
            #expect(key.appId == entry.appId, "\(entry.id)")
            #expect(Digest.sha256(key.publicKey.x963Representation) == entry.keyId, "\(entry.id)")
            #expect(!key.receipt.isEmpty, "\(entry.id)")
            if entry.vector.has("publicKey_pem") {
                let pem = try entry.vector.string("publicKey_pem")
                let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
                #expect(key.publicKey.spkiDER == Data(base64Encoded: body), "\(entry.id)")
            }
        }
    }

    @Test("App Attest's traps: flags 0x40, the raw challenge as clientDataHash, extensions without ED")
    func traps() throws {
        for entry in try Self.entries() {
            let object = try AttestationObject(entry.attestation, allowingUnflaggedExtensions: true)
            #expect(object.authenticatorData.flags.rawValue == 0x40, "\(entry.id)")
        }
        let guide = try #require(try Self.entries().first { $0.id == "apple-guide-2026" })
        // Apple's sample passes the 24 challenge bytes themselves, not a hash.
        #expect(guide.clientDataHash == Data("example_server_challenge".utf8))
        let object = try AttestationObject(guide.attestation, allowingUnflaggedExtensions: true)
        #expect(object.authenticatorData.extensions?[text: "apple_bundle_version_01"] == .text("1"))
        #expect(!object.authenticatorData.flags.contains(.extensionData))
        // A WebAuthn parser, strict about trailing bytes, would refuse Apple's own sample.
        expectRefusal(.malformedAuthenticatorData) { try AttestationObject(guide.attestation) }
    }

    @Test("every attestation is refused after its leaf expires, and before it was issued")
    func expiredLeaf() throws {
        for entry in try Self.entries() {
            expectRefusal(.certificateChainInvalid, entry.id) {
                try entry.verify(at: entry.leafNotAfter.addingTimeInterval(1))
            }
            let notBefore = try entry.vector.member("leaf").date("not_before")
            expectRefusal(.certificateChainInvalid, entry.id) {
                try entry.verify(at: notBefore.addingTimeInterval(-1))
            }
        }
    }

    @Test("every attestation is refused for another app id")
    func otherAppId() throws {
        for entry in try Self.entries() {
            expectRefusal(.rpIdMismatch, entry.id) {
                try entry.verify(with: entry.verifier(appIds: ["\(entry.appId).other"]))
            }
        }
    }

    @Test("every attestation is refused in the other environment")
    func otherEnvironment() throws {
        for entry in try Self.entries() {
            let other: AppAttest.Environment = entry.environment == .production ? .development : .production
            expectRefusal(.environmentMismatch, entry.id) {
                try entry.verify(with: entry.verifier(environment: other))
            }
        }
    }

    @Test("every attestation is refused with another key id")
    func otherKeyId() throws {
        let entries = try Self.entries()
        for (index, entry) in entries.enumerated() {
            let other = entries[(index + 1) % entries.count].keyId
            expectRefusal(.keyIdMismatch, entry.id) { try entry.verify(keyId: other) }
        }
    }

    @Test("every attestation is refused with SHA-256(clientDataHash) instead of the hash itself")
    func hashedClientDataHash() throws {
        for entry in try Self.entries() {
            expectRefusal(.nonceMismatch, entry.id) {
                try entry.verify(clientDataHash: Digest.sha256(entry.clientDataHash))
            }
        }
    }

    @Test("every attestation is refused under another root")
    func otherRoot() throws {
        let testCA = try Vectors.certificate("w3c_l3/attestation_ca_cert.pem")
        for entry in try Self.entries() {
            let verifier = AppAttest(appIds: [entry.appId], environment: entry.environment, roots: [testCA])
            expectRefusal(.certificateChainInvalid, entry.id) { try entry.verify(with: verifier) }
        }
    }

    @Test("assertions verify with counter 1, and are refused on replay, over other data, for another app")
    func assertions() throws {
        var verified = 0
        for entry in try Self.entries() {
            let key = try entry.verify()
            let verifier = entry.verifier()
            for assertion in try entry.vector.array("assertions") {
                let bytes = try assertion.base64("assertion_b64")
                let clientData = try assertion.base64("clientData_b64")
                #expect(Digest.sha256(clientData) == (try assertion.base64("clientDataHash_b64")))
                let previous = UInt32(try assertion.integer("previous_counter"))
                let counter = try verifier.verifyAssertion(
                    bytes, clientData: clientData, publicKey: key.publicKey, appId: key.appId,
                    previousCounter: previous)
                #expect(counter == UInt32(try assertion.integer("expected_counter")), "\(entry.id)")
                verified += 1
                expectRefusal(.replayedAssertion, entry.id) {
                    try verifier.verifyAssertion(
                        bytes, clientData: clientData, publicKey: key.publicKey, appId: key.appId,
                        previousCounter: counter)
                }
                expectRefusal(.invalidSignature, entry.id) {
                    try verifier.verifyAssertion(
                        bytes, clientData: clientData + Data("!".utf8), publicKey: key.publicKey,
                        appId: key.appId,
                        previousCounter: previous)
                }
                expectRefusal(.rpIdMismatch, entry.id) {
                    try verifier.verifyAssertion(
                        bytes, clientData: clientData, publicKey: key.publicKey, appId: "\(key.appId).other",
                        previousCounter: previous)
                }
            }
        }
        #expect(verified == 7)
    }
}
