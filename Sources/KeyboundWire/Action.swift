/// A positive decimal amount as a string, validated by a strict grammar and never converted to
/// floating point: `0|[1-9][0-9]{0,29}` optionally followed by `.` and 1–18 digits, not zero.
public struct DecimalAmount: Sendable, Hashable, CustomStringConvertible {
    /// The amount exactly as given (`"0.5"`, `"1200"`).
    public let text: String

    /// Validates an amount such as `"0.5"` or `"1200"`.
    /// - Throws: ``WireError`` (`invalid_request`) when `text` is outside the grammar or zero.
    public init(_ text: String) throws(WireFailure) {
        let bytes = Array(text.utf8)
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        func digits(_ part: ArraySlice<UInt8>) -> Bool { part.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        let whole = parts[0]
        var valid = !whole.isEmpty && whole.count <= 30 && digits(whole)
        if valid, whole.count > 1, whole.first == UInt8(ascii: "0") { valid = false }
        if valid, parts.count == 2 {
            let fraction = parts[1]
            valid = !fraction.isEmpty && fraction.count <= 18 && digits(fraction)
        }
        guard valid else { throw WireError(.invalidRequest, "amount must be a decimal string like \"0.5\"") }
        guard bytes.contains(where: { $0 >= 0x31 && $0 <= 0x39 }) else {
            throw WireError(.invalidRequest, "amount must be greater than zero")
        }
        self.text = text
    }

    /// The amount exactly as given.
    public var description: String { text }
}

/// The action a user approves. Its members appear in the signing payload in a fixed order.
public enum ApprovalAction: Sendable, Hashable {
    /// Send `amount` of `asset` to `to`.
    case transfer(TransferAction)

    /// The JSON member names of an action object, in the order they are written (and signed).
    package enum Member: String, MemberName { case type, amount, asset, to }

    /// The action types, as the `type` member names them.
    private enum Kind: String { case transfer }

    /// The action type name on the wire.
    public var type: String {
        switch self {
        case .transfer: Kind.transfer.rawValue
        }
    }

    /// The action as a JSON object: `{"type":"transfer","amount":…,"asset":…,"to":…}`.
    package var json: JSONValue {
        var object = JSONObjectBuilder<Member>()
        object.add(.type, type)
        switch self {
        case .transfer(let transfer):
            object.add(.amount, transfer.amount.text)
            object.add(.asset, transfer.asset)
            object.add(.to, transfer.to)
        }
        return object.value
    }

    /// Reads an action object strictly.
    /// - Throws: ``WireError`` for unknown members, a wrong type or an unknown action type.
    package init(json: JSONValue, path: String = "action") throws(WireFailure) {
        let reader = try JSONReader<Member>(json, path: path)
        switch Kind(rawValue: try reader.string(.type)) {
        case .transfer:
            self = .transfer(
                try TransferAction(
                    amount: DecimalAmount(reader.string(.amount)), asset: reader.string(.asset),
                    to: reader.string(.to)))
        case nil: throw WireError(.invalidRequest, "unknown action type")
        }
    }
}

/// A transfer of an amount of an asset to a recipient.
public struct TransferAction: Sendable, Hashable {
    /// How much, as an exact decimal string.
    public let amount: DecimalAmount
    /// The asset code: 1–16 of `A-Z 0-9`.
    public let asset: String
    /// The recipient: 1–128 of `A-Z a-z 0-9 . _ : -` (addresses, account numbers, names).
    public let to: String

    /// Validates a transfer; the recipient is kept exactly as given, so it is shown in full.
    /// - Throws: ``WireError`` when the asset or the recipient is outside its grammar.
    public init(amount: DecimalAmount, asset: String, to: String) throws(WireFailure) {
        let assetOK =
            (1...16).contains(asset.utf8.count)
            && asset.utf8.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) }
        guard assetOK else { throw WireError(.invalidRequest, "asset must be 1-16 of A-Z and 0-9") }
        guard Grammar.isPlainName(to) else {
            throw WireError(.invalidRequest, "to must be 1-128 of A-Z a-z 0-9 . _ : -")
        }
        self.amount = amount
        self.asset = asset
        self.to = to
    }
}

/// RFC 9396 authorization details naming one transfer: what a CIBA request asks to approve, and
/// what its tokens then carry: `[{"type":"keybound_transfer","amount":…,"asset":…,"recipient":…}]`,
/// the transfer action with its `to` named `recipient`.
package enum TransferAuthorizationDetails {
    /// The authorization detail type (RFC 9396 §2).
    package static let type = "keybound_transfer"

    /// The members of the one detail, in the order they are written.
    package enum Member: String, MemberName { case type, amount, asset, recipient }

    /// Reads the details strictly: an array of exactly one `keybound_transfer` with no other
    /// members, in the transfer grammar.
    /// - Throws: ``WireError`` saying what is wrong.
    package static func action(from json: JSONValue) throws(WireFailure) -> ApprovalAction {
        guard case .array(let details) = json else {
            throw WireError(.invalidRequest, "authorization_details must be a JSON array")
        }
        guard details.count == 1, let detail = details.first else {
            throw WireError(.invalidRequest, "authorization_details must hold exactly one \(type)")
        }
        guard case .object = detail, detail[member: Member.type.rawValue]?.stringValue == type else {
            throw WireError(.invalidRequest, "the only authorization detail type is \(type)")
        }
        let reader = try JSONReader<Member>(detail, path: "authorization_details[0]")
        return .transfer(
            try TransferAction(
                amount: DecimalAmount(reader.string(.amount)), asset: reader.string(.asset),
                to: reader.string(.recipient)))
    }

    /// The details of `action`, as approved.
    package static func json(_ action: ApprovalAction) -> JSONValue {
        var object = JSONObjectBuilder<Member>()
        object.add(.type, type)
        switch action {
        case .transfer(let transfer):
            object.add(.amount, transfer.amount.text)
            object.add(.asset, transfer.asset)
            object.add(.recipient, transfer.to)
        }
        return .array([object.value])
    }
}
