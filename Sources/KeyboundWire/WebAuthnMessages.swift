import Foundation

// Request and response bodies of the passkey (WebAuthn Level 3) and App Attest routes.
//
// The ceremony options and the credentials use WebAuthn's own JSON names (`publicKey`,
// `pubKeyCredParams`, `rawId`, camelCase), exactly as `PublicKeyCredential.parseCreationOptionsFromJSON`
// reads them and `PublicKeyCredential.toJSON()` writes them; Keybound's own members stay
// snake_case (`client_id`, `passkey_id`, the session tokens). Binary values are base64url without
// padding everywhere. As in Messages.swift, each object names its members once in a `Member` enum.

/// WebAuthn's attestation conveyance preference (`attestation`).
package enum AttestationConveyance: String, Sendable, Hashable, CaseIterable {
    /// No attestation (the default): the authenticator's model stays private.
    case none
    /// The client may replace the attestation with an anonymized one.
    case indirect
    /// The authenticator's own attestation.
    case direct
}

/// The own member names of a passkey ceremony's result, whose first member, `verified`, is always
/// true.
package protocol CeremonyResultMember: MemberName {
    /// `verified`: written first, always true, and refused when false.
    static var verified: Self { get }
}

/// The member names of a passkey ceremony's result, which may carry a session's tokens: the
/// result's own (`verified` first), then those of ``TokenResponse``, in the order they are
/// written. Each name stays spelled once, in its own enum.
package enum WithTokenMembers<Own: CeremonyResultMember>: MemberName {
    /// One of the result's own members.
    case own(Own)
    /// One of the session tokens' members.
    case token(TokenResponse.Member)

    package init?(rawValue: String) {
        if let member = Own(rawValue: rawValue) {
            self = .own(member)
        } else if let member = TokenResponse.Member(rawValue: rawValue) {
            self = .token(member)
        } else {
            return nil
        }
    }

    package var rawValue: String {
        switch self {
        case .own(let member): member.rawValue
        case .token(let member): member.rawValue
        }
    }

    package static var allCases: [Self] { Own.allCases.map(own) + TokenResponse.Member.allCases.map(token) }

    /// Splits a result's body: a strict reader over its own members (a member that is neither the
    /// result's nor a token's is refused there, and `verified` must be true), and its token
    /// members (empty when it has none).
    static func split(_ json: JSONValue) throws(WireFailure) -> (own: JSONReader<Own>, tokens: [JSONMember]) {
        guard case .object(let members) = json else {
            throw WireError(.invalidRequest, "the body must be a JSON object")
        }
        let isToken = { (member: JSONMember) in TokenResponse.Member(rawValue: member.name) != nil }
        let own = try JSONReader<Own>(.object(members.filter { !isToken($0) }))
        guard try own.bool(.verified) else {
            throw WireError(.invalidRequest, "member \"\(Own.verified.rawValue)\" must be true")
        }
        return (own, members.filter(isToken))
    }

    /// A result's body: `verified` (true), the rest of its own members as `write` adds them, then
    /// the tokens' (none without tokens).
    static func object(tokens: TokenResponse?, _ write: (inout JSONObjectBuilder<Own>) -> Void) -> JSONValue {
        var own = JSONObjectBuilder<Own>()
        own.add(.verified, .bool(true))
        write(&own)
        guard case .object(let members) = own.value, case .object(let extra)? = tokens?.json else {
            return own.value
        }
        return .object(members + extra)
    }
}

// MARK: - Registration

/// `POST /v1/webauthn/register/options` request.
///
/// Without a bearer token it starts a sign-up: `username` is required and must be free. With one
/// (a password or passkey authentication within the step-up window) it adds a passkey to the
/// caller's account: `username` may be omitted, and when given must be the caller's.
package struct PasskeyRegistrationOptionsRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyRegistrationOptionsRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case username, displayName, attestation
        case clientID = "client_id"
    }
    /// The account's username.
    package let username: Username?
    /// The name the authenticator shows, 1–64 characters without control characters (default:
    /// the username; the server checks it).
    package let displayName: String?
    /// The attestation conveyance preference (default `none`).
    package let attestation: AttestationConveyance?
    /// For a sign-up, the client the new session belongs to, as in password login (default: a new
    /// one per session).
    package let clientID: ClientID?
    /// Creates the message from its members.
    package init(
        username: Username?, displayName: String? = nil, attestation: AttestationConveyance? = nil,
        clientID: ClientID? = nil
    ) {
        self.username = username
        self.displayName = displayName
        self.attestation = attestation
        self.clientID = clientID
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        username = try reader.optionalString(.username).map { text throws(WireFailure) in try Username(text) }
        displayName = try reader.optionalString(.displayName)
        attestation =
            reader.has(.attestation)
            ? try reader.enumeration(.attestation, as: AttestationConveyance.self) : nil
        clientID = try reader.optionalString(.clientID).map { text throws(WireFailure) in try ClientID(text) }
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.username, username?.rawValue)
        object.add(.displayName, displayName)
        object.add(.attestation, attestation)
        object.add(.clientID, clientID?.rawValue)
    }
}

