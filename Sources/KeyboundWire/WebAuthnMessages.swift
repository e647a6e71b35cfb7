import Foundation

// Request and response bodies of the passkey (WebAuthn Level 3) and App Attest routes.
//
// The ceremony options and the credentials use WebAuthn's own JSON names (`publicKey`,
// `pubKeyCredParams`, `rawId`, camelCase), exactly as `PublicKeyCredential.parseCreationOptionsFromJSON`
// reads them and `PublicKeyCredential.toJSON()` writes them; Keybound's own members stay
// snake_case (`client_id`, `passkey_id`, the session tokens). Binary values are base64url without
// padding everywhere.

extension ProblemCode {
    // Passkey ceremonies. Most carry the name of the WebAuthn check that refused the ceremony.

    /// The credential JSON, its CBOR, client data or authenticator data is malformed (400).
    public static let malformedCredential = ProblemCode(rawValue: "malformed_credential")
    /// The credential uses an algorithm or attestation format the server does not verify (400).
    public static let unsupportedCredential = ProblemCode(rawValue: "unsupported_credential")
    /// `clientDataJSON.challenge` is not a challenge this server issued for this ceremony (400 on
    /// registration, 401 on login).
    public static let challengeMismatch = ProblemCode(rawValue: "challenge_mismatch")
    /// `clientDataJSON.type` is not the ceremony's (`webauthn.create`, `webauthn.get`).
    public static let clientDataTypeMismatch = ProblemCode(rawValue: "client_data_type_mismatch")
    /// `clientDataJSON.origin` is not one of the server's `--origin`s.
    public static let originNotAllowed = ProblemCode(rawValue: "origin_not_allowed")
    /// The ceremony ran in a cross-origin iframe.
    public static let crossOriginNotAllowed = ProblemCode(rawValue: "cross_origin_not_allowed")
    /// The authenticator data is for another RP ID (or, for App Attest, another App ID).
    public static let rpIDMismatch = ProblemCode(rawValue: "rp_id_mismatch")
    /// The authenticator did not test user presence.
    public static let userPresenceMissing = ProblemCode(rawValue: "user_presence_missing")
    /// The server requires user verification (biometrics or device PIN) and the authenticator did
    /// not perform it.
    public static let userVerificationMissing = ProblemCode(rawValue: "user_verification_missing")
    /// The backup flags are impossible, or backup eligibility changed since registration.
    public static let invalidBackupState = ProblemCode(rawValue: "invalid_backup_state")
    /// The credential's algorithm was not offered in `pubKeyCredParams`.
    public static let algorithmNotAllowed = ProblemCode(rawValue: "algorithm_not_allowed")
    /// The credential is not the one the ceremony names (id, `allowCredentials`).
    public static let credentialMismatch = ProblemCode(rawValue: "credential_mismatch")
    /// `userHandle` is missing for a discoverable login, or is not the credential owner's.
    public static let userHandleMismatch = ProblemCode(rawValue: "user_handle_mismatch")
    /// The signature counter went backwards: the authenticator may be cloned (401, audited).
    public static let clonedAuthenticator = ProblemCode(rawValue: "cloned_authenticator")
    /// The attestation statement does not verify (a wrong signature, a broken certificate rule,
    /// a nonce or key that does not match, an expired chain) (400).
    public static let invalidAttestation = ProblemCode(rawValue: "invalid_attestation")
    /// No passkey with this credential id is registered (401).
    public static let unknownCredential = ProblemCode(rawValue: "unknown_credential")
    /// This credential id is already registered, to this or another user (409).
    public static let credentialExists = ProblemCode(rawValue: "credential_exists")
    /// The account has no password and this is its last passkey: removing it would lock the user
    /// out (409).
    public static let lastPasskey = ProblemCode(rawValue: "last_passkey")
    /// The account has as many passkeys as the server allows; remove one first (409).
    public static let passkeyLimitReached = ProblemCode(rawValue: "passkey_limit_reached")

    // App Attest.

