import Foundation
import KeyboundCrypto
import Testing

@Suite("HKDF-SHA256 vectors")
struct HKDFVectorTests {
    struct Group: Decodable {
        let tests: [Case]
    }

    struct Case: Decodable {
        let tcId: Int
        let comment: String
        let ikm: Hex
        let salt: Hex
        let info: Hex
        let size: Int
        let okm: Hex
        let result: WycheproofResult
    }

    @Test("Wycheproof hkdf_sha256_test.json")
    func wycheproof() throws {
        let file = try Vectors.wycheproof("hkdf_sha256_test.json", groups: Group.self)
        var run = 0
        var refused = 0
        for test in file.testGroups.flatMap(\.tests) {
            run += 1
            let id = "tcId \(test.tcId) (\(test.comment), \(test.size) bytes)"
            switch test.result {
            case .valid:
                let okm = try HKDFSHA256.deriveKey(
                    inputKeyMaterial: test.ikm.data, salt: test.salt.data, info: test.info.data,
                    outputByteCount: test.size)
                #expect(okm == test.okm.data, "\(id): wrong output")
            case .invalid, .acceptable:
                refused += 1
                #expect(throws: CryptoError.invalidParameter, "\(id): not refused") {
                    try HKDFSHA256.deriveKey(
                        inputKeyMaterial: test.ikm.data, salt: test.salt.data, info: test.info.data,
                        outputByteCount: test.size)
                }
            }
        }
        #expect(run == file.numberOfTests)
        #expect(run == 86)
        #expect(refused == 3)
    }

    @Test("RFC 5869 appendix A.1-A.3 (pyca cryptography_vectors)")
    func rfc5869() throws {
        let records = try Vectors.records("rfc-5869-HKDF-SHA256.txt", firstKey: "COUNT")
        var run = 0
        for record in records {
            let count = try #require(record["COUNT"])
            #expect(record["Hash"] == "SHA-256", "COUNT \(count)")
            let length = try #require(record["L"].flatMap { Int($0) }, "COUNT \(count): no L")
            let okm = try HKDFSHA256.deriveKey(
                inputKeyMaterial: hex(record["IKM"] ?? "?"), salt: hex(record["salt"] ?? "?"),
                info: hex(record["info"] ?? "?"), outputByteCount: length)
            #expect(okm == (try hex(record["OKM"] ?? "?")), "COUNT \(count): wrong OKM")
            run += 1
        }
        #expect(run == 3)
    }
}
