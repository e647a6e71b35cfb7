import Foundation
import KeyboundCrypto
import Testing

@Suite("P-256 keys and signatures")
struct P256Tests {
    static let generatorX = "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296"
    static let generatorY = "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5"
    /// p - Gy: the y of -G = (n - 1)·G.
    static let negatedGeneratorY = "b01cbd1c01e58065711814b583f061e9d431cca994cea1313449bf97c840ae0a"
    static let order = "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551"
    static let spkiHeader = "3059301306072a8648ce3d020106082a8648ce3d030107034200"

    let message = Data("Send 0.5 ETH to 0x12ef".utf8)

    @Test func signAndVerifyRoundTrip() throws {
        let key = try P256SigningKey()
        let signature = try key.signature(for: message)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(signature.rawRepresentation.count == 64)
        #expect((8...72).contains(signature.derRepresentation.count))
        #expect(try P256Signature(derRepresentation: signature.derRepresentation) == signature)
        #expect(try P256Signature(rawRepresentation: signature.rawRepresentation) == signature)
        // ECDSA draws a fresh nonce per signature; both verify.
        let second = try key.signature(for: message)
        #expect(second != signature)
        #expect(key.publicKey.isValidSignature(second, for: message))
        #expect(key.publicKey.isValidSignature(try key.signature(for: Data()), for: Data()))
    }

    @Test func signatureFailsForChangedMessageOrOtherKey() throws {
        let key = try P256SigningKey()
        let other = try P256SigningKey()
        let signature = try key.signature(for: message)
        var changed = message
        changed[changed.startIndex] ^= 0x01
        #expect(!key.publicKey.isValidSignature(signature, for: changed))
        #expect(!key.publicKey.isValidSignature(signature, for: message + Data([0])))
        #expect(!other.publicKey.isValidSignature(signature, for: message))
        #expect(other.publicKey != key.publicKey)
        // A changed byte of the signature itself.
        var raw = signature.rawRepresentation
        raw[raw.startIndex + 40] ^= 0x80
        #expect(!key.publicKey.isValidSignature(try P256Signature(rawRepresentation: raw), for: message))
    }

    @Test func outOfRangeSignaturesNeverVerify() throws {
        let key = try P256SigningKey()
        let signature = try key.signature(for: message)
        let r = signature.rawRepresentation.prefix(32)
        let s = signature.rawRepresentation.suffix(32)
        let zero = Data(count: 32)
        let n = try hex(Self.order)
        for raw in [zero + s, r + zero, n + s, r + n, Data(repeating: 0xFF, count: 64)] {
            let candidate = try P256Signature(rawRepresentation: raw)
            #expect(!key.publicKey.isValidSignature(candidate, for: message), "\(raw.hex)")
        }
    }

    @Test func spkiRoundTripAndKnownEncoding() throws {
        let key = try P256SigningKey()
        let spki = key.publicKey.spkiDER
        #expect(spki.count == 91)
        #expect(spki.prefix(26) == (try hex(Self.spkiHeader)))
        let parsed = try P256PublicKey(spkiDER: spki)
        #expect(parsed == key.publicKey)
        #expect(parsed.hashValue == key.publicKey.hashValue)
        #expect(parsed.x963Representation == key.publicKey.x963Representation)
        #expect(try P256PublicKey(x963Representation: parsed.x963Representation) == parsed)
        // A key from OpenSSL (`openssl ec -pubout -outform DER`) parses and verifies its own
        // representation, sliced out of a larger buffer.
        let openSSL = try hex(
            "3059301306072a8648ce3d020106082a8648ce3d03010703420004877e826b7bf43442d417a00c868ccea191d3e05d571dd55fdb4c3abed789b109450dbd8a774ad7ba10758cfbfe4bf80129d5cf2aefd8b9aa41d4363ff6c0b1ba"
        )
        let sliced = (Data([1, 2, 3]) + openSSL).dropFirst(3)
        #expect(try P256PublicKey(spkiDER: sliced).spkiDER == openSSL)
    }