    /// The server requires App Attest (`--require-app-attest`) and the request carried none (403).
    public static let appAttestRequired = ProblemCode(rawValue: "app_attest_required")
    /// The App Attest environment (development or production) is not the server's (400).
    public static let environmentMismatch = ProblemCode(rawValue: "environment_mismatch")
    /// An App Attest assertion's counter is not above the last one accepted: a replay (401).
    public static let replayedAssertion = ProblemCode(rawValue: "replayed_assertion")
}

/// WebAuthn's attestation conveyance preference (`attestation`).
public enum AttestationConveyance: String, Sendable, Hashable, CaseIterable {
    /// No attestation (the default): the authenticator's model stays private.
    case none
    /// The client may replace the attestation with an anonymized one.
    case indirect
    /// The authenticator's own attestation.
    case direct
}

/// A JSON array member decoded item by item.
private func items<T>(_ values: [JSONValue], _ decode: (JSONValue) throws(WireFailure) -> T)
    throws(WireFailure)
    -> [T]
{
    var result: [T] = []
    for value in values { result.append(try decode(value)) }
    return result
}

// MARK: - Registration

/// `POST /v1/webauthn/register/options` request.
///
/// Without a bearer token it starts a sign-up: `username` is required and must be free. With one
/// (a password or passkey authentication within the step-up window) it adds a passkey to the
/// caller's account: `username` may be omitted, and when given must be the caller's.
public struct PasskeyRegistrationOptionsRequest: WireMessage, Hashable {
    /// 1–64 of `a-z 0-9 . _ @ + -`, compared case-insensitively (`username`).
    public let username: String?
    /// The name the authenticator shows, 1–64 characters without control characters
    /// (`displayName`; default: the username).
    public let displayName: String?
    /// The attestation conveyance preference (`attestation`; default `none`).
    public let attestation: AttestationConveyance?
    /// For a sign-up, the client the new session belongs to (`client_id`, as in password login;
    /// default: a new one per session).
    public let clientID: String?
    /// Creates the message from its members.
    public init(
        username: String?, displayName: String? = nil, attestation: AttestationConveyance? = nil,
        clientID: String? = nil
    ) {
        self.username = username
        self.displayName = displayName
        self.attestation = attestation
        self.clientID = clientID
    }
    /// Decodes the body strictly: `username`, `displayName`, `attestation` and `client_id` all
    /// optional (absent or null), no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["username", "displayName", "attestation", "client_id"])
        username = try reader.optionalString("username")
        displayName = try reader.optionalString("displayName")
        attestation =
            reader.has("attestation")
            ? try reader.enumeration("attestation", as: AttestationConveyance.self) : nil
        clientID = try reader.optionalString("client_id")
    }
    /// The body as sent: the members that are set, in the order `username`, `displayName`,
    /// `attestation`, `client_id`.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.addIfPresent("username", username)
        object.addIfPresent("displayName", displayName)
        object.addIfPresent("attestation", attestation?.rawValue)
        object.addIfPresent("client_id", clientID)
        return object.value
    }
}

/// A credential in `excludeCredentials` or `allowCredentials` (`PublicKeyCredentialDescriptorJSON`).
public struct PasskeyCredentialDescriptor: Sendable, Hashable {
    /// The credential id (`id`).
    public let id: Data
    /// Creates the descriptor of a credential.
    public init(id: Data) { self.id = id }

    init(json: JSONValue, path: String) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["type", "id", "transports"], path: path)
        guard try reader.string("type") == "public-key" else {
            throw WireError(.invalidRequest, "member \"\(path).type\" must be \"public-key\"")
        }
        id = try reader.bytes("id")
        if reader.has("transports") { _ = try reader.array("transports") }
    }

    var json: JSONValue {
        .object([JSONMember("type", .string("public-key")), JSONMember("id", .string(Base64URL.encode(id)))])
    }
}

