import Foundation

/// Comparisons whose running time does not depend on the bytes compared.
public enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes, in time that depends only on their length.
    ///
    /// Use it for MACs, tokens and other secrets, where an early exit on the first difference
    /// would tell an attacker how many leading bytes were right.
    ///
    /// - Parameters:
    ///   - a: The first value.
    ///   - b: The second value.
    /// - Returns: `true` when both have the same length and the same bytes (two empty values are
    ///   equal). Values of different lengths are unequal without any of their content being read:
    ///   lengths are not treated as secret.
    public static func equals(_ a: Data, _ b: Data) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return ConstantTimeBackend.equalBytes(a, b)
    }
}
