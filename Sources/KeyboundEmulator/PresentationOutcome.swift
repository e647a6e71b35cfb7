/// What the emulated user does at the next prompt attempt. Tests queue these with
/// ``EmulatedDevice/present(_:)``; a prompt with nothing queued ends as if the user cancelled.
public enum PresentationOutcome: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The enrolled face or finger matches.
    case match
    /// Someone else's face or finger: a failed match.
    case noMatch
    /// The user taps Cancel.
    case userCancel
    /// The user taps the fallback button ("Enter Password"). Touch ID shows it from the first
    /// failed match, Face ID and Optic ID only after two; a tap before then does nothing.
    case userFallback
    /// The system dismisses the prompt (a call, another app).
    case systemCancel
    /// The app dismisses the prompt.
    case appCancel
    /// The user types this device passcode: on the passcode screen, or behind the fallback
    /// button of a biometric prompt (which then needs it to be shown).
    case passcode(String)

    /// Parses the CLI spelling: `match`, `no-match`, `cancel`, `fallback`, `system-cancel`,
    /// `app-cancel`, `passcode:CODE`.
    public init?(cliName: String) {
        switch cliName {
        case "match": self = .match
        case "no-match": self = .noMatch
        case "cancel": self = .userCancel
        case "fallback": self = .userFallback
        case "system-cancel": self = .systemCancel
        case "app-cancel": self = .appCancel
        default:
            guard cliName.hasPrefix("passcode:") else { return nil }
            self = .passcode(String(cliName.dropFirst("passcode:".count)))
        }
    }

    /// The CLI spelling, with a passcode masked: `no-match`, `passcode:******`.
    public var description: String {
        switch self {
        case .match: "match"
        case .noMatch: "no-match"
        case .userCancel: "cancel"
        case .userFallback: "fallback"
        case .systemCancel: "system-cancel"
        case .appCancel: "app-cancel"
        case .passcode: "passcode:******"
        }
    }
}
