import Foundation
import KeyboundCrypto
import Testing

@Suite("AES-256-GCM behaviour")
struct AESGCMTests {
    let key = SecureRandom.bytes(AES256GCM.keyByteCount)
    let plaintext = Data("refresh-token-0123456789".utf8)
    let aad = Data("item:session".utf8)

    @Test func combinedRoundTrip() throws {
        let box = try AES256GCM.seal(plaintext, key: key, authenticating: aad)
        #expect(box.count == AES256GCM.nonceByteCount + plaintext.count + AES256GCM.tagByteCount)
        #expect(try AES256GCM.open(box, key: key, authenticating: aad) == plaintext)
        // A fresh nonce each time.
        let again = try AES256GCM.seal(plaintext, key: key, authenticating: aad)
        #expect(again.prefix(AES256GCM.nonceByteCount) != box.prefix(AES256GCM.nonceByteCount))
        // Empty plaintext and empty associated data.
        let empty = try AES256GCM.seal(Data(), key: key)
        #expect(empty.count == AES256GCM.nonceByteCount + AES256GCM.tagByteCount)
        #expect(try AES256GCM.open(empty, key: key) == Data())
    }

    @Test func explicitNonceMatchesComponentForm() throws {
        let nonce = SecureRandom.bytes(AES256GCM.nonceByteCount)
        let box = try AES256GCM.seal(plaintext, key: key, nonce: nonce, authenticating: aad)
        let parts = try AES256GCM.seal(plaintext, key: key, nonce: nonce, aad: aad)
        #expect(box == nonce + parts.ciphertext + parts.tag)
        #expect(
            try AES256GCM.open(ciphertext: parts.ciphertext, tag: parts.tag, key: key, nonce: nonce, aad: aad)
                == plaintext)
    }

    @Test func longNoncesInTheComponentForm() throws {
        for count in [13, 16, 64, 128] {
            let nonce = SecureRandom.bytes(count)
            let parts = try AES256GCM.seal(plaintext, key: key, nonce: nonce, aad: aad)
            #expect(
                try AES256GCM.open(
                    ciphertext: parts.ciphertext, tag: parts.tag, key: key, nonce: nonce, aad: aad)
                    == plaintext, "nonce of \(count) bytes")
        }
    }

    @Test func slicesAreHandledAtTheirOwnOffsets() throws {
        let padding = Data(repeating: 0xAA, count: 5)
        let box = try AES256GCM.seal(plaintext, key: key, authenticating: aad)
        let slicedBox = (padding + box).dropFirst(padding.count)
        let slicedKey = (padding + key).dropFirst(padding.count)
        let slicedAAD = (padding + aad).dropFirst(padding.count)
        #expect(try AES256GCM.open(slicedBox, key: slicedKey, authenticating: slicedAAD) == plaintext)
    }

    @Test func tamperingIsAnAuthenticationFailure() throws {
        let box = try AES256GCM.seal(plaintext, key: key, authenticating: aad)
        let nonceCount = AES256GCM.nonceByteCount
        for index in [
            0, nonceCount, nonceCount + plaintext.count / 2, box.count - AES256GCM.tagByteCount,
            box.count - 1,
        ] {
            var tampered = box
            tampered[tampered.startIndex + index] ^= 0x01
            #expect(throws: CryptoError.authenticationFailure, "byte \(index) changed") {
                try AES256GCM.open(tampered, key: key, authenticating: aad)
            }
        }
        #expect(throws: CryptoError.authenticationFailure, "other aad") {
            try AES256GCM.open(box, key: key, authenticating: Data("item:other".utf8))
        }
        #expect(throws: CryptoError.authenticationFailure, "aad dropped") {
            try AES256GCM.open(box, key: key)
        }
        #expect(throws: CryptoError.authenticationFailure, "other key") {
            try AES256GCM.open(box, key: SecureRandom.bytes(32), authenticating: aad)
        }
        #expect(throws: CryptoError.authenticationFailure, "truncated ciphertext") {
            try AES256GCM.open(
                box.prefix(nonceCount) + box.dropFirst(nonceCount + 1), key: key, authenticating: aad)
        }
    }

    @Test func wrongSizesAreRefused() throws {
        for count in [0, 16, 24, 31, 33, 64] {
            let wrongKey = Data(count: count)
            #expect(throws: CryptoError.invalidParameter, "key of \(count) bytes") {
                try AES256GCM.seal(plaintext, key: wrongKey)
            }
            #expect(throws: CryptoError.invalidParameter, "key of \(count) bytes") {
                try AES256GCM.open(Data(count: 40), key: wrongKey)
            }
        }
        for count in [0, 8, 11, 129, 257] {
            #expect(throws: CryptoError.invalidParameter, "nonce of \(count) bytes") {
                try AES256GCM.seal(plaintext, key: key, nonce: Data(count: count), aad: aad)
            }
        }
        // The combined form has no room to say how long the nonce is: 12 bytes only.
        #expect(throws: CryptoError.invalidParameter) {
            try AES256GCM.seal(plaintext, key: key, nonce: Data(count: 16), authenticating: aad)
        }
        let parts = try AES256GCM.seal(plaintext, key: key, nonce: Data(count: 12), aad: aad)
        for count in [0, 12, 15, 17] {
            #expect(throws: CryptoError.invalidParameter, "tag of \(count) bytes") {
                try AES256GCM.open(
                    ciphertext: parts.ciphertext,
                    tag: parts.tag.prefix(count) + Data(count: max(0, count - 16)),
                    key: key, nonce: Data(count: 12), aad: aad)
            }
        }
        #expect(throws: CryptoError.invalidParameter, "shorter than nonce + tag") {
            try AES256GCM.open(Data(count: 27), key: key)
        }
    }
}
