import Foundation
import KeyboundCrypto
import KeyboundWire
import Testing

@Suite("SHA-256, HKDF, random bytes, constant-time comparison, errors")
struct PrimitivesTests {
    @Test func sha256KnownAnswers() throws {
        // FIPS 180-2 appendix B and the empty message.
        #expect(
            Digest.sha256(Data())
                == (try hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")))
        #expect(
            Digest.sha256(Data("abc".utf8))
                == (try hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")))
        #expect(
            Digest.sha256(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == (try hex("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")))
        let million = Data(repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(
            Digest.sha256(million)
                == (try hex("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")))
        #expect(Digest.sha256(Data("xabc".utf8).dropFirst()) == Digest.sha256(Data("abc".utf8)))
    }

    @Test func hkdfOutputLimits() throws {
        let ikm = Data(repeating: 0x0B, count: 22)
        for count in [0, -1, 8161] {
            #expect(throws: CryptoError.invalidParameter, "\(count) bytes") {
                try HKDFSHA256.deriveKey(
                    inputKeyMaterial: ikm, salt: Data(), info: Data(), outputByteCount: count)
            }
        }
        let longest = try HKDFSHA256.deriveKey(
            inputKeyMaterial: ikm, salt: Data(), info: Data(), outputByteCount: 8160)
        #expect(longest.count == 8160)
        let one = try HKDFSHA256.deriveKey(
            inputKeyMaterial: ikm, salt: Data(), info: Data(), outputByteCount: 1)
        #expect(one == longest.prefix(1))
        // Empty input key material is allowed (RFC 5869 does not forbid it) and deterministic.
        let empty = try HKDFSHA256.deriveKey(
            inputKeyMaterial: Data(), salt: Data(), info: Data("x".utf8), outputByteCount: 32)
        #expect(
            empty
                == (try HKDFSHA256.deriveKey(
                    inputKeyMaterial: Data(), salt: Data(), info: Data("x".utf8), outputByteCount: 32)))
        #expect(
            empty
                != (try HKDFSHA256.deriveKey(
                    inputKeyMaterial: Data(), salt: Data(), info: Data("y".utf8), outputByteCount: 32)))
    }

    @Test func randomBytes() {
        for count in [0, 1, 12, 32, 1000] {
            #expect(SecureRandom.bytes(count).count == count)
        }
        #expect(SecureRandom.bytes(-5).isEmpty)
        let samples = (0..<64).map { _ in SecureRandom.bytes(32) }
        #expect(Set(samples).count == samples.count)
        #expect(!samples.contains(Data(count: 32)))
    }

    @Test func constantTimeEquals() {
        let a = Data("token-123456".utf8)
        #expect(ConstantTime.equals(a, Data("token-123456".utf8)))
        #expect(ConstantTime.equals(Data(), Data()))
        #expect(!ConstantTime.equals(a, Data("token-123457".utf8)))  // Last byte.
        #expect(!ConstantTime.equals(a, Data("Token-123456".utf8)))  // First byte.
        #expect(!ConstantTime.equals(a, a.dropLast()))  // Prefix: different length.
        #expect(!ConstantTime.equals(a, a + Data([0])))
        #expect(!ConstantTime.equals(Data(), Data([0])))
        #expect(ConstantTime.equals((Data([9]) + a).dropFirst(), a))  // Slices compare by content.
    }

    @Test func errorsCompareByKindAndDescribeThemselves() {
        #expect(CryptoError.invalidKey == CryptoError.invalidKey)
        #expect(CryptoError.invalidKey != CryptoError.invalidParameter)
        #expect(CryptoError.backend("a") == CryptoError.backend("b"))
        #expect(CryptoError.authenticationFailure.description == "CryptoError.authenticationFailure")
        #expect(CryptoError.backend("EVP_x failed").description == "CryptoError.backend(EVP_x failed)")
        #expect(CryptoError.invalidKey.detail == nil)
        do {
            _ = try AES256GCM.seal(Data(), key: Data(count: 16))
            Issue.record("a 16-byte key was accepted")
        } catch let error as CryptoError {
            #expect(error == .invalidParameter)
            #expect(error.description.contains("16"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