/// `POST /v1/webauthn/register/options` response: `{"publicKey": PublicKeyCredentialCreationOptionsJSON}`,
/// which `PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey)` accepts as it is.
public struct PasskeyCreationOptions: WireMessage, Hashable {
    /// The RP ID (`rp.id`): the domain passkeys are scoped to.
    public let rpID: String
    /// The relying party's display name (`rp.name`).
    public let rpName: String
    /// The user handle (`user.id`): opaque, no personal data; passkeys return it on login.
    public let userID: Data
    /// The username (`user.name`).
    public let userName: String
    /// The display name (`user.displayName`).
    public let userDisplayName: String
    /// The single-use challenge (`challenge`), 32 random bytes.
    public let challenge: Data
    /// The COSE algorithms offered, in order of preference (`pubKeyCredParams`): ES256 (-7), EdDSA
    /// (-8), RS256 (-257).
    public let algorithms: [Int]
    /// How long the ceremony may take, in milliseconds (`timeout`).
    public let timeout: Int
    /// The user's existing passkeys, which the authenticator must not register again
    /// (`excludeCredentials`).
    public let excludeCredentials: [PasskeyCredentialDescriptor]
    /// `required` or `preferred` (`authenticatorSelection.userVerification`).
    public let userVerification: String
    /// The attestation conveyance preference (`attestation`).
    public let attestation: AttestationConveyance

    /// Creates the message from its members.
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

    /// Decodes the body strictly: `publicKey` with `rp`, `user`, `challenge`, `pubKeyCredParams`,
    /// `timeout`, `excludeCredentials`, `authenticatorSelection` and `attestation`, no other member.
    /// Resident keys are always required (`residentKey: "required"`), so that passkeys sign in
    /// without a username.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let options = try JSONReader(json, allowed: ["publicKey"]).object(
            "publicKey",
            allowed: [
                "rp", "user", "challenge", "pubKeyCredParams", "timeout", "excludeCredentials",
                "authenticatorSelection", "attestation",
            ])
        let rp = try options.object("rp", allowed: ["id", "name"])
        rpID = try rp.string("id")
        rpName = try rp.string("name")
        let user = try options.object("user", allowed: ["id", "name", "displayName"])
        userID = try user.bytes("id")
        userName = try user.string("name")
        userDisplayName = try user.string("displayName")
        challenge = try options.bytes("challenge")
        algorithms = try items(options.array("pubKeyCredParams")) { value throws(WireFailure) in
            let parameter = try JSONReader(
                value, allowed: ["type", "alg"], path: "publicKey.pubKeyCredParams[]")
            guard try parameter.string("type") == "public-key" else {
                throw WireError(.invalidRequest, "pubKeyCredParams entries have type \"public-key\"")
            }
            return try parameter.integer("alg")
        }
        timeout = try options.integer("timeout")
        excludeCredentials = try items(options.array("excludeCredentials")) { value throws(WireFailure) in
            try PasskeyCredentialDescriptor(json: value, path: "publicKey.excludeCredentials[]")
        }
        let selection = try options.object(
            "authenticatorSelection", allowed: ["residentKey", "requireResidentKey", "userVerification"])
        guard try selection.string("residentKey") == "required", try selection.bool("requireResidentKey")
        else {
            throw WireError(.invalidRequest, "authenticatorSelection must require a resident key")
        }
        userVerification = try selection.string("userVerification")
        attestation = try options.enumeration("attestation", as: AttestationConveyance.self)
    }

    /// The body as sent: `{"publicKey": {rp, user, challenge, pubKeyCredParams, timeout,
    /// excludeCredentials, authenticatorSelection, attestation}}`, in this order.
    public var json: JSONValue {
        var options = JSONObjectBuilder()
        options.add("rp", .object([JSONMember("id", .string(rpID)), JSONMember("name", .string(rpName))]))
        options.add(
            "user",
            .object([
                JSONMember("id", .string(Base64URL.encode(userID))), JSONMember("name", .string(userName)),
                JSONMember("displayName", .string(userDisplayName)),
            ]))
        options.add("challenge", Base64URL.encode(challenge))
        options.add(
            "pubKeyCredParams",
            .array(
                algorithms.map {
                    .object([JSONMember("type", .string("public-key")), JSONMember("alg", .integer($0))])
                }))
        options.add("timeout", timeout)
        options.add("excludeCredentials", .array(excludeCredentials.map(\.json)))
        options.add(
            "authenticatorSelection",
            .object([
                JSONMember("residentKey", .string("required")), JSONMember("requireResidentKey", .bool(true)),
                JSONMember("userVerification", .string(userVerification)),
            ]))
        options.add("attestation", attestation.rawValue)
        return .object([JSONMember("publicKey", options.value)])
    }
}

