enum OpenAPIDocument { static let yaml = "" }
