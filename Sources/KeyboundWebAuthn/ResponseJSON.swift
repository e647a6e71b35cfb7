import Foundation
import KeyboundWire

/// A registration as the browser hands it over: `PublicKeyCredential.toJSON()` of the credential
/// `navigator.credentials.create()` returned (WebAuthn L3 `RegistrationResponseJSON`).
///
/// Only what verification needs is required (`id`, `rawId`, `type`, `response.clientDataJSON`,
/// `response.attestationObject`), each with its type checked and binary members strict base64url.
/// Other members are ignored rather than refused: their values are copies of what the attestation
/// object holds (`publicKey`, `authenticatorData`), hints (`transports`), or additions libraries
/// and browsers make (py_webauthn's vectors carry a top-level `transports`).
public struct RegistrationResponse: Sendable, Hashable {
    /// The credential id (`rawId`).
    public let credentialId: Data
    /// `response.clientDataJSON`, the exact bytes.
    public let clientDataJSON: Data
    /// `response.attestationObject`, the exact bytes.
    public let attestationObject: Data

    /// Parses `toJSON()` output.
    ///
    /// - Throws: ``WebAuthnError/malformedResponse`` when a needed member is missing or wrong,
    ///   `type` is not `public-key`, or `id` and `rawId` differ.
    public init(json: Data) throws {
        let credential = try ResponseObject(json: json)
        credentialId = try credential.credentialId()
        let response = try credential.object("response")
        clientDataJSON = try response.bytes("clientDataJSON")
        // Step 3 of §7.1 in JSON form: an attestation response is the one with an attestation object.
        attestationObject = try response.bytes("attestationObject")
    }

    /// Parses `clientDataJSON`, for finding the challenge before the ceremony runs.
    public func clientData() throws -> CollectedClientData {
        try CollectedClientData(json: clientDataJSON)
    }
}

/// An authentication as the browser hands it over: `PublicKeyCredential.toJSON()` of the
/// credential `navigator.credentials.get()` returned (WebAuthn L3 `AuthenticationResponseJSON`).
///
/// Requires `id`, `rawId`, `type`, and `response.clientDataJSON`, `authenticatorData`, `signature`;
/// reads `response.userHandle` when present (and not null). Other members are ignored, as for
/// ``RegistrationResponse``.
public struct AuthenticationResponse: Sendable, Hashable {
    /// The credential id (`rawId`).
    public let credentialId: Data
    /// `response.clientDataJSON`, the exact bytes.
    public let clientDataJSON: Data
    /// `response.authenticatorData`, the exact bytes.
    public let authenticatorData: Data
    /// `response.signature`.
    public let signature: Data
    /// `response.userHandle`: the user id the credential was created for, from discoverable
    /// credentials.
    public let userHandle: Data?

    /// Parses `toJSON()` output.
    ///
    /// - Throws: ``WebAuthnError/malformedResponse`` when a needed member is missing or wrong,
    ///   `type` is not `public-key`, or `id` and `rawId` differ.
    public init(json: Data) throws {
        let credential = try ResponseObject(json: json)
        credentialId = try credential.credentialId()
        let response = try credential.object("response")
        clientDataJSON = try response.bytes("clientDataJSON")
        authenticatorData = try response.bytes("authenticatorData")
        signature = try response.bytes("signature")
        userHandle = try response.optionalBytes("userHandle")
    }

    /// Parses `clientDataJSON`, for finding the challenge before the ceremony runs.
    public func clientData() throws -> CollectedClientData {
        try CollectedClientData(json: clientDataJSON)
    }
}

/// Reads members of one JSON object of a response, ignoring members it is not asked about.
private struct ResponseObject {
    private let members: [JSONMember]
    private let path: String

    init(json: Data) throws {
        let value: JSONValue
        do {
            value = try JSON.parse(json)
        } catch {
            throw WebAuthnError.malformedResponse.with("not JSON: \(error)")
        }
        try self.init(value, path: "")
    }

    private init(_ value: JSONValue, path: String) throws {
        guard case .object(let members) = value else {
            throw WebAuthnError.malformedResponse.with(
                "\(path.isEmpty ? "the credential" : path) must be an object")
        }
        self.members = members
        self.path = path
    }

    private func name(_ member: String) -> String { path.isEmpty ? member : "\(path).\(member)" }

    private func value(_ member: String) -> JSONValue? {
        members.first { $0.name == member }?.value
    }

    func string(_ member: String) throws -> String {
        guard case .string(let text)? = value(member) else {
            throw WebAuthnError.malformedResponse.with("\"\(name(member))\" must be a string")
        }
        return text
    }

    func bytes(_ member: String) throws -> Data {
        guard let data = Base64URL.decode(try string(member)) else {
            throw WebAuthnError.malformedResponse.with(
                "\"\(name(member))\" must be base64url without padding")
        }
        return data
    }

    func optionalBytes(_ member: String) throws -> Data? {
        guard let found = value(member), found != .null else { return nil }
        return try bytes(member)
    }

    func object(_ member: String) throws -> ResponseObject {
        guard let found = value(member) else {
            throw WebAuthnError.malformedResponse.with("\"\(name(member))\" is missing")
        }
        return try ResponseObject(found, path: name(member))
    }

    /// `rawId`, after checking `type` and that `id` is the same credential id.
    func credentialId() throws -> Data {
        guard try string("type") == "public-key" else {
            throw WebAuthnError.malformedResponse.with("\"type\" must be \"public-key\"")
        }
        let rawId = try bytes("rawId")
        guard try bytes("id") == rawId else {
            throw WebAuthnError.malformedResponse.with("\"id\" and \"rawId\" name different credentials")
        }
        return rawId
    }
}
