import Foundation
import KeyboundCrypto
import KeyboundWire

@testable import KeyboundWebAuthn

/// What the WebAuthn and App Attest harnesses verify against: the roots, relying parties and keys
/// of the test vectors in Tests/KeyboundWebAuthnTests/Vectors, so the seeds (those vectors) verify
/// all the way and the fuzzer starts from complete ceremonies.
enum WebAuthnFixture {
    /// The W3C WebAuthn L3 test vectors' attestation CA (w3c_l3/attestation_ca_cert.pem).
    static let w3cTestCA = try? Certificate(
        pemRepresentation: """
            -----BEGIN CERTIFICATE-----
            MIICBzCCAa2gAwIBAgIRAO1/kF2L0LQU0XhJExcKkLYwCgYIKoZIzj0EAwIwYjEe
            MBwGA1UEAwwVV2ViQXV0aG4gdGVzdCB2ZWN0b3JzMQwwCgYDVQQKDANXM0MxJTAj
            BgNVBAsMHEF1dGhlbnRpY2F0b3IgQXR0ZXN0YXRpb24gQ0ExCzAJBgNVBAYTAkFB
            MCAXDTI0MDEwMTAwMDAwMFoYDzMwMjQwMTAxMDAwMDAwWjBiMR4wHAYDVQQDDBVX
            ZWJBdXRobiB0ZXN0IHZlY3RvcnMxDDAKBgNVBAoMA1czQzElMCMGA1UECwwcQXV0
            aGVudGljYXRvciBBdHRlc3RhdGlvbiBDQTELMAkGA1UEBhMCQUEwWTATBgcqhkjO
            PQIBBggqhkjOPQMBBwNCAAQyaTAOX/e2mQFfcM+AqHY79wW8LirwwbOc/3GLfDWI
            DKMPMZB42RsDOJoAb9/IodzYTt+gfTCqE0dKJIoNq1uqo0IwQDAPBgNVHRMBAf8E
            BTADAQH/MA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQURa/3FbDdeGdB/umW68Fl
            R6OTGx4wCgYIKoZIzj0EAwIDSAAwRQIgSDBjtrsI3Mg9ozoCwR0vQiAxdok1VNE4
            xhSjaQhyTMgCIQD17yyRLUUAs+L1tZHQYiSR6fIg39H5c07EhLt+kIh2Yw==
            -----END CERTIFICATE-----
            """)

    /// Every root the vectors chain to.
    static let roots: [Certificate] =
        [.appleWebAuthnRootCA, .appleAppAttestationRootCA] + [w3cTestCA].compactMap { $0 }

    /// Apple's WebAuthn root for `apple`, the W3C test CA for every format.
    static let trustAnchors = AttestationTrustAnchors(
        Dictionary(
            uniqueKeysWithValues: AttestationFormat.allCases.map { format in
                (format, format == .apple ? roots : [w3cTestCA].compactMap { $0 })
            }))

    /// The relying parties of the vectors: RP ID, origin, top origin.
    static let relyingParties: [(id: String, origin: String, topOrigin: String?)] = [
        ("example.org", "https://example.org", "https://example.com"),
        ("dev2.dontneeda.pw", "https://dev2.dontneeda.pw:5000", nil),
        ("localhost", "http://localhost:5000", nil),
        ("localhost", "http://localhost:8000", nil),
        ("dev.eduid.se", "https://dashboard.dev.eduid.se", nil),
        ("eduid.docker", "https://dashboard.eduid.docker", nil),
    ]

    /// The relying party the input's first byte picks: bits 0–6 choose the vector's RP, bit 7
    /// drops the user verification requirement.
    static func relyingParty(_ selector: UInt8) -> RelyingParty {
        let chosen = relyingParties[Int(selector & 0x7F) % relyingParties.count]
        return RelyingParty(
            id: chosen.id, origins: [chosen.origin], topOrigins: Set([chosen.topOrigin].compactMap { $0 }),
            requiresUserVerification: selector & 0x80 == 0, trustAnchors: trustAnchors)
    }

    /// The App IDs of the App Attest vectors.
    static let appIds = [
        "1234567890.com.example.myapp", "0352187391.com.apple.example_app_attest",
        "6MURL8TA57.de.vincent-haupert.apple-appattest-poc",
    ]

    /// The attested keys of the App Attest vectors that carry assertions (veehaitch, iOS 14).
    static let appAttestKeys: [P256PublicKey] = [
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEuor73_hQPRnCYrAq2dG0VCNWuZM-_xSltvLo0gWbVf-Obuaew4j85OB-6B4wCzcSFJvQStNWMtRkbFefmkANCw",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEZHixl1wNh3V3WAj55Ynla-NGkjr3cwsQsFU0zY_rDePfLmbfwXFrpRTGdF41XUABI8IIe_fAlG3FhYJlNATj1w",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAENiBvkEpGrsUL8Zenh7nOQ2F6Htdpl3zyZlBBU0ayh3LxwsvzKEzpiBctoV5THY2BWQpldEuGuHhSGuMyik8vpw",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE_qV1VMCB1xZaIsosUvdGkWFB3atmC-cFOiMeH9g9IAtJXrO4W8f9DlY17p6jscTSzHlqm76PPb45CbxEvcAHng",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEpCYHC9SCwK_jMtzjrCtrSgbL3IHvH4LAc7ar6garYFh-EYm9FCDz0auagvEzElrIE2II6D9pLLTr0q0Wv6CZkQ",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEf-8vWaTBWwGNVL9eSxEsKpcskzrKlzF64SVsLdPTxmX9c_hRqatFU50RymFF1Yb124lq0WJ5joH--lfYgpC3xw",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEiMA0oZCqfbxaBhUBxlQoA5QlghmLPxzFRnPKO5rSC0FSgmelT1_boEafr7RrtpkKOWvwT5SknUMgyBx6skCjmA",
    ].compactMap { Base64URL.decode($0).flatMap { try? P256PublicKey(spkiDER: $0) } }

    /// A DER ECDSA signature and an Ed25519-sized one, to verify with keys that parse.
    static let signatures = [P256Fixture.signature?.derRepresentation ?? Data(), Data(count: 64)]
}