/// The members of ``TokenResponse``, which the passkey results carry beside their own.
private let tokenMembers: Set<String> = [
    "access_token", "refresh_token", "token_type", "expires_in", "session_id", "user_id",
]

/// The token members of `members`, as a ``TokenResponse``.
private func tokens(in json: JSONValue) throws(WireFailure) -> TokenResponse {
    guard case .object(let members) = json else {
        throw WireError(.invalidRequest, "the body must be a JSON object")
    }
    return try TokenResponse(json: .object(members.filter { tokenMembers.contains($0.name) }))
}

/// `POST /v1/webauthn/register/verify` response (200).
///
/// For a sign-up it also carries the new session's tokens (the members of ``TokenResponse``):
/// creating the passkey verified the user, so the new account is signed in at once.
public struct PasskeyRegistrationResult: WireMessage, Hashable {
    /// The new passkey's credential id (`credentialId`).
    public let credentialID: Data
    /// The attestation statement format (`fmt`): `none`, `packed`, `fido-u2f` or `apple`.
    public let format: String
    /// The credential's COSE algorithm (`alg`).
    public let algorithm: Int
    /// The authenticator's signature counter at registration (`signCount`).
    public let signCount: Int
    /// The account's username (`username`).
    public let username: String
    /// The new session's tokens, for a sign-up; nil when a passkey was added to a signed-in account.
    public let tokens: TokenResponse?

    /// Creates the message from its members.
    public init(
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

    /// Decodes the body strictly: `verified` (true), `credentialId`, `fmt`, `alg`, `signCount` and
    /// `username` required, the members of ``TokenResponse`` all present or all absent, no other
    /// member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json,
            allowed: Set(["verified", "credentialId", "fmt", "alg", "signCount", "username"]).union(
                tokenMembers))
        guard try reader.bool("verified") else {
            throw WireError(.invalidRequest, "member \"verified\" must be true")
        }
        credentialID = try reader.bytes("credentialId")
        format = try reader.string("fmt")
        algorithm = try reader.integer("alg")
        signCount = try reader.integer("signCount")
        username = try reader.string("username")
        tokens = reader.has("access_token") ? try KeyboundWire.tokens(in: json) : nil
    }

    /// The body as sent: `verified`, `credentialId`, `fmt`, `alg`, `signCount`, `username`, then
    /// the token members when there are tokens.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("verified", .bool(true))
        object.add("credentialId", Base64URL.encode(credentialID))
        object.add("fmt", format)
        object.add("alg", algorithm)
        object.add("signCount", signCount)
        object.add("username", username)
        guard let tokens, case .object(let members) = object.value, case .object(let extra) = tokens.json
        else {
            return object.value
        }
        return .object(members + extra)
    }
}

// MARK: - Login

/// `POST /v1/webauthn/login/options` request.
public struct PasskeyLoginOptionsRequest: WireMessage, Hashable {
    /// Whose passkeys may answer (`username`); nil lets the user pick any discoverable passkey of
    /// this site.
    public let username: String?
    /// The client the new session belongs to (`client_id`, as in password login: a new login from
    /// the same client ends its previous session); default: a new one per session.
    public let clientID: String?
    /// Creates the message from its members.
    public init(username: String? = nil, clientID: String? = nil) {
        self.username = username
        self.clientID = clientID
    }
    /// Decodes the body strictly: `username` and `client_id` optional (absent or null), no other
    /// member. An empty body is not JSON: send `{}`.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["username", "client_id"])
        username = try reader.optionalString("username")
        clientID = try reader.optionalString("client_id")
    }
    /// The body as sent: the members that are set, `username` then `client_id`.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.addIfPresent("username", username)
        object.addIfPresent("client_id", clientID)
        return object.value
    }
}

