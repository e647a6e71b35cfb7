import Foundation

/// Creates passkeys and signs in with them: the platform's own authenticator
/// (`ASAuthorizationPlatformPublicKeyCredentialProvider` on Apple platforms, through
/// `KeyboundApple`; `KeyboundEmulator`'s emulated one in tests).
///
/// The authenticator owns the whole ceremony on the device: it shows the system sheet, verifies
/// the user (Face ID, Touch ID, the passcode), keeps the private key, and builds
/// `clientDataJSON` itself from the challenge and the relying party. The app only hands over
/// what the server asked for and forwards what comes back; ``PasskeyLogin`` does both.
public protocol PasskeyAuthenticator: Sendable {
    /// Creates a passkey for the relying party and user the options name (WebAuthn
    /// `navigator.credentials.create`, `authenticatorMakeCredential`).
    ///
    /// - Returns: the new credential, ready to send as `PublicKeyCredential.toJSON()`.
    /// - Throws: ``KeyboundError``: `userCancel` (silent) when the user dismisses the sheet,
    ///   `biometryLockout`, `authenticationFailed`, `duplicateItem` when the authenticator already
    ///   holds one of the excluded credentials, `notSupported` when it cannot make any of the
    ///   offered algorithms, …
    func createCredential(_ options: PasskeyCreationOptions) async throws -> PasskeyRegistration

    /// Signs the server's challenge with a passkey of the relying party (WebAuthn
    /// `navigator.credentials.get`, `authenticatorGetAssertion`).
    ///
    /// - Returns: the assertion, ready to send as `PublicKeyCredential.toJSON()`.
    /// - Throws: ``KeyboundError``: `userCancel` (silent), `itemNotFound` when the device holds
    ///   no passkey the options allow, `invalidated` when an enrollment change destroyed it,
    ///   `biometryLockout`, `authenticationFailed`, …
    func getAssertion(_ options: PasskeyRequestOptions) async throws -> PasskeyAssertion
}

/// Whether the authenticator must verify the user (WebAuthn `UserVerificationRequirement`).
public enum PasskeyUserVerification: String, Sendable, Hashable, CaseIterable {
    /// The ceremony fails unless the user is verified (Keybound's server asks for this).
    case required
    /// Verify the user if the authenticator can.
    case preferred
    /// Do not verify the user if it can be avoided.
    case discouraged
}

/// Where the authenticator that made a credential lives (WebAuthn `AuthenticatorAttachment`).
public enum PasskeyAttachment: String, Sendable, Hashable, CaseIterable {
    /// Built into this device (the Secure Enclave behind iCloud Keychain passkeys).
    case platform
    /// Another device: a security key, or a phone reached over the hybrid transport.
    case crossPlatform = "cross-platform"
}

/// What the server asks an authenticator to create: WebAuthn's
/// `PublicKeyCredentialCreationOptions`, read from the W3C Level 3 JSON the server sends
/// (`{"publicKey": PublicKeyCredentialCreationOptionsJSON}`).
///
/// Reading follows `PublicKeyCredential.parseCreationOptionsFromJSON`: members the
/// specification defines are type-checked, members it does not define are ignored.
public struct PasskeyCreationOptions: WireMessage, Hashable {
    /// The relying party's id, a registrable domain (`rp.id`).
    public let relyingPartyID: String
    /// The relying party's name, for the system sheet (`rp.name`).
    public let relyingPartyName: String
    /// The user handle: opaque bytes, 1–64, never the username (`user.id`).
    public let userID: Data
    /// The account's name, e.g. the username (`user.name`).
    public let userName: String
    /// A friendlier name for the account (`user.displayName`).
    public let userDisplayName: String
    /// The single-use challenge, at least 16 bytes.
    public let challenge: Data
    /// COSE algorithm identifiers the server accepts, most preferred first (-7 is ES256).
    public let algorithms: [Int]
    /// Credentials the account already has: an authenticator holding one must not make another.
    public let excludedCredentialIDs: [Data]
    /// Whether the user must be verified.
    public let userVerification: PasskeyUserVerification
    /// The attestation the server asks for (`none`, `indirect`, `direct`, `enterprise`).
    public let attestation: String
    /// How long the ceremony may take, in milliseconds, if the server said.
    public let timeout: Int?

