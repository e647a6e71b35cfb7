import Foundation

/// The exact bytes a device signs: compact UTF-8 JSON made by the server, members in this order:
///
/// ```
/// {"keybound":1,"purpose":"login"|"approve","server":<server id>,"device":<device id>,
///  "challenge":<base64url of 32 random bytes>,"expires":<RFC 3339>[,"action":{…}]}
/// ```
///
/// The server builds it with ``bytes`` and keeps those bytes; the device parses the same bytes
/// with ``init(parsing:)`` to check purpose, server and device and to show the action before
/// signing. Only the canonical encoding parses, so what is shown is exactly what is signed.
public struct SigningPayload: Sendable, Hashable {
    /// Why the device signs.
    public enum Purpose: String, Sendable, Hashable {
        /// Device-key login.
        case login
        /// Approval of an action.
        case approve
    }

    /// The JSON member names in the signing order; `action` only for `approve`.
    package enum Member: String, MemberName {
        case keybound, purpose, server, device, challenge, expires, action
    }

    /// The payload format version (always 1).
    public static let version = 1
    /// The length of the random challenge.
    public static let challengeLength = 32

    /// Why the device signs.
    public let purpose: Purpose
    /// The id of the server that issued the payload.
    public let server: String
    /// The id of the device that is asked to sign.
    public let device: String
    /// 32 random bytes.
    public let challenge: Data
    /// When the payload stops being accepted (whole seconds, UTC).
    public let expires: Date
    /// The action being approved: present for `approve`, absent for `login`.
    public let action: ApprovalAction?

    /// A payload to issue (the server's side); `expires` is truncated to whole seconds.
    /// - Throws: ``WireError`` when the challenge is not 32 bytes, when `action` does not match
    ///   the purpose, or when server or device is empty.
    public init(
        purpose: Purpose, server: String, device: String, challenge: Data, expires: Date,
        action: ApprovalAction?
    ) throws(WireFailure) {
        guard challenge.count == Self.challengeLength else {
            throw WireError(.invalidRequest, "challenge must be 32 bytes")
        }
        guard (action != nil) == (purpose == .approve) else {
            throw WireError(.invalidRequest, "an action is required for approve and forbidden for login")
        }
        guard !server.isEmpty, !device.isEmpty else {
            throw WireError(.invalidRequest, "server and device are required")
        }
        self.purpose = purpose
        self.server = server
        self.device = device
        self.challenge = challenge
        self.expires = Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.down))
        self.action = action
    }

    /// The canonical bytes, assembled member by member (never through a key-ordering encoder).
    public var bytes: Data {
        var object = JSONObjectBuilder<Member>()
        object.add(.keybound, Self.version)
        object.add(.purpose, purpose)
        object.add(.server, server)
        object.add(.device, device)
        object.add(.challenge, challenge)
        object.add(.expires, expires)
        if let action { object.add(.action, action.json) }
        return JSON.serialize(object.value)
    }

    /// Parses payload bytes and accepts them only if they are exactly the canonical encoding.
    /// - Throws: ``WireError`` for anything else: other member order, extra whitespace, unknown
    ///   members, another version, a challenge that is not 32 bytes, a malformed action.
    public init(parsing data: Data) throws(WireFailure) {
        let value = try JSON.parse(data)
        guard case .object(let members) = value else {
            throw WireError(.invalidRequest, "payload is not an object")
        }
        let names = members.map(\.name)
        let order = Member.allCases.map(\.rawValue)
        guard names == order || names == Array(order.dropLast()) else {
            throw WireError(.invalidRequest, "payload members are not in the signing order")
        }
        let reader = try JSONReader<Member>(value)
        guard try reader.integer(.keybound) == Self.version else {
            throw WireError(.invalidRequest, "unsupported payload version")
        }
        let action: ApprovalAction? =
            reader.has(.action) ? try ApprovalAction(json: reader.value(.action)) : nil
        try self.init(
            purpose: reader.enumeration(.purpose, as: Purpose.self), server: reader.string(.server),
            device: reader.string(.device), challenge: reader.bytes(.challenge),
            expires: reader.timestamp(.expires), action: action)
        guard bytes == data else { throw WireError(.invalidRequest, "payload is not in canonical form") }
    }
}
