import Foundation

// JOSE as Keybound speaks it: compact JWS (RFC 7515), P-256 public keys as JWKs (RFC 7517,
// RFC 7518 §6.2) and their thumbprints' input (RFC 7638). Only formats live here; signing and
// verifying are KeyboundCrypto's (the server's `TokenSigner`, KeyboundVerifier). Keybound signs
// and accepts one algorithm, ES256, and never takes the algorithm from the token alone.

extension JSONValue {
    /// The value of an object's member named `name`; nil for another value or a missing member.
    package subscript(member name: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.name == name }?.value
    }

    /// The string, or nil for another value.
    package var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The number as a whole number, or nil for another value (or a fraction, or out of range).
    package var integerValue: Int64? {
        if case .number(let text) = self { return Int64(text) }
        return nil
    }
}

/// A P-256 public key as a JSON Web Key: `{"kty":"EC","crv":"P-256","x":…,"y":…}`, with an
/// optional `kid`, `alg` and `use`.
package struct ECPublicJWK: Sendable, Hashable {
    /// The X coordinate, 32 bytes big-endian.
    package let x: Data
    /// The Y coordinate, 32 bytes big-endian.
    package let y: Data
    /// The key id.
    package var kid: String?
    /// The algorithm the key is for (`ES256`).
    package var alg: String?
    /// What the key is for (`sig`).
    package var use: String?

    /// The key from its uncompressed point `04 || X || Y` (65 bytes).
    /// - Throws: ``WireError`` for another length or prefix.
    package init(x963 point: Data, kid: String? = nil, alg: String? = nil, use: String? = nil)
        throws(WireFailure)
    {
        let bytes = [UInt8](point)
        guard bytes.count == 65, bytes[0] == 0x04 else {
            throw WireError(.invalidRequest, "a P-256 point is 65 bytes starting 04")
        }
        x = Data(bytes[1...32])
        y = Data(bytes[33...64])
        self.kid = kid
        self.alg = alg
        self.use = use
    }

    /// The key of a DER SubjectPublicKeyInfo of a P-256 point (91 bytes, as the devices send it).
    /// - Throws: ``WireError`` for anything else.
    package init(spki: Data) throws(WireFailure) {
        let header = Data([
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A,
            0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ])
        guard spki.count == header.count + 65, spki.starts(with: header) else {
            throw WireError(.invalidRequest, "not the SubjectPublicKeyInfo of a P-256 point")
        }
        try self.init(x963: spki.dropFirst(header.count))
    }

    /// Reads a JWK. Members this type does not know are ignored (RFC 7517 §4); the ones it knows
    /// must hold what they say.
    /// - Throws: ``WireError`` for a key that is not a P-256 public key (a private one included:
    ///   `d` must not be there).
    package init(json: JSONValue) throws(WireFailure) {
        guard case .object = json else { throw WireError(.invalidRequest, "a JWK is a JSON object") }
        guard json[member: "kty"]?.stringValue == "EC", json[member: "crv"]?.stringValue == "P-256" else {
            throw WireError(.invalidRequest, "only EC P-256 keys (kty EC, crv P-256) are accepted")
        }
        guard json[member: "d"] == nil else { throw WireError(.invalidRequest, "a public JWK has no d") }
        guard let x = json[member: "x"]?.stringValue.flatMap(Base64URL.decode), x.count == 32,
            let y = json[member: "y"]?.stringValue.flatMap(Base64URL.decode), y.count == 32
        else { throw WireError(.invalidRequest, "x and y are 32 bytes each, base64url") }
        self.x = x
        self.y = y
        for (name, value) in [
            ("kid", json[member: "kid"]), ("alg", json[member: "alg"]), ("use", json[member: "use"]),
        ]
        where value != nil && value?.stringValue == nil {
            throw WireError(.invalidRequest, "\(name) is a string")
        }
        kid = json[member: "kid"]?.stringValue
        alg = json[member: "alg"]?.stringValue
        use = json[member: "use"]?.stringValue
    }

    /// The uncompressed point `04 || X || Y`.
    package var x963: Data { Data([0x04]) + x + y }

    /// The JWK, its members in the order `kty, crv, x, y, kid, alg, use`.
    package var json: JSONValue {
        var members = [
            JSONMember("kty", .string("EC")), JSONMember("crv", .string("P-256")),
            JSONMember("x", .string(Base64URL.encode(x))), JSONMember("y", .string(Base64URL.encode(y))),
        ]
        for (name, value) in [("kid", kid), ("alg", alg), ("use", use)] {
            if let value { members.append(JSONMember(name, .string(value))) }
        }
        return .object(members)
    }

    /// What RFC 7638 hashes for the key's thumbprint: the required members only, in
    /// lexicographic order, without whitespace.
    package var thumbprintInput: Data {
        JSON.serialize(
            .object([
                JSONMember("crv", .string("P-256")), JSONMember("kty", .string("EC")),
                JSONMember("x", .string(Base64URL.encode(x))), JSONMember("y", .string(Base64URL.encode(y))),
            ]))
    }
}

