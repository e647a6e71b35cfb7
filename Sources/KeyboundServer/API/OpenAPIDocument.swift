/// The OpenAPI document served at `/openapi.yaml`.
public enum OpenAPIDocument {
    /// The text of docs/openapi.yaml, compiled in at build time.
    public static var yaml: String { text }
}
