import Foundation
import KeyboundServer
import KeyboundWire

/// Checks responses against docs/openapi.yaml: the status is documented for the operation, the
/// media type matches, and the JSON body validates against the schema (types, required members,
/// no undocumented members, enums, patterns, nullability).
///
/// The document is read with ``YAMLSubset``.
final class OpenAPISpec: Sendable {
    static let shared = OpenAPISpec()

    let root: JSONValue
    let loadError: String?

    static var documentURL: URL { Repository.file("docs/openapi.yaml") }

    private init() {
        do {
            root = try YAMLSubset.parse(String(contentsOf: Self.documentURL, encoding: .utf8))
            loadError = nil
        } catch {
            root = .null
            loadError = "cannot load docs/openapi.yaml: \(error)"
        }
    }

    static func member(_ value: JSONValue, _ name: String) -> JSONValue? {
        guard case .object(let members) = value else { return nil }
        return members.first { $0.name == name }?.value
    }

    static func string(_ value: JSONValue?) -> String? {
        if case .string(let text)? = value { return text }
        return nil
    }

    /// The path templates of the document.
    var pathTemplates: [String] {
        guard let paths = Self.member(root, "paths"), case .object(let members) = paths else { return [] }
        return members.map(\.name)
    }

    private func template(for path: String) -> String? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return pathTemplates.first { template in
            let parts = template.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == segments.count else { return false }
            return zip(parts, segments).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
        }
    }

    func operation(method: String, path: String) -> JSONValue? {
        guard let template = template(for: path), let paths = Self.member(root, "paths"),
            let item = Self.member(paths, template)
        else { return nil }
        return Self.member(item, method.lowercased())
    }

    func check(method: String, path: String, reply: Reply) -> [String] {
        if let loadError { return [loadError] }
        guard let operation = operation(method: method, path: path) else {
            return ["operation not in the spec"]
        }
        guard let responses = Self.member(operation, "responses"),
            let response = Self.member(responses, String(reply.status)) ?? Self.member(responses, "default")
        else { return ["status \(reply.status) not documented"] }
        let resolvedResponse = resolve(response)
        let mediaType = reply.header("content-type")?.split(separator: ";").first.map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard let content = Self.member(resolvedResponse, "content") else {
            return reply.body.isEmpty ? [] : ["a body where the spec has none"]
        }
        guard let mediaType, let media = Self.member(content, mediaType) else {
            return ["media type \(mediaType ?? "none") not documented"]
        }
        guard let schema = Self.member(media, "schema") else { return [] }
        guard mediaType.hasSuffix("json") else { return [] }
        do {
            let body = try JSON.parse(reply.body)
            var problems: [String] = []
            validate(body, schema, at: "body", problems: &problems)
            return problems
        } catch {
            return ["body is not JSON: \(error)"]
        }
    }

    func resolve(_ value: JSONValue) -> JSONValue {
        guard let reference = Self.string(Self.member(value, "$ref")), reference.hasPrefix("#/") else {
            return value
        }
        var current = root
        for part in reference.dropFirst(2).split(separator: "/") {
            guard let next = Self.member(current, String(part)) else { return .null }
            current = next
        }
        return resolve(current)
    }

    func validate(_ value: JSONValue, _ rawSchema: JSONValue, at path: String, problems: inout [String]) {
        let schema = resolve(rawSchema)
        if let options = Self.member(schema, "oneOf"), case .array(let list) = options {
            let matching = list.filter { option in
                var inner: [String] = []
                validate(value, option, at: path, problems: &inner)
                return inner.isEmpty
            }
            if matching.count != 1 { problems.append("\(path): matches \(matching.count) of oneOf") }
            return
        }
        var types: [String] = []
        switch Self.member(schema, "type") {
        case .string(let type)?: types = [type]
        case .array(let list)?: types = list.compactMap { Self.string($0) }
        default: break
        }
        let actual: String
        switch value {
        case .null: actual = "null"
        case .bool: actual = "boolean"
        case .number(let text): actual = Int(text) != nil ? "integer" : "number"
        case .string: actual = "string"
        case .array: actual = "array"
        case .object: actual = "object"
        }
        if !types.isEmpty, !types.contains(actual), !(actual == "integer" && types.contains("number")) {
            problems.append("\(path): \(actual) where the spec says \(types)")
            return
        }
        if let constant = Self.member(schema, "const"), constant != value {
            problems.append("\(path): not the constant")
        }
        if let options = Self.member(schema, "enum"), case .array(let list) = options, !list.contains(value) {
            problems.append("\(path): value not in enum")
        }
        if case .string(let text) = value, let pattern = Self.string(Self.member(schema, "pattern")) {
            if text.range(of: pattern, options: .regularExpression) == nil {
                problems.append("\(path): \"\(text)\" does not match \(pattern)")
            }
        }
        if case .array(let items) = value, let itemSchema = Self.member(schema, "items") {
            for (index, item) in items.enumerated() {
                validate(item, itemSchema, at: "\(path)[\(index)]", problems: &problems)
            }
        }
        if case .object(let members) = value {
            let properties = Self.member(schema, "properties")
            if case .array(let required)? = Self.member(schema, "required") {
                for name in required.compactMap({ Self.string($0) })
                where !members.contains(where: { $0.name == name }) {
                    problems.append("\(path): missing required \(name)")
                }
            }
            for member in members {
                if let propertySchema = properties.flatMap({ Self.member($0, member.name) }) {
                    validate(member.value, propertySchema, at: "\(path).\(member.name)", problems: &problems)
                } else if Self.member(schema, "additionalProperties") == .bool(false) {
                    problems.append("\(path): undocumented member \(member.name)")
                }
            }
        }
    }
}