    @Test(arguments: [
        // P-384 (secp384r1) SubjectPublicKeyInfo.
        "3076301006072a8648ce3d020106052b810400220362000425ec60031583e79a0e11a5d91ee5f39e374792ad3bf662886da99678b0f3c365818ec93986f602327fce45144a812d70779a555d67607d8a5e04d4a2bb39a54b457e48e1d0aa2d401dbf346a0bf7f4dd072583d87a4f95de14f6f977ffab4ba4",
        // RSA-1024.
        "30819f300d06092a864886f70d010101050003818d0030818902818100e0795368575289efaff2b79e0201b41cb162eed19a30a49a7aa06ae03b8186113a3c2baa0a93f8300233a9d9c1dce4a4d137d4eb85ac114a514ed58a4663b9d68b3087d33f6a4212b76dc8fcd4d8b43416b153e2026b268c9b0a3ea3551550ded0f59ebc6ebdf4a80d4895be2ba77f44aada0b9d83d34d0d3f1941e4d6be4b790203010001",
        // Ed25519.
        "302a300506032b657003210087c0aac56d535997c20a9c834d809a6b11fce72bb9b86ced80eb2181ca466891",
        // P-256 with a compressed point.
        "3039301306072a8648ce3d020106082a8648ce3d03010703220002877e826b7bf43442d417a00c868ccea191d3e05d571dd55fdb4c3abed789b109",
        // P-256 with explicit curve parameters instead of the named curve.
        "3082014b3082010306072a8648ce3d02013081f7020101302c06072a8648ce3d0101022100ffffffff00000001000000000000000000000000ffffffffffffffffffffffff305b0420ffffffff00000001000000000000000000000000fffffffffffffffffffffffc04205ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b031500c49d360886e704936a6678e1139d26b7819f7e900441046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5022100ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc63255102010103420004877e826b7bf43442d417a00c868ccea191d3e05d571dd55fdb4c3abed789b109450dbd8a774ad7ba10758cfbfe4bf80129d5cf2aefd8b9aa41d4363ff6c0b1ba",
        // Garbage, and nothing.
        "00112233445566778899", "",
    ])
    func spkiRefusesOtherKeysAndEncodings(_ spki: String) throws {
        #expect(throws: CryptoError.invalidKey) { try P256PublicKey(spkiDER: hex(spki)) }
    }

    @Test func spkiRefusesDamagedP256() throws {
        let spki = try P256SigningKey().publicKey.spkiDER
        var offCurve = spki
        offCurve[offCurve.endIndex - 1] ^= 0x01
        let longForm = Data([0x30, 0x81, 0x59]) + spki.dropFirst(2)  // BER: a long-form length.
        let damaged: [Data] = [
            spki.dropLast(),  // Truncated.
            spki.dropLast(40),
            spki + Data([0]),  // Trailing byte.
            offCurve,
            longForm,
            try hex(Self.spkiHeader) + Data([0x04]) + Data(count: 64),  // (0, 0) is not on the curve.
        ]
        for (index, bytes) in damaged.enumerated() {
            #expect(throws: CryptoError.invalidKey, "case \(index)") { try P256PublicKey(spkiDER: bytes) }
        }
    }

