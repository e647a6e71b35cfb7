/// Messages that carry a password or a token never show it when printed, dumped or logged.
public protocol SecretBearing: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The message's name and its non-secret members.
    var redactedFields: KeyValuePairs<String, String> { get }
}

extension SecretBearing {
    /// The type's name and its ``redactedFields``, then `secrets: <redacted>`:
    /// `PasswordLoginRequest(username: ada, clientID: phone-1, secrets: <redacted>)`.
    public var description: String {
        let fields = redactedFields.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        return "\(type(of: self))(\(fields.isEmpty ? "" : fields + ", ")secrets: <redacted>)"
    }

    /// The same as ``description``: `debugPrint` shows no secret either.
    public var debugDescription: String { description }

    /// Only the ``redactedFields``, so `dump` and debuggers show no secret.
    public var customMirror: Mirror {
        Mirror(self, children: redactedFields.map { (label: Optional($0.key), value: $0.value as Any) })
    }
}

extension CreateAccountRequest: SecretBearing {
    /// The username; the password is a secret.
    public var redactedFields: KeyValuePairs<String, String> { ["username": username] }
}

extension PasswordLoginRequest: SecretBearing {
    /// The username and the client id; the password is a secret.
    public var redactedFields: KeyValuePairs<String, String> { ["username": username, "clientID": clientID] }
}

extension RefreshRequest: SecretBearing {
    /// Nothing: the refresh token is the only member, and a secret.
    public var redactedFields: KeyValuePairs<String, String> { [:] }
}

extension TokenResponse: SecretBearing {
    /// The session and user ids; both tokens are secrets.
    public var redactedFields: KeyValuePairs<String, String> { ["sessionID": sessionID, "userID": userID] }
}