/// A credential in `excludeCredentials` or `allowCredentials` (`PublicKeyCredentialDescriptorJSON`).
package struct PasskeyCredentialDescriptor: Sendable, Hashable {
    /// The JSON member names, in the order they are written (`transports` is read, never written).
    package enum Member: String, MemberName { case type, id, transports }
    /// The credential id.
    package let id: Data
    /// The descriptor of a credential.
    package init(id: Data) { self.id = id }

    init(json: JSONValue, path: String) throws(WireFailure) {
        let reader = try JSONReader<Member>(json, path: path)
        guard try reader.string(.type) == "public-key" else {
            throw WireError(.invalidRequest, "member \"\(path).type\" must be \"public-key\"")
        }
        id = try reader.bytes(.id)
        if reader.has(.transports) { _ = try reader.array(.transports) }
    }

    var json: JSONValue {
        var object = JSONObjectBuilder<Member>()
        object.add(.type, "public-key")
        object.add(.id, id)
        return object.value
    }
}

/// `POST /v1/webauthn/register/options` response: `{"publicKey": PublicKeyCredentialCreationOptionsJSON}`,
/// which `PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey)` accepts as it is.
/// Resident keys are always required, so that passkeys sign in without a username.
package struct PasskeyCreationOptions: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyCreationOptions"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case publicKey }
    /// The members of `publicKey`.
    package enum OptionsMember: String, MemberName {
        case rp, user, challenge, pubKeyCredParams, timeout, excludeCredentials, authenticatorSelection,
            attestation
    }
    /// The members of `publicKey.rp`.
    package enum RelyingPartyMember: String, MemberName { case id, name }
    /// The members of `publicKey.user`.
    package enum UserMember: String, MemberName { case id, name, displayName }
    /// The members of each entry of `publicKey.pubKeyCredParams`.
    package enum ParameterMember: String, MemberName { case type, alg }
    /// The members of `publicKey.authenticatorSelection`.
    package enum SelectionMember: String, MemberName {
        case residentKey, requireResidentKey, userVerification
    }

    /// The RP ID (`rp.id`): the domain passkeys are bound to.
    package let rpID: String
    /// The relying party's display name (`rp.name`).
    package let rpName: String
    /// The user handle (`user.id`): opaque, no personal data; passkeys return it at sign-in.
    package let userID: Data
    /// The username (`user.name`).
    package let userName: String
    /// The display name (`user.displayName`).
    package let userDisplayName: String
    /// The single-use challenge, 32 random bytes.
    package let challenge: Data
    /// The COSE algorithms offered, in order of preference (`pubKeyCredParams`): ES256 (-7), EdDSA
    /// (-8), RS256 (-257).
    package let algorithms: [Int]
    /// How long the ceremony may take, in milliseconds.
    package let timeout: Int
    /// The user's passkeys, which the authenticator must not register again.
    package let excludeCredentials: [PasskeyCredentialDescriptor]
    /// `required` or `preferred` (`authenticatorSelection.userVerification`).
    package let userVerification: String
    /// The attestation conveyance preference.
    package let attestation: AttestationConveyance

    /// Creates the message from its members.
    package init(
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

    package init(reader: JSONReader<Member>) throws(WireFailure) {
        let options = try JSONReader<OptionsMember>(reader.value(.publicKey), path: Member.publicKey.rawValue)
        let rp = try JSONReader<RelyingPartyMember>(options.value(.rp), path: "publicKey.rp")
        rpID = try rp.string(.id)
        rpName = try rp.string(.name)
        let user = try JSONReader<UserMember>(options.value(.user), path: "publicKey.user")
        userID = try user.bytes(.id)
        userName = try user.string(.name)
        userDisplayName = try user.string(.displayName)
        challenge = try options.bytes(.challenge)
        algorithms = try options.array(.pubKeyCredParams) { value throws(WireFailure) in
            let parameter = try JSONReader<ParameterMember>(value, path: "publicKey.pubKeyCredParams[]")
            guard try parameter.string(.type) == "public-key" else {
                throw WireError(.invalidRequest, "pubKeyCredParams entries have type \"public-key\"")
            }
            return try parameter.integer(.alg)
        }
        timeout = try options.integer(.timeout)
        excludeCredentials = try options.array(.excludeCredentials) { value throws(WireFailure) in
            try PasskeyCredentialDescriptor(json: value, path: "publicKey.excludeCredentials[]")
        }
        let selection = try JSONReader<SelectionMember>(
            options.value(.authenticatorSelection), path: "publicKey.authenticatorSelection")
        guard try selection.string(.residentKey) == "required", try selection.bool(.requireResidentKey) else {
            throw WireError(.invalidRequest, "authenticatorSelection must require a resident key")
        }
        userVerification = try selection.string(.userVerification)
        attestation = try options.enumeration(.attestation, as: AttestationConveyance.self)
    }

    package func write(to object: inout JSONObjectBuilder<Member>) {
        var rp = JSONObjectBuilder<RelyingPartyMember>()
        rp.add(.id, rpID)
        rp.add(.name, rpName)
        var user = JSONObjectBuilder<UserMember>()
        user.add(.id, userID)
        user.add(.name, userName)
        user.add(.displayName, userDisplayName)
        var selection = JSONObjectBuilder<SelectionMember>()
        selection.add(.residentKey, "required")
        selection.add(.requireResidentKey, .bool(true))
        selection.add(.userVerification, userVerification)
        var options = JSONObjectBuilder<OptionsMember>()
        options.add(.rp, rp.value)
        options.add(.user, user.value)
        options.add(.challenge, challenge)
        options.add(
            .pubKeyCredParams,
            .array(
                algorithms.map { algorithm in
                    var parameter = JSONObjectBuilder<ParameterMember>()
                    parameter.add(.type, "public-key")
                    parameter.add(.alg, algorithm)
                    return parameter.value
                }))
        options.add(.timeout, timeout)
        options.add(.excludeCredentials, .array(excludeCredentials.map(\.json)))
        options.add(.authenticatorSelection, selection.value)
        options.add(.attestation, attestation)
        object.add(.publicKey, options.value)
    }
}

