import Foundation
import KeyboundWire
import Testing

@testable import KeyboundServer

/// The names Swift spells once (KeyboundWire's vocabularies and each message's `Member` enum)
/// are the names docs/openapi.yaml documents: a value or member added on one side only fails here.
@Suite("docs/openapi.yaml and KeyboundWire name the same things")
struct OpenAPIVocabularyTests {
    /// The string values of `schemas.<schema>.properties.<property>.enum` (null left out).
    private func specEnum(_ schema: String, _ property: String) throws -> [String] {
        let values = try #require(
            properties(of: schema).flatMap { OpenAPISpec.member($0, property) }.flatMap {
                OpenAPISpec.member($0, "enum")
            }, "no enum at \(schema).\(property)")
        guard case .array(let items) = values else {
            throw TestFailure("\(schema).\(property): enum is no list")
        }
        return items.compactMap { OpenAPISpec.string($0) }
    }

    private func properties(of schema: String) -> JSONValue? {
        OpenAPISpec.shared.root.member("components")?.member("schemas")?.member(schema)?.member("properties")
    }

    /// The property names of `schemas.<schema>`, in the document's order.
    private func specMembers(_ schema: String) throws -> [String] {
        guard case .object(let members)? = properties(of: schema) else {
            throw TestFailure("no properties for \(schema)")
        }
        return members.map(\.name)
    }

    @Test func problemCodes() throws {
        #expect(ProblemCode.known.map(\.rawValue) == (try specEnum("Problem", "code")))
    }

    /// Every audit type the server writes is documented, `address_lockout` included (it was
    /// missing while `throttled`, no longer written, was listed).
    @Test func auditEventTypesAndMethods() throws {
        #expect(AuditEventType.known.map(\.rawValue) == (try specEnum("AuditEvent", "type")))
        #expect(AuditMethod.known.map(\.rawValue) == (try specEnum("AuditEvent", "method")))
    }

    @Test func closedEnumerations() throws {
        #expect(AuthMethod.allCases.map(\.rawValue) == (try specEnum("Me", "auth_method")))
        #expect(
            KeyProtection.allCases.map(\.rawValue) == (try specEnum("BindDeviceRequest", "key_protection")))
        #expect(KeyProtection.allCases.map(\.rawValue) == (try specEnum("Device", "key_protection")))
        #expect(ApprovalStatus.allCases.map(\.rawValue) == (try specEnum("Approval", "status")))
        // `suspended` only decodes answers of older servers; this one never sends it.
        #expect(
            DeviceStatus.allCases.filter { $0 != .suspended }.map(\.rawValue)
                == (try specEnum("Device", "status")))
    }

    /// Enumerated values are snake_case like every member name.
    @Test func enumeratedValuesAreSnakeCase() {
        let values =
            ProblemCode.known.map(\.rawValue) + AuditEventType.known.map(\.rawValue)
            + AuditMethod.known.map(\.rawValue) + AuthMethod.allCases.map(\.rawValue)
            + KeyProtection.allCases.map(\.rawValue) + DeviceStatus.allCases.map(\.rawValue)
            + ApprovalStatus.allCases.map(\.rawValue) + [SigningPayload.Purpose.login.rawValue]
            + [SigningPayload.Purpose.approve.rawValue]
        for value in values {
            #expect(value.range(of: "^[a-z]+(_[a-z]+)*$", options: .regularExpression) != nil, "\(value)")
        }
    }

    @Test(arguments: [
        ("Health", HealthResponse.Member.allCases.map(\.rawValue)),
        ("CreateAccountRequest", CreateAccountRequest.Member.allCases.map(\.rawValue)),
        ("CreateAccountResponse", CreateAccountResponse.Member.allCases.map(\.rawValue)),
        ("PasswordLoginRequest", PasswordLoginRequest.Member.allCases.map(\.rawValue)),
        ("RefreshRequest", RefreshRequest.Member.allCases.map(\.rawValue)),
        ("Tokens", TokenResponse.Member.allCases.map(\.rawValue)),
        ("Me", MeResponse.Member.allCases.map(\.rawValue)),
        ("BindDeviceRequest", BindDeviceRequest.Member.allCases.map(\.rawValue)),
        ("BindDeviceResponse", BindDeviceResponse.Member.allCases.map(\.rawValue)),
        ("Device", DeviceInfo.Member.allCases.map(\.rawValue)),
        ("DeviceList", DeviceListResponse.Member.allCases.map(\.rawValue)),
        ("ChallengeRequest", ChallengeRequest.Member.allCases.map(\.rawValue)),
        ("Challenge", ChallengeResponse.Member.allCases.map(\.rawValue)),
        ("DeviceLoginRequest", DeviceLoginRequest.Member.allCases.map(\.rawValue)),
        ("TransferAction", ApprovalAction.Member.allCases.map(\.rawValue)),
        ("CreateApprovalRequest", CreateApprovalRequest.Member.allCases.map(\.rawValue)),
        ("ApprovalChallenge", ApprovalChallengeResponse.Member.allCases.map(\.rawValue)),
        ("ConfirmApprovalRequest", ConfirmApprovalRequest.Member.allCases.map(\.rawValue)),
        ("ConfirmApprovalResponse", ConfirmApprovalResponse.Member.allCases.map(\.rawValue)),
        ("Approval", ApprovalResponse.Member.allCases.map(\.rawValue)),
        ("AuditEvent", AuditEvent.Member.allCases.map(\.rawValue)),
        ("AuditList", AuditListResponse.Member.allCases.map(\.rawValue)),
        ("Problem", Problem.Member.allCases.map(\.rawValue)),
        (
            "PasskeyRegistrationOptionsRequest",
            PasskeyRegistrationOptionsRequest.Member.allCases.map(\.rawValue)
        ),
        ("CredentialDescriptor", PasskeyCredentialDescriptor.Member.allCases.map(\.rawValue)),
        ("PasskeyCreationOptions", PasskeyCreationOptions.Member.allCases.map(\.rawValue)),
        ("RegistrationResponseJSON", PasskeyRegistration.Member.allCases.map(\.rawValue)),
        ("PasskeyRegistrationResult", PasskeyRegistrationResult.Member.allCases.map(\.rawValue)),
        ("PasskeyLoginOptionsRequest", PasskeyLoginOptionsRequest.Member.allCases.map(\.rawValue)),
        ("PasskeyRequestOptions", PasskeyRequestOptions.Member.allCases.map(\.rawValue)),
        ("AuthenticationResponseJSON", PasskeyAssertion.Member.allCases.map(\.rawValue)),
        ("PasskeyLoginResult", PasskeyLoginResult.Member.allCases.map(\.rawValue)),
        ("Passkey", PasskeyInfo.Member.allCases.map(\.rawValue)),
        ("PasskeyList", PasskeyListResponse.Member.allCases.map(\.rawValue)),
        ("AppAttestChallenge", AppAttestChallengeResponse.Member.allCases.map(\.rawValue)),
        ("AppAttestBinding", AppAttestBinding.Member.allCases.map(\.rawValue)),
        ("OAuthAuthorizeRequest", OAuthAuthorizeRequest.Member.allCases.map(\.rawValue)),
        ("OAuthAuthorizeResponse", OAuthAuthorizeResponse.Member.allCases.map(\.rawValue)),
    ])
    func messageMembers(schema: String, members: [String]) throws {
        #expect(try specMembers(schema) == members)
    }
}