    /// Options from their parts.
    ///
    /// - Throws: ``KeyboundError/invalidInput`` for an empty relying party id or user name, a
    ///   user handle outside 1–64 bytes, a challenge under 16 bytes, or no algorithm.
    public init(
        relyingPartyID: String, relyingPartyName: String? = nil, userID: Data, userName: String,
        userDisplayName: String? = nil, challenge: Data, algorithms: [Int] = [-7],
        excludedCredentialIDs: [Data] = [], userVerification: PasskeyUserVerification = .required,
        attestation: String = "none", timeout: Int? = nil
    ) throws {
        guard !relyingPartyID.isEmpty, !userName.isEmpty else {
            throw KeyboundError.invalidInput("a passkey needs a relying party id and a user name")
        }
        guard (1...64).contains(userID.count) else {
            throw KeyboundError.invalidInput("a user handle is 1–64 bytes, not \(userID.count)")
        }
        guard challenge.count >= 16 else {
            throw KeyboundError.invalidInput("a challenge is at least 16 bytes, not \(challenge.count)")
        }
        guard !algorithms.isEmpty else {
            throw KeyboundError.invalidInput("a passkey needs at least one algorithm")
        }
        self.relyingPartyID = relyingPartyID
        self.relyingPartyName = relyingPartyName ?? relyingPartyID
        self.userID = userID
        self.userName = userName
        self.userDisplayName = userDisplayName ?? userName
        self.challenge = challenge
        self.algorithms = algorithms
        self.excludedCredentialIDs = excludedCredentialIDs
        self.userVerification = userVerification
        self.attestation = attestation
        self.timeout = timeout
    }

    /// Reads `{"publicKey": PublicKeyCredentialCreationOptionsJSON}`.
    /// - Throws: ``WireError`` `invalid_request` for a missing or mistyped member, or values the
    ///   memberwise initializer refuses.
    public init(json: JSONValue) throws(WireFailure) {
        let options = try PasskeyJSON.publicKey(json, known: PasskeyJSON.creationMembers)
        let rp = try PasskeyJSON.reader(try options.value("rp"), known: ["id", "name"], path: "publicKey.rp")
        let user = try PasskeyJSON.reader(
            try options.value("user"), known: ["id", "name", "displayName"], path: "publicKey.user")
        var algorithms: [Int] = []
        for (index, item) in try options.array("pubKeyCredParams").enumerated() {
            let parameter = try PasskeyJSON.reader(
                item, known: ["type", "alg"], path: "publicKey.pubKeyCredParams[\(index)]")
            // WebAuthn §5.1.3: parameters of a type this client does not support are skipped.
            guard try parameter.string("type") == "public-key" else { continue }
            algorithms.append(try parameter.integer("alg"))
        }
        var userVerification = PasskeyUserVerification.preferred
        if options.has("authenticatorSelection") {
            let selection = try PasskeyJSON.reader(
                try options.value("authenticatorSelection"),
                known: ["authenticatorAttachment", "residentKey", "requireResidentKey", "userVerification"],
                path: "publicKey.authenticatorSelection")
            userVerification = try PasskeyJSON.userVerification(selection)
        }
        let relyingPartyID = try rp.optionalString("id") ?? ""
        let relyingPartyName = try rp.optionalString("name")
        let userID = try user.bytes("id")
        let userName = try user.string("name")
        let userDisplayName = try user.optionalString("displayName")
        let challenge = try options.bytes("challenge")
        let excluded = try PasskeyJSON.credentialIDs(options, "excludeCredentials")
        let attestation = try options.optionalString("attestation") ?? "none"
        let timeout = options.has("timeout") ? try options.integer("timeout") : nil
        do {
            try self.init(
                relyingPartyID: relyingPartyID, relyingPartyName: relyingPartyName, userID: userID,
                userName: userName, userDisplayName: userDisplayName, challenge: challenge,
                algorithms: algorithms, excludedCredentialIDs: excluded, userVerification: userVerification,
                attestation: attestation, timeout: timeout)
        } catch {
            throw PasskeyJSON.invalid(error)
        }
    }

