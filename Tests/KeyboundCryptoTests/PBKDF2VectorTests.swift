import Foundation
import KeyboundCrypto
import Testing

@Suite("PBKDF2-HMAC-SHA256 vectors")
struct PBKDF2VectorTests {
    struct Group: Decodable {
        let tests: [Case]
    }

    struct Case: Decodable {
        let tcId: Int
        let comment: String
        let password: Hex
        let salt: Hex
        let iterationCount: Int
        let dkLen: Int
        let dk: Hex
        let result: WycheproofResult
    }

    @Test("Wycheproof pbkdf2_hmacsha256_test.json (RFC 7914 and pseudorandom cases)")
    func wycheproof() throws {
        let file = try Vectors.wycheproof("pbkdf2_hmacsha256_test.json", groups: Group.self)
        var run = 0
        for test in file.testGroups.flatMap(\.tests) {
            run += 1
            #expect(test.result == .valid, "tcId \(test.tcId): only valid cases are expected in this file")
            let dk = try PBKDF2SHA256.deriveKey(
                password: test.password.data, salt: test.salt.data, iterations: test.iterationCount,
                outputByteCount: test.dkLen)
            #expect(
                dk == test.dk.data, "tcId \(test.tcId) (\(test.comment), \(test.iterationCount) iterations)")
        }
        #expect(run == file.numberOfTests)
        #expect(run == 60)
    }

    @Test func parametersOutsideTheRangesAreRefused() {
        for (iterations, length) in [(0, 32), (-1, 32), (Int(UInt32.max) + 1, 32), (1, 0), (1, 1025)] {
            #expect(throws: CryptoError.invalidParameter, "\(iterations) iterations, \(length) bytes") {
                try PBKDF2SHA256.deriveKey(
                    password: Data("p".utf8), salt: Data("s".utf8), iterations: iterations,
                    outputByteCount: length)
            }
        }
    }
}