/// `POST /v1/webauthn/login/options` response: `{"publicKey": PublicKeyCredentialRequestOptionsJSON}`,
/// which `PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey)` accepts as it is.
public struct PasskeyRequestOptions: WireMessage, Hashable {
    /// The single-use challenge (`challenge`), 32 random bytes.
    public let challenge: Data
    /// How long the ceremony may take, in milliseconds (`timeout`).
    public let timeout: Int
    /// The RP ID (`rpId`).
    public let rpID: String
    /// The passkeys that may answer (`allowCredentials`); empty for a discoverable login.
    public let allowCredentials: [PasskeyCredentialDescriptor]
    /// `required` or `preferred` (`userVerification`).
    public let userVerification: String

    /// Creates the message from its members.
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

    /// Decodes the body strictly: `publicKey` with `challenge`, `timeout`, `rpId`,
    /// `allowCredentials` and `userVerification`, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let options = try JSONReader(json, allowed: ["publicKey"]).object(
            "publicKey", allowed: ["challenge", "timeout", "rpId", "allowCredentials", "userVerification"])
        challenge = try options.bytes("challenge")
        timeout = try options.integer("timeout")
        rpID = try options.string("rpId")
        allowCredentials = try items(options.array("allowCredentials")) { value throws(WireFailure) in
            try PasskeyCredentialDescriptor(json: value, path: "publicKey.allowCredentials[]")
        }
        userVerification = try options.string("userVerification")
    }

    /// The body as sent: `{"publicKey": {challenge, timeout, rpId, allowCredentials,
    /// userVerification}}`, in this order.
    public var json: JSONValue {
        var options = JSONObjectBuilder()
        options.add("challenge", Base64URL.encode(challenge))
        options.add("timeout", timeout)
        options.add("rpId", rpID)
        options.add("allowCredentials", .array(allowCredentials.map(\.json)))
        options.add("userVerification", userVerification)
        return .object([JSONMember("publicKey", options.value)])
    }
}

/// `POST /v1/webauthn/login/verify` response (200): the passkey that signed in, and the new
/// session's tokens (the members of ``TokenResponse``, as every login answers).
public struct PasskeyLoginResult: WireMessage, Hashable {
    /// The account's username (`username`).
    public let username: String
    /// The credential id of the passkey that signed in (`credentialId`).
    public let credentialID: Data
    /// The authenticator's signature counter now (`signCount`; 0 for passkeys that keep none).
    public let signCount: Int
    /// The session's tokens.
    public let tokens: TokenResponse

    /// Creates the message from its members.
    public init(username: String, credentialID: Data, signCount: Int, tokens: TokenResponse) {
        self.username = username
        self.credentialID = credentialID
        self.signCount = signCount
        self.tokens = tokens
    }

    /// Decodes the body strictly: `verified` (true), `username`, `credentialId`, `signCount` and the
    /// members of ``TokenResponse`` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json, allowed: Set(["verified", "username", "credentialId", "signCount"]).union(tokenMembers))
        guard try reader.bool("verified") else {
            throw WireError(.invalidRequest, "member \"verified\" must be true")
        }
        username = try reader.string("username")
        credentialID = try reader.bytes("credentialId")
        signCount = try reader.integer("signCount")
        tokens = try KeyboundWire.tokens(in: json)
    }

    /// The body as sent: `verified`, `username`, `credentialId`, `signCount`, then the token
    /// members in ``TokenResponse``'s order.
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("verified", .bool(true))
        object.add("username", username)
        object.add("credentialId", Base64URL.encode(credentialID))
        object.add("signCount", signCount)
        guard case .object(let members) = object.value, case .object(let extra) = tokens.json else {
            return object.value
        }
        return .object(members + extra)
    }
}

// MARK: - The credentials a browser or an app posts

/// The body of `POST /v1/webauthn/register/verify`: what `PublicKeyCredential.toJSON()` gives for
/// a new passkey (WebAuthn L3 `RegistrationResponseJSON`). Apps without a browser build it from
/// their platform's registration (on Apple platforms `ASAuthorizationPlatformPublicKeyCredentialRegistration`).
public struct PasskeyRegistrationCredential: WireMessage, Hashable {
    /// The credential id (`id` and `rawId`).
    public let credentialID: Data
    /// The exact client data bytes (`response.clientDataJSON`).
    public let clientDataJSON: Data
    /// The attestation object (`response.attestationObject`).
    public let attestationObject: Data
    /// `platform` or `cross-platform` (`authenticatorAttachment`), when known.
    public let authenticatorAttachment: String?