    @Test func x963RefusesBadPoints() throws {
        let point = try P256SigningKey().publicKey.x963Representation
        var wrongPrefix = point
        wrongPrefix[wrongPrefix.startIndex] = 0x02
        // X = p (not below the field prime) with G's y.
        let xEqualsP = try hex(
            "04ffffffff00000001000000000000000000000000ffffffffffffffffffffffff" + Self.generatorY)
        for bytes in [Data(), Data([0x00]), point.dropLast(), point + Data([0]), wrongPrefix, xEqualsP] {
            #expect(throws: CryptoError.invalidKey, "\(bytes.hex)") {
                try P256PublicKey(x963Representation: bytes)
            }
        }
    }

    @Test func rawScalarRoundTripAndKnownPoints() throws {
        let key = try P256SigningKey()
        let raw = key.rawRepresentation
        #expect(raw.count == 32)
        let restored = try P256SigningKey(rawRepresentation: raw)
        #expect(restored.rawRepresentation == raw)
        #expect(restored.publicKey == key.publicKey)
        #expect(key.publicKey.isValidSignature(try restored.signature(for: message), for: message))

        // d = 1 gives the generator G; d = n - 1 gives -G.
        let one = Data(count: 31) + Data([1])
        #expect(
            try P256SigningKey(rawRepresentation: one).publicKey.x963Representation
                == hex("04" + Self.generatorX + Self.generatorY))
        var nMinusOne = try hex(Self.order)
        nMinusOne[nMinusOne.endIndex - 1] -= 1
        #expect(
            try P256SigningKey(rawRepresentation: nMinusOne).publicKey.x963Representation
                == hex("04" + Self.generatorX + Self.negatedGeneratorY))
        #expect(try P256SigningKey(rawRepresentation: nMinusOne).rawRepresentation == nMinusOne)
    }

    @Test func rawScalarRefusesZeroOrderAndWrongLengths() throws {
        let n = try hex(Self.order)
        var nPlusOne = n
        nPlusOne[nPlusOne.endIndex - 1] += 1
        let refused: [Data] = [
            Data(count: 32), n, nPlusOne, Data(repeating: 0xFF, count: 32),
            Data(count: 31) + Data([1]) + Data([0]),  // 33 bytes.
            Data(repeating: 1, count: 31), Data(),
        ]
        for scalar in refused {
            #expect(throws: CryptoError.invalidKey, "\(scalar.hex)") {
                try P256SigningKey(rawRepresentation: scalar)
            }
        }
    }

    @Test func privateKeyIsNeverPrinted() throws {
        let key = try P256SigningKey()
        let secret = key.rawRepresentation.hex
        var dumped = ""
        dump(key, to: &dumped)
        for text in [String(describing: key), String(reflecting: key), "\(key)", dumped] {
            #expect(!text.contains(secret))
            #expect(text.contains("redacted") || text.contains("P256SigningKey"))
        }
    }

    @Test func strictDERRefusals() throws {
        let valid = try P256SigningKey().signature(for: message).derRepresentation
        let bytes = [UInt8](valid)
        let refused: [[UInt8]] = [
            [],
            bytes + [0],  // Trailing byte.
            [0x30, 0x81, bytes[1]] + bytes[2...],  // Long-form length where short form fits.
            [0x30, 0x80] + bytes[2...] + [0, 0],  // Indefinite length.
            [0x31] + bytes[1...],  // SET, not SEQUENCE.
            [0x30, 0x06, 0x02, 0x01, 0x80, 0x02, 0x01, 0x01],  // Negative r.
            [0x30, 0x07, 0x02, 0x02, 0x00, 0x01, 0x02, 0x01, 0x01],  // Zero-padded r.
            [0x30, 0x03, 0x02, 0x01, 0x01],  // Only r.
            [0x30, 0x05, 0x02, 0x00, 0x02, 0x01, 0x01],  // Empty integer.
            // r >= 2^256: wider than 32 bytes.
            [0x30, 0x26, 0x02, 0x21, 0x01] + [UInt8](repeating: 0, count: 32) + [0x02, 0x01, 0x01],
        ]
        for der in refused {
            #expect(throws: CryptoError.invalidSignatureEncoding, "\(Data(der).hex)") {
                try P256Signature(derRepresentation: Data(der))
            }
        }
        for count in [0, 63, 65] {
            #expect(throws: CryptoError.invalidSignatureEncoding) {
                try P256Signature(rawRepresentation: Data(count: count))
            }
        }
        // Small integers keep their minimal encoding.
        let small = try P256Signature(
            derRepresentation: Data([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x7F]))
        #expect(small.rawRepresentation == Data(count: 31) + Data([1]) + Data(count: 31) + Data([0x7F]))
        #expect(small.derRepresentation == Data([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x7F]))
    }

    @Test func verifyConcurrentlyWithOneKey() async throws {
        let key = try P256SigningKey()
        let publicKey = key.publicKey
        let good = try key.signature(for: message)
        let bad = try key.signature(for: Data("other".utf8))
        let message = message
        let results = await withTaskGroup(of: (Bool, Bool).self) { group in
            for _ in 0..<16 {
                group.addTask {
                    var allGood = true
                    var anyBad = false
                    for _ in 0..<25 {
                        allGood = allGood && publicKey.isValidSignature(good, for: message)
                        anyBad = anyBad || publicKey.isValidSignature(bad, for: message)
                    }
                    return (allGood, anyBad)
                }
            }
            return await group.reduce(into: [(Bool, Bool)]()) { $0.append($1) }
        }
        #expect(results.count == 16)
        #expect(results.allSatisfy { $0.0 && !$0.1 })
    }
}
