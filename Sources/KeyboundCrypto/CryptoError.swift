/// An error thrown by KeyboundCrypto.
///
/// The kinds are `static` values, so new kinds can be added without breaking callers that
/// `switch` or compare. Two errors are equal when they are the same kind: ``detail`` is for logs
/// and never part of the comparison.
///
/// ```swift
/// do {
///     let plaintext = try AES256GCM.open(box, key: key)
/// } catch let error as CryptoError where error == .authenticationFailure {
///     // Wrong key, or the box, nonce or associated data were changed.
/// }
/// ```
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Kind: String, Sendable {
        case invalidKey
        case invalidSignatureEncoding
        case authenticationFailure
        case invalidParameter
        case backend
    }

    private let kind: Kind

    /// What exactly was wrong, for logs; `nil` when the kind says it all.
    public let detail: String?

    private init(_ kind: Kind, _ detail: String? = nil) {
        self.kind = kind
        self.detail = detail
    }

    /// Key material is malformed: wrong length or encoding, a scalar outside `1..<n`, a point not
    /// on the curve, or a key for another algorithm or curve.
    public static let invalidKey = CryptoError(.invalidKey)

    /// A signature is not a valid encoding: non-strict DER (BER, trailing bytes, negative or
    /// zero-padded integers, integers wider than the curve order) or a raw form of the wrong size.
    public static let invalidSignatureEncoding = CryptoError(.invalidSignatureEncoding)

    /// Authenticated decryption failed: the tag does not match the key, nonce, ciphertext and
    /// associated data. Nothing is learned about the plaintext.
    public static let authenticationFailure = CryptoError(.authenticationFailure)

    /// A parameter is outside what the operation supports (key, nonce or tag size, output length).
    public static let invalidParameter = CryptoError(.invalidParameter)

    /// The crypto library itself reported a failure (for example an allocation failure).
    ///
    /// - Parameter message: What failed, with the library's own error text.
    /// - Returns: An error of kind `backend`; all `backend` errors compare equal.
    public static func backend(_ message: String) -> CryptoError {
        CryptoError(.backend, message)
    }

    /// The same kind of error, with a more precise ``detail`` for logs.
    func with(detail: String) -> CryptoError {
        CryptoError(kind, detail)
    }

    /// `CryptoError.<kind>`, followed by the detail when there is one.
    public var description: String {
        guard let detail else { return "CryptoError.\(kind.rawValue)" }
        return "CryptoError.\(kind.rawValue)(\(detail))"
    }

    /// Errors are equal when they are of the same kind.
    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool {
        lhs.kind == rhs.kind
    }
}
