/// Messages that carry a password or a token never show it when printed, dumped or logged.
package protocol SecretBearing: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The message's name and its non-secret members.
    var redactedFields: KeyValuePairs<String, String> { get }
}

extension SecretBearing {
    package var description: String {
        let fields = redactedFields.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        return "\(type(of: self))(\(fields.isEmpty ? "" : fields + ", ")secrets: <redacted>)"
    }

    package var debugDescription: String { description }

    package var customMirror: Mirror {
        Mirror(self, children: redactedFields.map { (label: Optional($0.key), value: $0.value as Any) })
    }
}

extension CreateAccountRequest: SecretBearing {
    package var redactedFields: KeyValuePairs<String, String> { ["username": username.rawValue] }
}

extension PasswordLoginRequest: SecretBearing {
    package var redactedFields: KeyValuePairs<String, String> {
        ["username": username.rawValue, "clientID": clientID.rawValue]
    }
}

extension RefreshRequest: SecretBearing {
    package var redactedFields: KeyValuePairs<String, String> { [:] }
}

extension TokenResponse: SecretBearing {
    package var redactedFields: KeyValuePairs<String, String> { ["sessionID": sessionID, "userID": userID] }
}
