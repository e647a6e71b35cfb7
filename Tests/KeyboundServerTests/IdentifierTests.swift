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
