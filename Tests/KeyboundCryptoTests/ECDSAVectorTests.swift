import Foundation
import KeyboundCrypto
import Testing

/// Wycheproof ECDSA P-256/SHA-256 and NIST CAVP SigVer.
///
/// Decision on Wycheproof's `acceptable` verdict: KeyboundCrypto is strict (DER only, no
/// alternative encodings), so an `acceptable` case must not verify. The files at the pinned commit
/// hold no such case; the count is asserted so a new file that adds some is noticed.
@Suite("ECDSA P-256 vectors")
struct ECDSAVectorTests {
    struct Group: Decodable {
        struct PublicKey: Decodable {
            let curve: String
            let uncompressed: Hex
        }
        let publicKey: PublicKey
        let publicKeyDer: Hex
        let sha: String
        let tests: [Case]
    }

    struct Case: Decodable {
        let tcId: Int
        let comment: String
        let msg: Hex
        let sig: Hex
        let result: WycheproofResult
    }

    struct Tally {
        var run = 0
        var verified = 0
        var refusedEncoding = 0
        var rejectedByVerify = 0
        var acceptable = 0
    }

    @Test("Wycheproof ecdsa_secp256r1_sha256_test.json (DER signatures)")
    func wycheproofDER() throws {
        let file = try Vectors.wycheproof("ecdsa_secp256r1_sha256_test.json", groups: Group.self)
        var tally = Tally()
        for group in file.testGroups {
            #expect(group.publicKey.curve == "secp256r1" && group.sha == "SHA-256")
            let key = try P256PublicKey(spkiDER: group.publicKeyDer.data)
            #expect(key.x963Representation == group.publicKey.uncompressed.data)
            #expect(key.spkiDER == group.publicKeyDer.data)
            for test in group.tests {
                let signature = try? P256Signature(derRepresentation: test.sig.data)
                if let signature {
                    // Strict parsing means exactly one encoding: re-encoding gives the input back.
                    #expect(
                        signature.derRepresentation == test.sig.data, "tcId \(test.tcId): DER not canonical")
                }
                check(test.tcId, test.comment, test.result, signature, key, test.msg.data, &tally)
            }
        }
        #expect(tally.run == file.numberOfTests)
        #expect(tally.run == 484)
        #expect(tally.verified == 174)
        #expect(tally.refusedEncoding == 235)  // Not strict DER, or integers wider than 32 bytes.
        #expect(tally.rejectedByVerify == 75)
        #expect(tally.acceptable == 0)
    }

    @Test("Wycheproof ecdsa_secp256r1_sha256_p1363_test.json (raw r||s signatures)")
    func wycheproofP1363() throws {
        let file = try Vectors.wycheproof("ecdsa_secp256r1_sha256_p1363_test.json", groups: Group.self)
        var tally = Tally()
        for group in file.testGroups {
            let key = try P256PublicKey(x963Representation: group.publicKey.uncompressed.data)
            #expect(key.spkiDER == group.publicKeyDer.data)
            for test in group.tests {
                let signature = try? P256Signature(rawRepresentation: test.sig.data)
                if let signature {
                    let reparsed = try? P256Signature(derRepresentation: signature.derRepresentation)
                    #expect(reparsed == signature, "tcId \(test.tcId): raw -> DER -> raw differs")
                }
                check(test.tcId, test.comment, test.result, signature, key, test.msg.data, &tally)
            }
        }
        #expect(tally.run == file.numberOfTests)
        #expect(tally.run == 262)
        #expect(tally.verified == 173)
        #expect(tally.refusedEncoding == 21)  // Not 64 bytes.
        #expect(tally.rejectedByVerify == 68)
        #expect(tally.acceptable == 0)
    }

    /// One Wycheproof case: `signature` is `nil` when parsing refused it.
    private func check(
        _ tcId: Int, _ comment: String, _ result: WycheproofResult, _ signature: P256Signature?,
        _ key: P256PublicKey, _ message: Data, _ tally: inout Tally
    ) {
        tally.run += 1
        let verified = signature.map { key.isValidSignature($0, for: message) } ?? false
        switch (signature, verified) {
        case (nil, _): tally.refusedEncoding += 1
        case (_, true): tally.verified += 1
        case (_, false): tally.rejectedByVerify += 1
        }
        switch result {
        case .valid:
            #expect(verified, "tcId \(tcId) (\(comment)): valid signature did not verify")
        case .invalid:
            #expect(!verified, "tcId \(tcId) (\(comment)): invalid signature verified")
        case .acceptable:
            tally.acceptable += 1
            #expect(!verified, "tcId \(tcId) (\(comment)): acceptable case verified; the policy is strict")
        }
    }

    @Test("NIST CAVP SigVer [P-256,SHA-256]")
    func cavpSigVer() throws {
        let records = try Vectors.records("SigVer-P256-SHA256.rsp", firstKey: "Msg")
        var run = 0
        var passed = 0
        for (index, record) in records.enumerated() {
            let count = index + 1
            let fields = try ["Msg", "Qx", "Qy", "R", "S", "Result"].map { name in
                try #require(record[name], "case \(count): no \(name)")
            }
            let (msg, qx, qy, r, s, result) = (
                fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]
            )
            let expected = try #require(result.first, "case \(count): empty Result")
            let message = try hex(msg)
            run += 1
            // CAVP omits leading zeros; each coordinate and integer is 32 bytes here.
            let point = try Data([0x04]) + leftPadded(hex(qx)) + leftPadded(hex(qy))
            let key = try? P256PublicKey(x963Representation: point)
            let signature = try? P256Signature(rawRepresentation: leftPadded(hex(r)) + leftPadded(hex(s)))
            let verified =
                if let key, let signature { key.isValidSignature(signature, for: message) } else { false }
            if expected == "P" {
                passed += 1
                #expect(key != nil && signature != nil, "case \(count): key or signature refused")
                #expect(verified, "case \(count) (\(result)): did not verify")
            } else {
                #expect(expected == "F", "case \(count): unknown Result \(result)")
                #expect(!verified, "case \(count) (\(result)): verified")
            }
        }
        #expect(run == 15)
        #expect(passed == 3)
    }

    private func leftPadded(_ bytes: Data) -> Data {
        Data(repeating: 0, count: max(0, 32 - bytes.count)) + bytes
    }
}