    /// `{"publicKey": PublicKeyCredentialCreationOptionsJSON}`, as the server sends it.
    public var json: JSONValue {
        var options = JSONObjectBuilder()
        options.add(
            "rp",
            .object([
                JSONMember("name", .string(relyingPartyName)), JSONMember("id", .string(relyingPartyID)),
            ]))
        options.add(
            "user",
            .object([
                JSONMember("name", .string(userName)), JSONMember("id", .string(Base64URL.encode(userID))),
                JSONMember("displayName", .string(userDisplayName)),
            ]))
        options.add("challenge", Base64URL.encode(challenge))
        options.add(
            "pubKeyCredParams",
            .array(
                algorithms.map {
                    .object([JSONMember("type", .string("public-key")), JSONMember("alg", .integer($0))])
                }))
        if let timeout { options.add("timeout", timeout) }
        options.add("excludeCredentials", PasskeyJSON.descriptors(excludedCredentialIDs))
        options.add(
            "authenticatorSelection",
            .object([
                JSONMember("residentKey", .string("required")), JSONMember("requireResidentKey", .bool(true)),
                JSONMember("userVerification", .string(userVerification.rawValue)),
            ]))
        options.add("attestation", attestation)
        return .object([JSONMember("publicKey", options.value)])
    }
}

/// What the server asks an authenticator to sign: WebAuthn's
/// `PublicKeyCredentialRequestOptions`, read from `{"publicKey": PublicKeyCredentialRequestOptionsJSON}`
/// the way ``PasskeyCreationOptions`` reads its JSON.
public struct PasskeyRequestOptions: WireMessage, Hashable {
    /// The relying party's id (`rpId`).
    public let relyingPartyID: String
    /// The single-use challenge, at least 16 bytes.
    public let challenge: Data
    /// The credentials that may answer; empty means any discoverable passkey of the relying party.
    public let allowedCredentialIDs: [Data]
    /// Whether the user must be verified.
    public let userVerification: PasskeyUserVerification
    /// How long the ceremony may take, in milliseconds, if the server said.
    public let timeout: Int?

    /// Options from their parts.
    /// - Throws: ``KeyboundError/invalidInput`` for an empty relying party id or a challenge
    ///   under 16 bytes.
    public init(
        relyingPartyID: String, challenge: Data, allowedCredentialIDs: [Data] = [],
        userVerification: PasskeyUserVerification = .required, timeout: Int? = nil
    ) throws {
        guard !relyingPartyID.isEmpty else {
            throw KeyboundError.invalidInput("a passkey assertion needs a relying party id")
        }
        guard challenge.count >= 16 else {
            throw KeyboundError.invalidInput("a challenge is at least 16 bytes, not \(challenge.count)")
        }
        self.relyingPartyID = relyingPartyID
        self.challenge = challenge
        self.allowedCredentialIDs = allowedCredentialIDs
        self.userVerification = userVerification
        self.timeout = timeout
    }

    /// Reads `{"publicKey": PublicKeyCredentialRequestOptionsJSON}`.
    /// - Throws: ``WireError`` `invalid_request` for a missing or mistyped member, or values the
    ///   memberwise initializer refuses.
    public init(json: JSONValue) throws(WireFailure) {
        let options = try PasskeyJSON.publicKey(json, known: PasskeyJSON.requestMembers)
        let relyingPartyID = try options.optionalString("rpId") ?? ""
        let challenge = try options.bytes("challenge")
        let allowed = try PasskeyJSON.credentialIDs(options, "allowCredentials")
        let userVerification = try PasskeyJSON.userVerification(options)
        let timeout = options.has("timeout") ? try options.integer("timeout") : nil
        do {
            try self.init(
                relyingPartyID: relyingPartyID, challenge: challenge, allowedCredentialIDs: allowed,
                userVerification: userVerification, timeout: timeout)
        } catch {
            throw PasskeyJSON.invalid(error)
        }
    }

    /// `{"publicKey": PublicKeyCredentialRequestOptionsJSON}`, as the server sends it.
    public var json: JSONValue {
        var options = JSONObjectBuilder()
        options.add("challenge", Base64URL.encode(challenge))
        if let timeout { options.add("timeout", timeout) }
        options.add("rpId", relyingPartyID)
        options.add("allowCredentials", PasskeyJSON.descriptors(allowedCredentialIDs))
        options.add("userVerification", userVerification.rawValue)
        return .object([JSONMember("publicKey", options.value)])
    }
}

