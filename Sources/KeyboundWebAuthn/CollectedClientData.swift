import Foundation
import KeyboundWire

/// The client data (WebAuthn §5.8.1) a browser or platform signed over, parsed from
/// `clientDataJSON`.
///
/// Parsed as JSON and read member by member, never compared to a template: browsers add members
/// (Chromium sometimes adds `other_keys_can_be_added_here`, the W3C vectors `extraData`), and the
/// order of members is not fixed. Members other than these five are ignored.
public struct CollectedClientData: Sendable, Hashable {
    /// `webauthn.create` or `webauthn.get`.
    public let type: String
    /// The challenge, base64url as the client wrote it.
    public let challenge: String
    /// The origin of the page that ran the ceremony, e.g. `https://example.org`.
    public let origin: String
    /// Whether the ceremony ran in an iframe not same-origin with its ancestors; absent is false.
    public let crossOrigin: Bool
    /// The top-level origin, when the ceremony ran in such an iframe.
    public let topOrigin: String?

    /// Parses `clientDataJSON`.
    ///
    /// - Parameter json: The bytes exactly as the client sent them; a leading UTF-8 byte order
    ///   mark is skipped, as WebAuthn's "UTF-8 decode" does.
    /// - Throws: ``WebAuthnError/malformedClientData`` unless the bytes are one JSON object with
    ///   string `type`, `challenge` and `origin`, boolean `crossOrigin` if present, and string
    ///   `topOrigin` if present.
    public init(json: Data) throws {
        var bytes = json
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        let value: JSONValue
        do {
            value = try JSON.parse(Data(bytes))
        } catch {
            throw WebAuthnError.malformedClientData.with("not JSON: \(error)")
        }
        guard case .object(let members) = value else {
            throw WebAuthnError.malformedClientData.with("not a JSON object")
        }
        func member(_ name: String) -> JSONValue? { members.first { $0.name == name }?.value }
        func string(_ name: String) throws -> String {
            guard case .string(let text)? = member(name) else {
                throw WebAuthnError.malformedClientData.with("\"\(name)\" must be a string")
            }
            return text
        }
        type = try string("type")
        challenge = try string("challenge")
        origin = try string("origin")
        switch member("crossOrigin") {
        case nil: crossOrigin = false
        case .bool(let flag)?: crossOrigin = flag
        default: throw WebAuthnError.malformedClientData.with("\"crossOrigin\" must be a boolean")
        }
        topOrigin = member("topOrigin") == nil ? nil : try string("topOrigin")
    }

    /// The challenge as bytes, for finding the one the relying party issued; `nil` if it is not
    /// strict base64url.
    public var challengeBytes: Data? { Base64URL.decode(challenge) }
}