extension JSONValue {
    /// The value of an object's member, nil for anything else.
    fileprivate func member(_ name: String) -> JSONValue? { OpenAPISpec.member(self, name) }
}

/// Each route KeyboundWire declares (``API``) is the operation docs/openapi.yaml documents: its
/// method and path, its success status, the schema of its request body and of its answer; and
/// the server serves every declared route and no undeclared API route.
@Suite("Route declarations and docs/openapi.yaml")
struct EndpointDeclarationTests {
    private static func reference(_ value: JSONValue?) -> String? {
        OpenAPISpec.string(OpenAPISpec.member(value ?? .null, "$ref")).map {
            String($0.split(separator: "/").last ?? "")
        }
    }

    private static func jsonSchema(_ holder: JSONValue?, mediaType: String) -> JSONValue? {
        OpenAPISpec.member(holder ?? .null, "content").flatMap { OpenAPISpec.member($0, mediaType) }.flatMap {
            OpenAPISpec.member($0, "schema")
        }
    }

    @Test(arguments: API.all.map { EndpointCase($0) })
    func declarationMatchesTheDocument(_ endpoint: EndpointCase) throws {
        let spec = OpenAPISpec.shared
        let paths = try #require(OpenAPISpec.member(spec.root, "paths"))
        let item = try #require(
            OpenAPISpec.member(paths, endpoint.template), "\(endpoint.template) not documented")
        let operation = try #require(
            OpenAPISpec.member(item, endpoint.method.lowercased()), "\(endpoint) not documented")
        let responses = try #require(OpenAPISpec.member(operation, "responses"))
        let success = try #require(
            OpenAPISpec.member(responses, String(endpoint.status)),
            "\(endpoint): no \(endpoint.status) documented")
        // The request body's schema.
        let body = OpenAPISpec.member(operation, "requestBody")
        #expect(
            Self.reference(Self.jsonSchema(body, mediaType: "application/json")) == endpoint.requestSchema,
            "\(endpoint)")
        // The answer's schema (none for a 204).
        #expect(
            Self.reference(Self.jsonSchema(success, mediaType: "application/json"))
                == endpoint.responseSchema,
            "\(endpoint)")
        // No other success status.
        guard case .object(let statuses) = responses else { throw TestFailure("responses is no object") }
        let successes = statuses.map(\.name).filter { $0.hasPrefix("2") }
        #expect(successes == [String(endpoint.status)], "\(endpoint): \(successes)")
    }

    @Test("the server routes every declared route, and the document every route the server has")
    func serverAndDocumentHaveTheDeclaredRoutes() throws {
        let declared = Set(API.all.map { "\($0.method.rawValue) \($0.template)" })
        let routed = Set(Application.routes.map { "\($0.method) \($0.pattern)" })
        #expect(declared.isSubset(of: routed), "\(declared.subtracting(routed))")
        let undeclared = routed.subtracting(declared).filter {
            $0.contains(" /v1/") || $0.hasSuffix(" /healthz")
        }
        #expect(undeclared.isEmpty, "\(undeclared)")
        let spec = OpenAPISpec.shared
        guard case .object(let paths)? = OpenAPISpec.member(spec.root, "paths") else {
            throw TestFailure("no paths")
        }
        var documented: Set<String> = []
        for path in paths {
            guard case .object(let operations) = path.value else { continue }
            for operation in operations
            where ["get", "post", "delete", "put", "patch"].contains(operation.name) {
                documented.insert("\(operation.name.uppercased()) \(path.name)")
            }
        }
        let documentedAPI = documented.filter { $0.contains(" /v1/") || $0.hasSuffix(" /healthz") }
        #expect(documentedAPI == declared, "\(documentedAPI.symmetricDifference(declared))")
        // The rest (the OAuth provider, the sign-in page, this document) is documented too.
        #expect(documented == routed, "\(documented.symmetricDifference(routed))")
    }
}

/// One declaration, as a test argument.
struct EndpointCase: Sendable, CustomTestStringConvertible, CustomStringConvertible {
    let method: String
    let template: String
    let status: Int
    let requestSchema: String?
    let responseSchema: String?

    init(_ endpoint: any EndpointDescription) {
        method = endpoint.method.rawValue
        template = endpoint.template
        status = endpoint.status
        requestSchema = endpoint.requestSchema
        responseSchema = endpoint.responseSchema
    }

    var description: String { "\(method) \(template)" }
    var testDescription: String { description }
}