/// A new passkey, as the authenticator returned it: the parts of WebAuthn's
/// `RegistrationResponseJSON`, which ``json`` writes exactly as `PublicKeyCredential.toJSON()`.
public struct PasskeyRegistration: WireMessage, Hashable {
    /// The credential id the authenticator chose (`rawId`).
    public let credentialID: Data
    /// The exact `clientDataJSON` the authenticator built and hashed.
    public let clientDataJSON: Data
    /// The CBOR attestation object: format, statement and authenticator data.
    public let attestationObject: Data
    /// How the authenticator can be reached (`internal`, `hybrid`, …).
    public let transports: [String]
    /// Where the authenticator lives.
    public let attachment: PasskeyAttachment

    /// A registration from its parts.
    public init(
        credentialID: Data, clientDataJSON: Data, attestationObject: Data,
        transports: [String] = ["internal"],
        attachment: PasskeyAttachment = .platform
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.transports = transports
        self.attachment = attachment
    }

    /// Reads `RegistrationResponseJSON`; members it does not define are ignored.
    /// - Throws: ``WireError`` `invalid_request` for a missing or mistyped member, a `type`
    ///   other than `public-key`, or `id` and `rawId` that differ.
    public init(json: JSONValue) throws(WireFailure) {
        let credential = try PasskeyJSON.credential(json)
        let response = try PasskeyJSON.reader(
            try credential.reader.value("response"),
            known: ["clientDataJSON", "attestationObject", "transports"], path: "response")
        var transports: [String] = []
        if response.has("transports") {
            for item in try response.array("transports") {
                guard case .string(let transport) = item else {
                    throw WireError(.invalidRequest, "response.transports holds strings")
                }
                transports.append(transport)
            }
        }
        self.init(
            credentialID: credential.id, clientDataJSON: try response.bytes("clientDataJSON"),
            attestationObject: try response.bytes("attestationObject"), transports: transports,
            attachment: credential.attachment)
    }

    /// `RegistrationResponseJSON`, the body of `POST /v1/webauthn/register/verify`.
    public var json: JSONValue {
        PasskeyJSON.credentialJSON(
            id: credentialID, attachment: attachment,
            response: [
                JSONMember("clientDataJSON", .string(Base64URL.encode(clientDataJSON))),
                JSONMember("attestationObject", .string(Base64URL.encode(attestationObject))),
                JSONMember("transports", .array(transports.map { .string($0) })),
            ])
    }
}

/// A passkey's signature of a challenge, as the authenticator returned it: the parts of
/// WebAuthn's `AuthenticationResponseJSON`, which ``json`` writes as `PublicKeyCredential.toJSON()`.
public struct PasskeyAssertion: WireMessage, Hashable {
    /// The credential that signed (`rawId`).
    public let credentialID: Data
    /// The exact `clientDataJSON` the authenticator built and hashed.
    public let clientDataJSON: Data
    /// The authenticator data: RP ID hash, flags, signature counter.
    public let authenticatorData: Data
    /// The signature over `authenticatorData ‖ SHA-256(clientDataJSON)`.
    public let signature: Data
    /// The user handle the passkey was created with (discoverable credentials return it).
    public let userHandle: Data?
    /// Where the authenticator lives.
    public let attachment: PasskeyAttachment

    /// An assertion from its parts.
    public init(
        credentialID: Data, clientDataJSON: Data, authenticatorData: Data, signature: Data, userHandle: Data?,
        attachment: PasskeyAttachment = .platform
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
        self.attachment = attachment
    }

    /// Reads `AuthenticationResponseJSON`; members it does not define are ignored.
    /// - Throws: ``WireError`` `invalid_request` as ``PasskeyRegistration/init(json:)``.
    public init(json: JSONValue) throws(WireFailure) {
        let credential = try PasskeyJSON.credential(json)
        let response = try PasskeyJSON.reader(
            try credential.reader.value("response"),
            known: ["clientDataJSON", "authenticatorData", "signature", "userHandle"], path: "response")
        self.init(
            credentialID: credential.id, clientDataJSON: try response.bytes("clientDataJSON"),
            authenticatorData: try response.bytes("authenticatorData"),
            signature: try response.bytes("signature"),
            userHandle: response.has("userHandle") ? try response.bytes("userHandle") : nil,
            attachment: credential.attachment)
    }

