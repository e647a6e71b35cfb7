import Foundation
import KeyboundWebAuthn

extension Harness {
    /// A whole registration ceremony (WebAuthn §7.1) from the browser's JSON. Input: one byte
    /// choosing the relying party (``WebAuthnFixture/relyingParty(_:)``), the time (8 bytes), the
    /// challenge's length (1 byte) and bytes, the `RegistrationResponseJSON`.
    static let webAuthnRegistration = Harness(
        name: "webauthn-registration",
        covers: "KeyboundWebAuthn RegistrationResponse(json:) and RelyingParty.verifyRegistration"
    ) { data in
        var input = FuzzInput(data)
        let relyingParty = WebAuthnFixture.relyingParty(input.byte())
        let time = fuzzDate(&input)
        let challenge = input.take(Int(input.byte()))
        guard let response = try? RegistrationResponse(json: input.rest()) else { return }
        _ = try? response.clientData()
        _ = try? relyingParty.verifyRegistration(response, challenge: challenge, at: time)
    }

    /// A whole authentication ceremony (WebAuthn §7.2) from the browser's JSON, against a stored
    /// credential. Input: one byte choosing the relying party, one byte of record flags (bit 0:
    /// backup eligible, bit 1: user identified by the user handle), the stored sign count (4
    /// bytes), the COSE key's length (2 bytes) and bytes, the user handle's length (1 byte) and
    /// bytes, the challenge's length (1 byte) and bytes, the `AuthenticationResponseJSON`.
    static let webAuthnAuthentication = Harness(
        name: "webauthn-authentication",
        covers: "KeyboundWebAuthn AuthenticationResponse(json:) and RelyingParty.verifyAuthentication"
    ) { data in
        var input = FuzzInput(data)
        let relyingParty = WebAuthnFixture.relyingParty(input.byte())
        let flags = input.byte()
        let signCount = input.take(4).reduce(0) { $0 << 8 | UInt32($1) }
        let coseKey = input.take(input.take(2).reduce(0) { $0 << 8 | Int($1) })
        let userHandle = input.take(Int(input.byte()))
        let challenge = input.take(Int(input.byte()))
        guard let response = try? AuthenticationResponse(json: input.rest()),
            let publicKey = try? CredentialPublicKey(coseKey: coseKey)
        else { return }
        _ = try? response.clientData()
        let record = CredentialRecord(
            id: response.credentialId, publicKey: publicKey, signCount: signCount, userHandle: userHandle,
            backupEligible: flags & 1 == 1)
        _ = try? relyingParty.verifyAuthentication(
            response, challenge: challenge, credential: record,
            identification: flags & 2 == 2 ? .byUserHandle : .beforeCeremony,
            allowedCredentialIds: [])
    }
}
