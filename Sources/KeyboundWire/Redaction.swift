/// Messages that carry a password or a token never show it when printed, dumped or logged.
public protocol SecretBearing: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The message's name and its non-secret members.
    var redactedFields: KeyValuePairs<String, String> { get }
}

extension SecretBearing {
    public var description: String {
        let fields = redactedFields.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        return "\(type(of: self))(\(fields.isEmpty ? "" : fields + ", ")secrets: <redacted>)"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: redactedFields.map { (label: Optional($0.key), value: $0.value as Any) })
    }
}

extension CreateAccountRequest: SecretBearing {
    public var redactedFields: KeyValuePairs<String, String> { ["username": username] }
}

extension PasswordLoginRequest: SecretBearing {
    public var redactedFields: KeyValuePairs<String, String> { ["username": username, "clientID": clientID] }
}

extension RefreshRequest: SecretBearing {
    public var redactedFields: KeyValuePairs<String, String> { [:] }
}

extension TokenResponse: SecretBearing {
    public var redactedFields: KeyValuePairs<String, String> { ["sessionID": sessionID, "userID": userID] }
}