/// `POST /v1/webauthn/register/verify` response (200).
///
/// For a sign-up it also carries the new session's tokens (the members of ``TokenResponse``):
/// creating the passkey verified the user, so the new account is signed in at once.
package struct PasskeyRegistrationResult: WireMessage, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyRegistrationResult"
    /// The result's own member names, in the order they are written.
    package enum OwnMember: String, CeremonyResultMember {
        case verified, credentialId, fmt, alg, signCount, username
    }
    /// The JSON member names, in the order they are written: the result's own, then the tokens'.
    package typealias Member = WithTokenMembers<OwnMember>
    /// The new passkey's credential id (`credentialId`).
    package let credentialID: Data
    /// The attestation statement format (`fmt`): `none`, `packed`, `fido-u2f` or `apple`.
    package let format: String
    /// The credential's COSE algorithm (`alg`).
    package let algorithm: Int
    /// The authenticator's signature counter at registration.
    package let signCount: Int
    /// The account's username.
    package let username: String
    /// The new session's tokens, for a sign-up; nil when a passkey was added to a signed-in account.
    package let tokens: TokenResponse?

    /// Creates the message from its members.
    package init(
        credentialID: Data, format: String, algorithm: Int, signCount: Int, username: String,
        tokens: TokenResponse?
    ) {
        self.credentialID = credentialID
        self.format = format
        self.algorithm = algorithm
        self.signCount = signCount
        self.username = username
        self.tokens = tokens
    }

    /// Decodes the body strictly; the token members are all present or all absent.
    package init(json: JSONValue) throws(WireFailure) {
        let (reader, tokens) = try Member.split(json)
        credentialID = try reader.bytes(.credentialId)
        format = try reader.string(.fmt)
        algorithm = try reader.integer(.alg)
        signCount = try reader.integer(.signCount)
        username = try reader.string(.username)
        self.tokens = tokens.isEmpty ? nil : try TokenResponse(json: .object(tokens))
    }

    package var json: JSONValue {
        Member.object(tokens: tokens) { object in
            object.add(.credentialId, credentialID)
            object.add(.fmt, format)
            object.add(.alg, algorithm)
            object.add(.signCount, signCount)
            object.add(.username, username)
        }
    }
}