    /// Creates the message from its members.
    public init(
        credentialID: Data, clientDataJSON: Data, attestationObject: Data,
        authenticatorAttachment: String? = nil
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.authenticatorAttachment = authenticatorAttachment
    }

    /// Decodes `toJSON()` output: `id`, `rawId` (the same), `type` (`public-key`),
    /// `response.clientDataJSON` and `response.attestationObject` required; the other members a
    /// browser writes (`authenticatorAttachment`, `clientExtensionResults`, `response.transports`,
    /// `response.authenticatorData`, `response.publicKey`, `response.publicKeyAlgorithm`) allowed,
    /// nothing else.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let credential = try CredentialReader(json)
        credentialID = credential.id
        authenticatorAttachment = credential.attachment
        let response = try credential.reader.object(
            "response",
            allowed: [
                "clientDataJSON", "attestationObject", "transports", "authenticatorData", "publicKey",
                "publicKeyAlgorithm",
            ])
        clientDataJSON = try response.bytes("clientDataJSON")
        attestationObject = try response.bytes("attestationObject")
    }

    /// The body as sent: `id`, `rawId`, `type`, `response` (`clientDataJSON`, `attestationObject`),
    /// `authenticatorAttachment` (when known), `clientExtensionResults` (`{}`).
    public var json: JSONValue {
        CredentialReader.json(
            id: credentialID, attachment: authenticatorAttachment,
            response: [
                JSONMember("clientDataJSON", .string(Base64URL.encode(clientDataJSON))),
                JSONMember("attestationObject", .string(Base64URL.encode(attestationObject))),
            ])
    }
}

/// The body of `POST /v1/webauthn/login/verify`: what `PublicKeyCredential.toJSON()` gives for a
/// passkey assertion (WebAuthn L3 `AuthenticationResponseJSON`).
public struct PasskeyAssertionCredential: WireMessage, Hashable {
    /// The credential id (`id` and `rawId`).
    public let credentialID: Data
    /// The exact client data bytes (`response.clientDataJSON`).
    public let clientDataJSON: Data
    /// The authenticator data (`response.authenticatorData`).
    public let authenticatorData: Data
    /// The signature over authenticator data ‖ SHA-256(client data) (`response.signature`).
    public let signature: Data
    /// The user handle the passkey was created with (`response.userHandle`); required when the
    /// login named no user.
    public let userHandle: Data?
    /// `platform` or `cross-platform` (`authenticatorAttachment`), when known.
    public let authenticatorAttachment: String?

    /// Creates the message from its members.
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

    /// Decodes `toJSON()` output: `id`, `rawId` (the same), `type` (`public-key`) and
    /// `response.clientDataJSON`, `authenticatorData` and `signature` required,
    /// `response.userHandle` optional (absent or null), `authenticatorAttachment` and
    /// `clientExtensionResults` allowed, nothing else.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let credential = try CredentialReader(json)
        credentialID = credential.id
        authenticatorAttachment = credential.attachment
        let response = try credential.reader.object(
            "response", allowed: ["clientDataJSON", "authenticatorData", "signature", "userHandle"])
        clientDataJSON = try response.bytes("clientDataJSON")
        authenticatorData = try response.bytes("authenticatorData")
        signature = try response.bytes("signature")
        userHandle = response.has("userHandle") ? try response.bytes("userHandle") : nil
    }

    /// The body as sent: `id`, `rawId`, `type`, `response` (`clientDataJSON`, `authenticatorData`,
    /// `signature`, `userHandle` when known), `authenticatorAttachment` (when known),
    /// `clientExtensionResults` (`{}`).
    public var json: JSONValue {
        var response = [
            JSONMember("clientDataJSON", .string(Base64URL.encode(clientDataJSON))),
            JSONMember("authenticatorData", .string(Base64URL.encode(authenticatorData))),
            JSONMember("signature", .string(Base64URL.encode(signature))),
        ]
        if let userHandle { response.append(JSONMember("userHandle", .string(Base64URL.encode(userHandle)))) }
        return CredentialReader.json(
            id: credentialID, attachment: authenticatorAttachment, response: response)
    }
}

