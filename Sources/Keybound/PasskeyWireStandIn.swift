import Foundation

// INTERIM: stand-ins for the passkey wire types that the server branch (i11-server) adds to
// KeyboundWire, with the same names and members, so the SDK builds before that work lands.
// Deleted when main carries KeyboundWire/WebAuthnMessages.swift.

/// WebAuthn's attestation conveyance preference.
public enum AttestationConveyance: String, Sendable, Hashable, CaseIterable {
    /// No attestation.
    case none
    /// An anonymized attestation.
    case indirect
    /// The authenticator's own attestation.
    case direct
}

/// A credential in `excludeCredentials` or `allowCredentials`.
public struct PasskeyCredentialDescriptor: Sendable, Hashable {
    /// The credential id.
    public let id: Data
    /// The descriptor of a credential.
    public init(id: Data) { self.id = id }
}

/// `{"publicKey": PublicKeyCredentialCreationOptionsJSON}`.
public struct PasskeyCreationOptions: Sendable, Hashable {
    /// `rp.id`.
    public let rpID: String
    /// `rp.name`.
    public let rpName: String
    /// `user.id`.
    public let userID: Data
    /// `user.name`.
    public let userName: String
    /// `user.displayName`.
    public let userDisplayName: String
    /// `challenge`.
    public let challenge: Data
    /// `pubKeyCredParams`.
    public let algorithms: [Int]
    /// `timeout`.
    public let timeout: Int
    /// `excludeCredentials`.
    public let excludeCredentials: [PasskeyCredentialDescriptor]
    /// `authenticatorSelection.userVerification`.
    public let userVerification: String
    /// `attestation`.
    public let attestation: AttestationConveyance

    /// Options from their members.
    public init(
        rpID: String, rpName: String, userID: Data, userName: String, userDisplayName: String,
        challenge: Data,
        algorithms: [Int], timeout: Int, excludeCredentials: [PasskeyCredentialDescriptor],
        userVerification: String, attestation: AttestationConveyance
    ) {
        self.rpID = rpID
        self.rpName = rpName
        self.userID = userID
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.challenge = challenge
        self.algorithms = algorithms
        self.timeout = timeout
        self.excludeCredentials = excludeCredentials
        self.userVerification = userVerification
        self.attestation = attestation
    }
}

/// `{"publicKey": PublicKeyCredentialRequestOptionsJSON}`.
public struct PasskeyRequestOptions: Sendable, Hashable {
    /// `challenge`.
    public let challenge: Data
    /// `timeout`.
    public let timeout: Int
    /// `rpId`.
    public let rpID: String
    /// `allowCredentials`.
    public let allowCredentials: [PasskeyCredentialDescriptor]
    /// `userVerification`.
    public let userVerification: String

    /// Options from their members.
    public init(
        challenge: Data, timeout: Int, rpID: String, allowCredentials: [PasskeyCredentialDescriptor],
        userVerification: String
    ) {
        self.challenge = challenge
        self.timeout = timeout
        self.rpID = rpID
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
    }
}

/// `RegistrationResponseJSON`.
public struct PasskeyRegistrationCredential: Sendable, Hashable {
    /// `id` and `rawId`.
    public let credentialID: Data
    /// `response.clientDataJSON`.
    public let clientDataJSON: Data
    /// `response.attestationObject`.
    public let attestationObject: Data
    /// `authenticatorAttachment`.
    public let authenticatorAttachment: String?

    /// A credential from its members.
    public init(
        credentialID: Data, clientDataJSON: Data, attestationObject: Data,
        authenticatorAttachment: String? = nil
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.authenticatorAttachment = authenticatorAttachment
    }

    /// `toJSON()`.
    package var jsonData: Data {
        StandInJSON.credential(
            credentialID, authenticatorAttachment,
            [("clientDataJSON", clientDataJSON), ("attestationObject", attestationObject)])
    }
}

/// `AuthenticationResponseJSON`.
public struct PasskeyAssertionCredential: Sendable, Hashable {
    /// `id` and `rawId`.
    public let credentialID: Data
    /// `response.clientDataJSON`.
    public let clientDataJSON: Data
    /// `response.authenticatorData`.
    public let authenticatorData: Data
    /// `response.signature`.
    public let signature: Data
    /// `response.userHandle`.
    public let userHandle: Data?
    /// `authenticatorAttachment`.
    public let authenticatorAttachment: String?

    /// A credential from its members.
    public init(
        credentialID: Data, clientDataJSON: Data, authenticatorData: Data, signature: Data, userHandle: Data?,
        authenticatorAttachment: String? = nil
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
        self.authenticatorAttachment = authenticatorAttachment
    }

    /// `toJSON()`.
    package var jsonData: Data {
        var response = [
            ("clientDataJSON", clientDataJSON), ("authenticatorData", authenticatorData),
            ("signature", signature),
        ]
        if let userHandle { response.append(("userHandle", userHandle)) }
        return StandInJSON.credential(credentialID, authenticatorAttachment, response)
    }
}

private enum StandInJSON {
    static func credential(_ id: Data, _ attachment: String?, _ response: [(String, Data)]) -> Data {
        var members = [
            JSONMember("id", .string(Base64URL.encode(id))),
            JSONMember("rawId", .string(Base64URL.encode(id))),
            JSONMember("type", .string("public-key")),
            JSONMember(
                "response", .object(response.map { JSONMember($0.0, .string(Base64URL.encode($0.1))) })),
        ]
        if let attachment { members.append(JSONMember("authenticatorAttachment", .string(attachment))) }
        members.append(JSONMember("clientExtensionResults", .object([])))
        return JSON.serialize(.object(members))
    }
}