// MARK: - Sign-in

/// `POST /v1/webauthn/login/options` request. `{}` lets any discoverable passkey of the site
/// answer.
package struct PasskeyLoginOptionsRequest: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyLoginOptionsRequest"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case username
        case clientID = "client_id"
    }
    /// Whose passkeys may answer; nil lets the user pick any discoverable passkey of this site.
    package let username: Username?
    /// The client the new session belongs to, as in password login (a new sign-in from the same
    /// client ends its previous session); default: a new one per session.
    package let clientID: ClientID?
    /// Creates the message from its members.
    package init(username: Username? = nil, clientID: ClientID? = nil) {
        self.username = username
        self.clientID = clientID
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        username = try reader.optionalString(.username).map { text throws(WireFailure) in try Username(text) }
        clientID = try reader.optionalString(.clientID).map { text throws(WireFailure) in try ClientID(text) }
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.username, username?.rawValue)
        object.add(.clientID, clientID?.rawValue)
    }
}

/// `POST /v1/webauthn/login/options` response: `{"publicKey": PublicKeyCredentialRequestOptionsJSON}`,
/// which `PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey)` accepts as it is.
package struct PasskeyRequestOptions: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyRequestOptions"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case publicKey }
    /// The members of `publicKey`.
    package enum OptionsMember: String, MemberName {
        case challenge, timeout, rpId, userVerification
    }
    /// The single-use challenge (the server's, opaque).
    package let challenge: Data
    /// How long the ceremony may take, in milliseconds.
    package let timeout: Int
    /// The RP ID (`rpId`).
    package let rpID: String
    /// `required` or `preferred`.
    package let userVerification: String

    /// Creates the message from its members. There is no `allowCredentials`: every Keybound
    /// passkey is discoverable, and a list would tell anyone which accounts have passkeys.
    package init(challenge: Data, timeout: Int, rpID: String, userVerification: String) {
        self.challenge = challenge
        self.timeout = timeout
        self.rpID = rpID
        self.userVerification = userVerification
    }

    package init(reader: JSONReader<Member>) throws(WireFailure) {
        let options = try JSONReader<OptionsMember>(reader.value(.publicKey), path: Member.publicKey.rawValue)
        challenge = try options.bytes(.challenge)
        timeout = try options.integer(.timeout)
        rpID = try options.string(.rpId)
        userVerification = try options.string(.userVerification)
    }

    package func write(to object: inout JSONObjectBuilder<Member>) {
        var options = JSONObjectBuilder<OptionsMember>()
        options.add(.challenge, challenge)
        options.add(.timeout, timeout)
        options.add(.rpId, rpID)
        options.add(.userVerification, userVerification)
        object.add(.publicKey, options.value)
    }
}

/// `POST /v1/webauthn/login/verify` response (200): the passkey that signed in, and the new
/// session's tokens (the members of ``TokenResponse``, as every login answers).
package struct PasskeyLoginResult: WireMessage, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyLoginResult"
    /// The result's own member names, in the order they are written.
    package enum OwnMember: String, CeremonyResultMember { case verified, username, credentialId, signCount }
    /// The JSON member names, in the order they are written: the result's own, then the tokens'.
    package typealias Member = WithTokenMembers<OwnMember>
    /// The account's username.
    package let username: String
    /// The credential id of the passkey that signed in (`credentialId`).
    package let credentialID: Data
    /// The authenticator's signature counter now (0 for passkeys that keep none).
    package let signCount: Int
    /// The session's tokens.
    package let tokens: TokenResponse

    /// Creates the message from its members.
    package init(username: String, credentialID: Data, signCount: Int, tokens: TokenResponse) {
        self.username = username
        self.credentialID = credentialID
        self.signCount = signCount
        self.tokens = tokens
    }

    package init(json: JSONValue) throws(WireFailure) {
        let (reader, tokens) = try Member.split(json)
        username = try reader.string(.username)
        credentialID = try reader.bytes(.credentialId)
        signCount = try reader.integer(.signCount)
        self.tokens = try TokenResponse(json: .object(tokens))
    }

    package var json: JSONValue {
        Member.object(tokens: tokens) { object in
            object.add(.username, username)
            object.add(.credentialId, credentialID)
            object.add(.signCount, signCount)
        }
    }
}

