import Testing

@testable import KeyboundServer

/// Session and audit event ids sort by their creation time, so that each login appends to the
/// end of their indexes; they still follow the ids' grammar.
struct IdentifierTests {
    @Test func timeOrderedIdentifiersSortByTimeAndKeepTheGrammar() {
        let times: [Int64] = [
            0, 1, 63, 64, 4095, 4096, 1_700_000_000_000, 1_700_000_000_001, 1_764_547_200_000,
            4_398_046_511_103,  // 2^42 - 1: the last millisecond that 7 characters hold (2109)
        ]
        let ids = times.map { SecureRandomBytes.timeOrderedIdentifier("ses", milliseconds: $0) }
        // Bytewise, as SQLite compares text.
        for (earlier, later) in zip(ids, ids.dropFirst()) {
            #expect(Array(earlier.utf8).lexicographicallyPrecedes(Array(later.utf8)), "\(earlier) < \(later)")
        }
        for id in ids {
            #expect(id.utf8.count == 26)
            #expect(id.hasPrefix("ses_"))
            #expect(
                id.dropFirst(4).allSatisfy {
                    $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_")
                })
        }
        // The same millisecond: the random part tells them apart.
        let now: Int64 = 1_764_547_200_000
        let same = Set(
            (0..<100).map { _ in SecureRandomBytes.timeOrderedIdentifier("evt", milliseconds: now) })
        #expect(same.count == 100)
    }
}

/// A token is stored and looked up under the lower-case hex of SHA-256 of its UTF-8: the hashes
/// already in users' databases must keep matching.
struct TokenHashTests {
    @Test func theHashIsLowerCaseHexOfSHA256OfTheToken() {
        // FIPS 180-2, appendix B.1 ("abc") and the empty message.
        #expect(TokenHash.of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(TokenHash.of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        // A token as the server issues them (43 base64url characters), taken from a substring so
        // that its UTF-8 is not the literal's own storage.
        let token = String("xrBKQ3nZ8sC0_mWvT-4yE1uGq7dLhJ9aPfN2kRtY6oU!".dropLast())
        #expect(TokenHash.of(token) == TokenHash.of("xrBKQ3nZ8sC0_mWvT-4yE1uGq7dLhJ9aPfN2kRtY6oU"))
        #expect(TokenHash.of(token).utf8.count == 64)
    }
}