/// A JWK Set (RFC 7517 §5): `{"keys": [...]}`. Keys of other types (RSA, other curves) are passed
/// over, as the RFC allows; a malformed EC P-256 key is refused.
package struct JWKSet: Sendable, Hashable {
    /// The P-256 keys.
    package let keys: [ECPublicJWK]

    /// - Parameter keys: the keys, in order.
    package init(keys: [ECPublicJWK]) { self.keys = keys }

    /// Reads a JWK Set.
    /// - Throws: ``WireError`` when it is not `{"keys": [...]}` or a P-256 key in it is malformed.
    package init(json: JSONValue) throws(WireFailure) {
        guard case .array(let items)? = json[member: "keys"] else {
            throw WireError(.invalidRequest, "a JWK Set is {\"keys\": [...]}")
        }
        var keys: [ECPublicJWK] = []
        for item in items
        where item[member: "kty"]?.stringValue == "EC" && item[member: "crv"]?.stringValue == "P-256" {
            keys.append(try ECPublicJWK(json: item))
        }
        self.keys = keys
    }

    /// The key with id `kid`.
    package func key(id kid: String) -> ECPublicJWK? { keys.first { $0.kid == kid } }

    /// `{"keys": [...]}`.
    package var json: JSONValue { .object([JSONMember("keys", .array(keys.map(\.json)))]) }
}

/// A JWS in compact serialization (RFC 7515 §7.1): `BASE64URL(header).BASE64URL(payload).BASE64URL(signature)`.
package struct CompactJWS: Sendable {
    /// The protected header, a JSON object.
    package let header: JSONValue
    /// The payload bytes.
    package let payload: Data
    /// The signature bytes (for ES256: `r || s`, 64 bytes).
    package let signature: Data
    /// What the signature covers: the ASCII of the first two segments with their dot.
    package let signingInput: Data

    /// The longest token read: far above any JWT Keybound or its clients make.
    package static let maximumLength = 16 * 1024

    /// Parses a compact JWS. Checks only the form: three segments of unpadded base64url, a header
    /// that is a JSON object. What the header says is the caller's to check, above all `alg`.
    /// - Throws: ``WireError`` for anything else.
    package init(_ text: String) throws(WireFailure) {
        guard text.utf8.count <= Self.maximumLength else {
            throw WireError(.invalidRequest, "the token is too long")
        }
        // Split on the bytes: splitting the String by Characters cost more than the rest of a
        // DPoP proof's checks but the signature.
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(Substring(parts[0]))),
            let payload = Base64URL.decode(String(Substring(parts[1]))),
            let signature = Base64URL.decode(String(Substring(parts[2])))
        else { throw WireError(.invalidRequest, "not a compact JWS: three base64url segments") }
        let header = try JSON.parse(headerBytes)
        guard case .object = header else {
            throw WireError(.invalidRequest, "the JWS header is a JSON object")
        }
        self.header = header
        self.payload = payload
        self.signature = signature
        signingInput = Data(text.utf8[parts[0].startIndex..<parts[1].endIndex])
    }

    /// The header's `alg`.
    package var algorithm: String? { header[member: "alg"]?.stringValue }
    /// The header's `kid`.
    package var keyID: String? { header[member: "kid"]?.stringValue }
    /// The header's `typ`.
    package var type: String? { header[member: "typ"]?.stringValue }

    /// The payload as a JSON object (a JWT's claims).
    /// - Throws: ``WireError`` when it is not one.
    package func claims() throws(WireFailure) -> JSONValue {
        let claims = try JSON.parse(payload)
        guard case .object = claims else {
            throw WireError(.invalidRequest, "the JWT claims are a JSON object")
        }
        return claims
    }

    /// Serializes a JWS, signing its signing input with `sign`.
    /// - Parameters:
    ///   - header: the protected header (a JSON object).
    ///   - payload: the payload bytes.
    ///   - sign: makes the signature of the signing input (for ES256, `r || s`).
    package static func serialize(header: JSONValue, payload: Data, sign: (Data) throws -> Data) rethrows
        -> String
    {
        let input = Base64URL.encode(JSON.serialize(header)) + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(try sign(Data(input.utf8)))
    }
}