/// The members every `PublicKeyCredential.toJSON()` shares.
private struct CredentialReader {
    let reader: JSONReader
    let id: Data
    let attachment: String?

    init(_ json: JSONValue) throws(WireFailure) {
        reader = try JSONReader(
            json,
            allowed: ["id", "rawId", "type", "response", "authenticatorAttachment", "clientExtensionResults"])
        guard try reader.string("type") == "public-key" else {
            throw WireError(.invalidRequest, "member \"type\" must be \"public-key\"")
        }
        id = try reader.bytes("rawId")
        guard try reader.bytes("id") == id else {
            throw WireError(.invalidRequest, "members \"id\" and \"rawId\" must name the same credential")
        }
        attachment = try reader.optionalString("authenticatorAttachment")
        if reader.has("clientExtensionResults") {
            guard case .object = try reader.value("clientExtensionResults") else {
                throw WireError(.invalidRequest, "member \"clientExtensionResults\" must be an object")
            }
        }
    }

    static func json(id: Data, attachment: String?, response: [JSONMember]) -> JSONValue {
        var object = JSONObjectBuilder()
        object.add("id", Base64URL.encode(id))
        object.add("rawId", Base64URL.encode(id))
        object.add("type", "public-key")
        object.add("response", .object(response))
        object.addIfPresent("authenticatorAttachment", attachment)
        object.add("clientExtensionResults", .object([]))
        return object.value
    }
}

// MARK: - Managing passkeys

/// One passkey in `GET /v1/passkeys`.
public struct PasskeyInfo: WireMessage, Hashable {
    /// The passkey's opaque id (`passkey_id`), for `DELETE /v1/passkeys/{id}`.
    public let passkeyID: String
    /// Its WebAuthn credential id (`credential_id`).
    public let credentialID: Data
    /// Its COSE algorithm (`algorithm`): -7 ES256, -8 EdDSA, -257 RS256.
    public let algorithm: Int
    /// The attestation statement format it was registered with (`attestation_format`).
    public let attestationFormat: String
    /// Whether its attestation chains to a root the server trusts (`attested`); false for `none`
    /// and self attestation.
    public let attested: Bool
    /// Whether it can be synced to the user's other devices (`backup_eligible`, the BE flag).
    public let backupEligible: Bool
    /// Whether it was backed up at its last use (`backed_up`, the BS flag).
    public let backedUp: Bool
    /// When it was registered (`created_at`).
    public let createdAt: Date
    /// When it last signed in (`last_used_at`), or nil.
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

    /// Decodes the body strictly: `passkey_id`, `credential_id`, `algorithm`, `attestation_format`,
    /// `attested`, `backup_eligible`, `backed_up` and `created_at` required, `last_used_at`
    /// optional (absent or null), no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(
            json,
            allowed: [
                "passkey_id", "credential_id", "algorithm", "attestation_format", "attested",
                "backup_eligible",
                "backed_up", "created_at", "last_used_at",
            ])
        passkeyID = try reader.string("passkey_id")
        credentialID = try reader.bytes("credential_id")
        algorithm = try reader.integer("algorithm")
        attestationFormat = try reader.string("attestation_format")
        attested = try reader.bool("attested")
        backupEligible = try reader.bool("backup_eligible")
        backedUp = try reader.bool("backed_up")
        createdAt = try reader.timestamp("created_at")
        lastUsedAt = try reader.optionalTimestamp("last_used_at")
    }

    /// The body as sent: the members in the order above (`last_used_at` null when absent).
    public var json: JSONValue {
        var object = JSONObjectBuilder()
        object.add("passkey_id", passkeyID)
        object.add("credential_id", Base64URL.encode(credentialID))
        object.add("algorithm", algorithm)
        object.add("attestation_format", attestationFormat)
        object.add("attested", .bool(attested))
        object.add("backup_eligible", .bool(backupEligible))
        object.add("backed_up", .bool(backedUp))
        object.add("created_at", Timestamp.format(createdAt))
        object.add("last_used_at", lastUsedAt.map { .string(Timestamp.format($0)) } ?? .null)
        return object.value
    }
}