    /// `AuthenticationResponseJSON`, the body of `POST /v1/webauthn/login/verify`.
    public var json: JSONValue {
        var response = [
            JSONMember("clientDataJSON", .string(Base64URL.encode(clientDataJSON))),
            JSONMember("authenticatorData", .string(Base64URL.encode(authenticatorData))),
            JSONMember("signature", .string(Base64URL.encode(signature))),
        ]
        if let userHandle { response.append(JSONMember("userHandle", .string(Base64URL.encode(userHandle)))) }
        return PasskeyJSON.credentialJSON(id: credentialID, attachment: attachment, response: response)
    }
}

/// The W3C Level 3 JSON forms, read as `parseCreationOptionsFromJSON` and `toJSON()` define them.
private enum PasskeyJSON {
    static let creationMembers: Set<String> = [
        "rp", "user", "challenge", "pubKeyCredParams", "timeout", "excludeCredentials",
        "authenticatorSelection", "hints", "attestation", "attestationFormats", "extensions",
    ]
    static let requestMembers: Set<String> = [
        "challenge", "timeout", "rpId", "allowCredentials", "userVerification", "hints", "extensions",
    ]

    /// A strict reader over the members of `value` the specification defines; the others are
    /// dropped first, as browsers ignore them.
    static func reader(_ value: JSONValue, known: Set<String>, path: String) throws(WireFailure) -> JSONReader
    {
        guard case .object(let members) = value else {
            throw WireError(.invalidRequest, "\(path) must be a JSON object")
        }
        return try JSONReader(.object(members.filter { known.contains($0.name) }), allowed: known, path: path)
    }

    /// The options inside `{"publicKey": …}`.
    static func publicKey(_ json: JSONValue, known: Set<String>) throws(WireFailure) -> JSONReader {
        let outer = try reader(json, known: ["publicKey"], path: "")
        return try reader(try outer.value("publicKey"), known: known, path: "publicKey")
    }

    /// A value the memberwise initializer refused, as the wire error a decoder throws.
    static func invalid(_ error: any Error) -> WireError {
        WireError(.invalidRequest, (error as? KeyboundError)?.message ?? "\(error)")
    }

    static func userVerification(_ reader: JSONReader) throws(WireFailure) -> PasskeyUserVerification {
        guard let text = try reader.optionalString("userVerification") else { return .preferred }
        // An unknown value is ignored, as WebAuthn's enumerations are: the default applies.
        return PasskeyUserVerification(rawValue: text) ?? .preferred
    }

    static func credentialIDs(_ reader: JSONReader, _ name: String) throws(WireFailure) -> [Data] {
        guard reader.has(name) else { return [] }
        var ids: [Data] = []
        for (index, item) in try reader.array(name).enumerated() {
            let descriptor = try Self.reader(
                item, known: ["type", "id", "transports"], path: "\(name)[\(index)]")
            guard try descriptor.string("type") == "public-key" else { continue }
            ids.append(try descriptor.bytes("id"))
        }
        return ids
    }

    static func descriptors(_ ids: [Data]) -> JSONValue {
        .array(
            ids.map {
                .object([
                    JSONMember("id", .string(Base64URL.encode($0))),
                    JSONMember("type", .string("public-key")),
                ])
            })
    }

    /// The members every `PublicKeyCredential.toJSON()` shares, checked.
    static func credential(_ json: JSONValue) throws(WireFailure)
        -> (reader: JSONReader, id: Data, attachment: PasskeyAttachment)
    {
        let credential = try reader(
            json,
            known: ["id", "rawId", "type", "response", "authenticatorAttachment", "clientExtensionResults"],
            path: "")
        guard try credential.string("type") == "public-key" else {
            throw WireError(.invalidRequest, "\"type\" must be \"public-key\"")
        }
        let rawID = try credential.bytes("rawId")
        guard try credential.bytes("id") == rawID else {
            throw WireError(.invalidRequest, "\"id\" and \"rawId\" name different credentials")
        }
        let attachment = try credential.optionalString("authenticatorAttachment").flatMap {
            PasskeyAttachment(rawValue: $0)
        }
        return (credential, rawID, attachment ?? .platform)
    }

    static func credentialJSON(id: Data, attachment: PasskeyAttachment, response: [JSONMember]) -> JSONValue {
        .object([
            JSONMember("id", .string(Base64URL.encode(id))),
            JSONMember("rawId", .string(Base64URL.encode(id))),
            JSONMember("response", .object(response)),
            JSONMember("authenticatorAttachment", .string(attachment.rawValue)),
            JSONMember("clientExtensionResults", .object([])), JSONMember("type", .string("public-key")),
        ])
    }
}