// MARK: - The credentials a browser or an app posts

/// The members every `PublicKeyCredential.toJSON()` shares.
package enum CredentialMember: String, MemberName {
    case id, rawId, type, response, authenticatorAttachment, clientExtensionResults
}

/// A credential as `PublicKeyCredential.toJSON()` writes it: the members every credential shares,
/// checked and written here once, and a `response` object with members of its own kind.
package protocol PasskeyCredential: WireObject where Member == CredentialMember {
    /// The members of `response`, in the order they are written.
    associatedtype ResponseMember: MemberName
    /// The credential id (`id` and `rawId`).
    var credentialID: Data { get }
    /// `authenticatorAttachment`: `platform` or `cross-platform`, when known.
    var attachment: String? { get }
    /// Decodes the credential from its checked shared members and a strict reader over `response`.
    /// - Throws: ``WireError`` for missing members, wrong types or bad values in `response`.
    init(credentialID: Data, attachment: String?, response: JSONReader<ResponseMember>) throws(WireFailure)
    /// Appends the members of `response`, in the order of `ResponseMember`.
    func writeResponse(to response: inout JSONObjectBuilder<ResponseMember>)
}

extension PasskeyCredential {
    /// Reads the shared members: `type` must be `public-key`, `id` and `rawId` the same
    /// credential, `clientExtensionResults` (when present) an object.
    package init(reader: JSONReader<CredentialMember>) throws(WireFailure) {
        guard try reader.string(.type) == "public-key" else {
            throw WireError(.invalidRequest, "member \"type\" must be \"public-key\"")
        }
        let id = try reader.bytes(.rawId)
        guard try reader.bytes(.id) == id else {
            throw WireError(.invalidRequest, "members \"id\" and \"rawId\" must name the same credential")
        }
        if reader.has(.clientExtensionResults) {
            guard case .object = try reader.value(.clientExtensionResults) else {
                throw WireError(.invalidRequest, "member \"clientExtensionResults\" must be an object")
            }
        }
        try self.init(
            credentialID: id, attachment: reader.optionalString(.authenticatorAttachment),
            response: JSONReader(reader.value(.response), path: Member.response.rawValue))
    }

    /// `id`, `rawId`, `type`, `response`, `authenticatorAttachment` (when known) and
    /// `clientExtensionResults` (`{}`), in this order.
    package func write(to object: inout JSONObjectBuilder<CredentialMember>) {
        var response = JSONObjectBuilder<ResponseMember>()
        writeResponse(to: &response)
        object.add(.id, credentialID)
        object.add(.rawId, credentialID)
        object.add(.type, "public-key")
        object.add(.response, response.value)
        if let attachment { object.add(.authenticatorAttachment, attachment) }
        object.add(.clientExtensionResults, .object([]))
    }
}

/// A new passkey as the authenticator returned it: the parts of WebAuthn's
/// `RegistrationResponseJSON`. It is the body the SDK sends to `POST /v1/webauthn/register/verify`,
/// written as `PublicKeyCredential.toJSON()` writes it for a browser.
///
/// The server reads these bodies with KeyboundWebAuthn's parser, which ignores members it does not
/// need; this type is what the SDK writes, and decodes the members browsers write today.
public struct PasskeyRegistration: PasskeyCredential, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "RegistrationResponseJSON"
    /// The members of `response` (the last four are read, never written).
    package enum ResponseMember: String, MemberName {
        case clientDataJSON, attestationObject, transports, authenticatorData, publicKey, publicKeyAlgorithm
    }
    /// The credential id the authenticator chose (`rawId`).
    public let credentialID: Data
    /// The exact `clientDataJSON` the authenticator built and hashed.
    public let clientDataJSON: Data
    /// The CBOR attestation object: format, statement and authenticator data.
    public let attestationObject: Data
    /// `platform` (this device) or `cross-platform` (a security key, a phone nearby), when known.
    public let attachment: String?

    /// A registration from its parts.
    public init(credentialID: Data, clientDataJSON: Data, attestationObject: Data, attachment: String? = nil)
    {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.attachment = attachment
    }

    package init(credentialID: Data, attachment: String?, response: JSONReader<ResponseMember>)
        throws(WireFailure)
    {
        self.credentialID = credentialID
        self.attachment = attachment
        clientDataJSON = try response.bytes(.clientDataJSON)
        attestationObject = try response.bytes(.attestationObject)
    }

    package func writeResponse(to response: inout JSONObjectBuilder<ResponseMember>) {
        response.add(.clientDataJSON, clientDataJSON)
        response.add(.attestationObject, attestationObject)
    }
}

