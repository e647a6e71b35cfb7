#if canImport(CryptoKit)
    import Foundation

    enum ConstantTimeBackend {
        /// `a` and `b` are non-empty and of equal length. CryptoKit has no public constant-time
        /// comparison, so this accumulates the XOR of every byte pair and looks at it once.
        static func equalBytes(_ a: Data, _ b: Data) -> Bool {
            var difference: UInt8 = 0
            for (x, y) in zip(a, b) {
                difference |= x ^ y
            }
            return difference == 0
        }
    }
#endif
