import Foundation

/// The OpenAPI document served at `/openapi.yaml`.
public enum OpenAPIDocument {
    /// The text of docs/openapi.yaml, compiled in at build time.
    public static var yaml: String { text }

    /// `GET /openapi.yaml`.
    static var response: HTTPResponse {
        HTTPResponse(
            status: 200, headers: ["Content-Type": "application/yaml; charset=utf-8"], body: Data(yaml.utf8))
    }
}