/// A passkey's signature of a challenge as the authenticator returned it: the parts of WebAuthn's
/// `AuthenticationResponseJSON`. It is the body the SDK sends to `POST /v1/webauthn/login/verify`,
/// written as `PublicKeyCredential.toJSON()` writes it for a browser.
public struct PasskeyAssertion: PasskeyCredential, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "AuthenticationResponseJSON"
    /// The members of `response`.
    package enum ResponseMember: String, MemberName {
        case clientDataJSON, authenticatorData, signature, userHandle
    }
    /// The credential that signed (`rawId`).
    public let credentialID: Data
    /// The exact `clientDataJSON` the authenticator built and hashed.
    public let clientDataJSON: Data
    /// The authenticator data: RP ID hash, flags, signature counter.
    public let authenticatorData: Data
    /// The signature over `authenticatorData ‖ SHA-256(clientDataJSON)`.
    public let signature: Data
    /// The user handle the passkey was created with (discoverable credentials return it); the
    /// server requires it when the sign-in named no user.
    public let userHandle: Data?
    /// `platform` or `cross-platform`, when known.
    public let attachment: String?

    /// An assertion from its parts.
    public init(
        credentialID: Data, clientDataJSON: Data, authenticatorData: Data, signature: Data, userHandle: Data?,
        attachment: String? = nil
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
        self.attachment = attachment
    }

    package init(credentialID: Data, attachment: String?, response: JSONReader<ResponseMember>)
        throws(WireFailure)
    {
        self.credentialID = credentialID
        self.attachment = attachment
        clientDataJSON = try response.bytes(.clientDataJSON)
        authenticatorData = try response.bytes(.authenticatorData)
        signature = try response.bytes(.signature)
        userHandle = try response.optionalBytes(.userHandle)
    }

    package func writeResponse(to response: inout JSONObjectBuilder<ResponseMember>) {
        response.add(.clientDataJSON, clientDataJSON)
        response.add(.authenticatorData, authenticatorData)
        response.add(.signature, signature)
        if let userHandle { response.add(.userHandle, userHandle) }
    }
}

// MARK: - Managing passkeys

/// One passkey in `GET /v1/passkeys`.
public struct PasskeyInfo: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "Passkey"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case passkeyID = "passkey_id"
        case credentialID = "credential_id"
        case algorithm
        case attestationFormat = "attestation_format"
        case attested
        case backupEligible = "backup_eligible"
        case backedUp = "backed_up"
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
    }
    /// The passkey's opaque id, for `DELETE /v1/passkeys/{id}`.
    public let passkeyID: String
    /// Its WebAuthn credential id.
    public let credentialID: Data
    /// Its COSE algorithm: -7 ES256, -8 EdDSA, -257 RS256.
    public let algorithm: Int
    /// The attestation statement format it was registered with.
    public let attestationFormat: String
    /// Whether its attestation chains to a root the server trusts; false for `none` and self
    /// attestation.
    public let attested: Bool
    /// Whether it can be synced to the user's other devices (the BE flag).
    public let backupEligible: Bool
    /// Whether it was backed up at its last use (the BS flag).
    public let backedUp: Bool
    /// When it was registered.
    public let createdAt: Date
    /// When it last signed in, or nil.
    public let lastUsedAt: Date?

    /// Creates the message from its members.
    public init(
        passkeyID: String, credentialID: Data, algorithm: Int, attestationFormat: String, attested: Bool,
        backupEligible: Bool, backedUp: Bool, createdAt: Date, lastUsedAt: Date?
    ) {
        self.passkeyID = passkeyID
        self.credentialID = credentialID
        self.algorithm = algorithm
        self.attestationFormat = attestationFormat
        self.attested = attested
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }

    package init(reader: JSONReader<Member>) throws(WireFailure) {
        passkeyID = try reader.string(.passkeyID)
        credentialID = try reader.bytes(.credentialID)
        algorithm = try reader.integer(.algorithm)
        attestationFormat = try reader.string(.attestationFormat)
        attested = try reader.bool(.attested)
        backupEligible = try reader.bool(.backupEligible)
        backedUp = try reader.bool(.backedUp)
        createdAt = try reader.timestamp(.createdAt)
        lastUsedAt = try reader.optionalTimestamp(.lastUsedAt)
    }

    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.passkeyID, passkeyID)
        object.add(.credentialID, credentialID)
        object.add(.algorithm, algorithm)
        object.add(.attestationFormat, attestationFormat)
        object.add(.attested, .bool(attested))
        object.add(.backupEligible, .bool(backupEligible))
        object.add(.backedUp, .bool(backedUp))
        object.add(.createdAt, createdAt)
        object.add(.lastUsedAt, lastUsedAt)
    }
}

