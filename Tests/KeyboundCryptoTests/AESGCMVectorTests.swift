import Foundation
import KeyboundCrypto
import Testing

/// Wycheproof AES-GCM. Only AES-256 with 12...128-byte nonces and 16-byte tags is supported; every
/// other case must be refused with `invalidParameter`, and is counted.
@Suite("AES-GCM vectors")
struct AESGCMVectorTests {
    struct Group: Decodable {
        let keySize: Int
        let ivSize: Int
        let tagSize: Int
        let tests: [Case]
    }

    struct Case: Decodable {
        let tcId: Int
        let comment: String
        let key: Hex
        let iv: Hex
        let aad: Hex
        let msg: Hex
        let ct: Hex
        let tag: Hex
        let result: WycheproofResult
    }

    @Test("Wycheproof aes_gcm_test.json")
    func wycheproof() throws {
        let file = try Vectors.wycheproof("aes_gcm_test.json", groups: Group.self)
        var total = 0
        var refusedKeySize = 0
        var refusedNonceSize = 0
        var refusedTagSize = 0
        var checked = 0
        var checkedInvalid = 0
        for group in file.testGroups {
            for test in group.tests {
                total += 1
                let (key, nonce, aad) = (test.key.data, test.iv.data, test.aad.data)
                let id =
                    "tcId \(test.tcId) (\(test.comment), key \(group.keySize), nonce \(group.ivSize) bits)"
                let refusal: CryptoError? =
                    if key.count != AES256GCM.keyByteCount {
                        .invalidParameter
                    } else if !(12...128).contains(nonce.count)
                        || test.tag.data.count != AES256GCM.tagByteCount
                    {
                        .invalidParameter
                    } else { nil }
                if let refusal {
                    if key.count != AES256GCM.keyByteCount {
                        refusedKeySize += 1
                    } else if test.tag.data.count != AES256GCM.tagByteCount {
                        refusedTagSize += 1
                    } else {
                        refusedNonceSize += 1
                    }
                    #expect(throws: refusal, "\(id): seal not refused") {
                        try AES256GCM.seal(test.msg.data, key: key, nonce: nonce, aad: aad)
                    }
                    #expect(throws: refusal, "\(id): open not refused") {
                        try AES256GCM.open(
                            ciphertext: test.ct.data, tag: test.tag.data, key: key, nonce: nonce, aad: aad)
                    }
                    continue
                }
                checked += 1
                switch test.result {
                case .valid:
                    let opened = try AES256GCM.open(
                        ciphertext: test.ct.data, tag: test.tag.data, key: key, nonce: nonce, aad: aad)
                    #expect(opened == test.msg.data, "\(id): wrong plaintext")
                    let sealed = try AES256GCM.seal(test.msg.data, key: key, nonce: nonce, aad: aad)
                    #expect(sealed.ciphertext == test.ct.data, "\(id): wrong ciphertext")
                    #expect(sealed.tag == test.tag.data, "\(id): wrong tag")
                    if nonce.count == AES256GCM.nonceByteCount {
                        let combined = nonce + test.ct.data + test.tag.data
                        #expect(
                            try AES256GCM.open(combined, key: key, authenticating: aad) == test.msg.data,
                            "\(id): combined form")
                    }
                case .invalid, .acceptable:
                    checkedInvalid += 1
                    #expect(throws: CryptoError.authenticationFailure, "\(id): invalid case opened") {
                        try AES256GCM.open(
                            ciphertext: test.ct.data, tag: test.tag.data, key: key, nonce: nonce, aad: aad)
                    }
                }
            }
        }
        #expect(total == file.numberOfTests)
        #expect(total == 316)
        #expect(refusedKeySize == 211)  // AES-128 and AES-192.
        #expect(refusedNonceSize == 15)  // AES-256: 14 nonces under 12 bytes (2 empty), 1 of 257 bytes.
        #expect(refusedTagSize == 0)
        #expect(checked == 90)
        #expect(checkedInvalid == 27)
    }
}
