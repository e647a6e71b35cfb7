import Foundation
import Testing

@testable import Keybound

/// The rule every backend applies to the verifications it issued (the emulator, and
/// KeyboundApple's `LAContextBox`, which cannot run here).
@Suite struct VerificationRuleTests {
    let made = Date(timeIntervalSince1970: 1_800_000_000)

    func admits(reuse: TimeInterval, uses: Int, after seconds: TimeInterval) -> Bool {
        Verification.admits(
            verifiedAt: made, reuseDuration: reuse, previousUses: uses, now: made + seconds)
    }

    @Test func singleUseServesOnceWithinItsLifetime() {
        #expect(admits(reuse: 0, uses: 0, after: 0))
        #expect(admits(reuse: 0, uses: 0, after: Verification.singleUseLifetime))
        #expect(!admits(reuse: 0, uses: 0, after: Verification.singleUseLifetime + 0.001))
        #expect(!admits(reuse: 0, uses: 1, after: 1))
    }

    @Test func aReuseWindowServesAnyNumberOfUsesUntilItEnds() {
        #expect(admits(reuse: 300, uses: 0, after: 299))
        #expect(admits(reuse: 300, uses: 7, after: 300))
        #expect(!admits(reuse: 300, uses: 0, after: 300.001))
    }

    @Test func aClockSetBackAdmitsNothing() {
        #expect(!admits(reuse: 0, uses: 0, after: -1))
        #expect(!admits(reuse: 300, uses: 0, after: -0.001))
    }
}
