import Foundation

extension CBOR {
    /// Decodes the one CBOR item that fills `data`, strictly.
    ///
    /// This input comes from anyone, so the decoder accepts only: definite lengths; the shortest
    /// form of every integer and length; map keys that are integers or text, each at most once;
    /// valid UTF-8 text; `true`, `false`, `null`; nesting up to ``maximumDepth``. Every length is
    /// checked against the bytes that remain before anything is allocated, so the work is linear
    /// in the input and bounded by it.
    ///
    /// Map keys may come in any order. CTAP2 asks authenticators for its canonical order, but not
    /// every authenticator in use follows it, and the order carries no meaning: a duplicate key is
    /// what could make two readers see different values, and that stays refused.
    ///
    /// - Parameter data: Exactly one encoded item.
    /// - Throws: ``WebAuthnError/malformedCBOR`` for anything else, including trailing bytes.
    public init(decoding data: Data) throws {
        var reader = CBORReader(bytes: [UInt8](data))
        let item = try reader.readItem()
        guard reader.isAtEnd else {
            throw WebAuthnError.malformedCBOR.with("\(data.count - reader.offset) bytes after the item")
        }
        self = item
    }
}

/// Reads CBOR items one after another from a byte buffer; see ``CBOR/init(decoding:)`` for the
/// rules. Authenticator data uses it directly: its COSE key and extensions are CBOR items embedded
/// in a binary structure, found by decoding them.
struct CBORReader {
    let bytes: [UInt8]
    /// Where the next item starts.
    private(set) var offset: Int

    init(bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var isAtEnd: Bool { offset == bytes.count }

    private var remaining: Int { bytes.count - offset }

    /// The next item, which may be followed by more bytes.
    mutating func readItem() throws -> CBOR {
        try item(depth: 0)
    }

    private func failure(_ detail: String) -> WebAuthnError {
        WebAuthnError.malformedCBOR.with("at byte \(offset): \(detail)")
    }

    private mutating func item(depth: Int) throws -> CBOR {
        guard offset < bytes.count else { throw failure("truncated") }
        let initial = bytes[offset]
        let major = initial >> 5
        let info = initial & 0x1F
        if major == 7 {
            offset += 1
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            default: throw failure("simple value or float \(info) is not used by WebAuthn")
            }
        }
        if major == 6 { throw failure("tags are not used by WebAuthn") }
        let argument = try head()
        switch major {
        case 0: return .unsigned(argument)
        case 1: return .negative(argument)
        case 2: return .bytes(Data(try take(argument)))
        case 3:
            let utf8 = try take(argument)
            let text = String(decoding: utf8, as: UTF8.self)
            // Decoding replaces invalid sequences, so a round trip that changes the bytes means
            // the text was not valid UTF-8.
            guard text.utf8.elementsEqual(utf8) else { throw failure("text is not valid UTF-8") }
            return .text(text)
        case 4:
            guard depth < CBOR.maximumDepth else { throw failure("nested too deeply") }
            // Each item takes at least one byte: a count above what remains is a lie, refused
            // before anything is reserved.
            guard argument <= UInt64(remaining) else { throw failure("array longer than the input") }
            var items: [CBOR] = []
            items.reserveCapacity(Int(argument))
            for _ in 0..<argument { items.append(try item(depth: depth + 1)) }
            return .array(items)
        default:  // 5, the only major type left.
            guard depth < CBOR.maximumDepth else { throw failure("nested too deeply") }
            guard argument <= UInt64(remaining / 2) else { throw failure("map longer than the input") }
            var pairs: [(CBOR, CBOR)] = []
            pairs.reserveCapacity(Int(argument))
            // Keys are integers or text in their shortest encoding, so equal keys have equal bytes.
            var seenKeys = Set<ArraySlice<UInt8>>()
            for _ in 0..<argument {
                let keyStart = offset
                let key = try item(depth: depth + 1)
                switch key {
                case .unsigned, .negative, .text: break
                default: throw failure("map keys must be integers or text")
                }
                guard seenKeys.insert(bytes[keyStart..<offset]).inserted else {
                    throw failure("duplicate map key")
                }
                pairs.append((key, try item(depth: depth + 1)))
            }
            return .map(pairs)
        }
    }

    /// Reads the initial byte's argument (major types 0 to 5), refusing reserved values,
    /// indefinite lengths and any argument not in its shortest form.
    private mutating func head() throws -> UInt64 {
        let info = bytes[offset] & 0x1F
        offset += 1
        let width: Int
        switch info {
        case 0..<24: return UInt64(info)
        case 24: width = 1
        case 25: width = 2
        case 26: width = 4
        case 27: width = 8
        case 31: throw failure("indefinite lengths are not allowed")
        default: throw failure("reserved additional information \(info)")
        }
        var value: UInt64 = 0
        for byte in try take(UInt64(width)) { value = value << 8 | UInt64(byte) }
        let smallest: UInt64 = width == 1 ? 24 : 1 << (4 * UInt64(width))
        guard value >= smallest else { throw failure("not the shortest encoding") }
        return value
    }

    /// The next `count` bytes, if that many remain.
    private mutating func take(_ count: UInt64) throws -> ArraySlice<UInt8> {
        guard count <= UInt64(remaining) else { throw failure("truncated: \(count) bytes announced") }
        let start = offset
        offset += Int(count)
        return bytes[start..<offset]
    }
}