/// `GET /v1/passkeys` response.
public struct PasskeyListResponse: WireMessage, Hashable {
    /// The caller's passkeys, oldest first (`passkeys`).
    public let passkeys: [PasskeyInfo]
    /// Creates the message from its members.
    public init(passkeys: [PasskeyInfo]) { self.passkeys = passkeys }
    /// Decodes the body strictly: `passkeys` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        passkeys = try items(JSONReader(json, allowed: ["passkeys"]).array("passkeys")) {
            value throws(WireFailure) in try PasskeyInfo(json: value)
        }
    }
    /// The body as sent: `{"passkeys": …}`.
    public var json: JSONValue { .object([JSONMember("passkeys", .array(passkeys.map(\.json)))]) }
}

// MARK: - App Attest

/// `POST /v1/app-attest/challenges` response (201): the nonce an App Attest attestation for the
/// next device binding of this session must be made over.
///
/// The app hashes ``AppAttestClientData/binding(challenge:publicKey:)`` and passes the hash to
/// `DCAppAttestService.attestKey(_:clientDataHash:)`. A session has one outstanding challenge: a
/// new one replaces it.
public struct AppAttestChallengeResponse: WireMessage, Hashable {
    /// 32 random bytes (`challenge`).
    public let challenge: Data
    /// When it stops being accepted (`expires_at`).
    public let expiresAt: Date
    /// Creates the message from its members.
    public init(challenge: Data, expiresAt: Date) {
        self.challenge = challenge
        self.expiresAt = expiresAt
    }
    /// Decodes the body strictly: `challenge` and `expires_at` required, no other member.
    /// - Throws: ``WireError``: `unknown_member` for any other member, else `invalid_request`.
    public init(json: JSONValue) throws(WireFailure) {
        let reader = try JSONReader(json, allowed: ["challenge", "expires_at"])
        challenge = try reader.bytes("challenge")
        expiresAt = try reader.timestamp("expires_at")
    }
    /// The body as sent: `challenge` and `expires_at`, in this order.
    public var json: JSONValue {
        .object([
            JSONMember("challenge", .string(Base64URL.encode(challenge))),
            JSONMember("expires_at", .string(Timestamp.format(expiresAt))),
        ])
    }
}

/// The `app_attest` member of `POST /v1/devices`: an App Attest key's attestation, vouching for
/// the device key being bound.
public struct AppAttestBinding: Sendable, Hashable {
    /// The App Attest key id, as `DCAppAttestService.generateKey()` returned it, base64-decoded
    /// (`key_id`, 32 bytes).
    public let keyID: Data
    /// The attestation object `attestKey(_:clientDataHash:)` returned (`attestation`).
    public let attestation: Data
    /// Creates the member from its parts.
    public init(keyID: Data, attestation: Data) {
        self.keyID = keyID
        self.attestation = attestation
    }

    init(reader: JSONReader) throws(WireFailure) {
        keyID = try reader.bytes("key_id")
        attestation = try reader.bytes("attestation")
    }

    var json: JSONValue {
        .object([
            JSONMember("key_id", .string(Base64URL.encode(keyID))),
            JSONMember("attestation", .string(Base64URL.encode(attestation))),
        ])
    }
}

/// The client data App Attest signs over, defined once for the app and the server.
public enum AppAttestClientData {
    /// What an attestation for a device binding covers: the 32-byte challenge of
    /// `POST /v1/app-attest/challenges` followed by the device's public key (SubjectPublicKeyInfo
    /// DER, exactly the `public_key` of the binding). Its SHA-256 is the `clientDataHash`. The
    /// attestation thereby vouches for this one device key, whatever key App Attest itself uses.
    public static func binding(challenge: Data, publicKey: Data) -> Data { challenge + publicKey }
}