/// `GET /v1/passkeys` response.
package struct PasskeyListResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "PasskeyList"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName { case passkeys }
    /// The caller's passkeys, oldest first.
    package let passkeys: [PasskeyInfo]
    /// Creates the message from its members.
    package init(passkeys: [PasskeyInfo]) { self.passkeys = passkeys }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        passkeys = try reader.array(.passkeys, each: PasskeyInfo.init(json:))
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.passkeys, .array(passkeys.map(\.json)))
    }
}

// MARK: - App Attest

/// `POST /v1/app-attest/challenges` response (201): the challenge an App Attest attestation for
/// the next device binding of this session must be made over. A session has one outstanding
/// challenge: a new one replaces it.
///
/// The app hashes ``AppAttestClientData/binding(challenge:publicKey:)`` and passes the hash to
/// `DCAppAttestService.attestKey(_:clientDataHash:)`.
package struct AppAttestChallengeResponse: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "AppAttestChallenge"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case challenge
        case expiresAt = "expires_at"
    }
    /// 32 random bytes.
    package let challenge: Data
    /// When it stops being accepted.
    package let expiresAt: Date
    /// Creates the message from its members.
    package init(challenge: Data, expiresAt: Date) {
        self.challenge = challenge
        self.expiresAt = expiresAt
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        challenge = try reader.bytes(.challenge)
        expiresAt = try reader.timestamp(.expiresAt)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.challenge, challenge)
        object.add(.expiresAt, expiresAt)
    }
}

/// The `app_attest` member of `POST /v1/devices`: an App Attest key's attestation, vouching for
/// the device key being bound.
package struct AppAttestBinding: WireObject, Hashable {
    /// Its schema in docs/openapi.yaml.
    package static let schemaName = "AppAttestBinding"
    /// The JSON member names, in the order they are written.
    package enum Member: String, MemberName {
        case keyID = "key_id"
        case attestation
    }
    /// The App Attest key id `DCAppAttestService.generateKey()` returned, base64-decoded (32 bytes).
    package let keyID: Data
    /// The attestation object `attestKey(_:clientDataHash:)` returned.
    package let attestation: Data
    /// Creates the member from its parts.
    package init(keyID: Data, attestation: Data) {
        self.keyID = keyID
        self.attestation = attestation
    }
    package init(reader: JSONReader<Member>) throws(WireFailure) {
        keyID = try reader.bytes(.keyID)
        attestation = try reader.bytes(.attestation)
    }
    package func write(to object: inout JSONObjectBuilder<Member>) {
        object.add(.keyID, keyID)
        object.add(.attestation, attestation)
    }
}

/// The client data App Attest signs over, defined once for the app and the server.
package enum AppAttestClientData {
    /// What an attestation for a device binding covers: the 32-byte challenge of
    /// `POST /v1/app-attest/challenges` followed by the device's public key (SubjectPublicKeyInfo
    /// DER, exactly the `public_key` of the binding). Its SHA-256 is the `clientDataHash`. The
    /// attestation thereby vouches for this one device key, whatever key App Attest itself uses.
    package static func binding(challenge: Data, publicKey: Data) -> Data { challenge + publicKey }
}
