#if canImport(CryptoKit)
    // CryptoKit's P-256 keys are immutable values, but the iOS 17 / macOS 14 SDKs do not declare
    // them Sendable; without this the backings below could not be Sendable.
    @preconcurrency internal import CryptoKit
    import Foundation

    /// A P-256 key pair in CryptoKit.
    struct P256PrivateKeyBacking: Sendable {
        private let key: P256.Signing.PrivateKey

        /// A fresh key from CryptoKit's key generator.
        init() throws {
            key = P256.Signing.PrivateKey()
        }

        /// The key with private scalar `validatedScalar` (32 bytes, already checked to be in 1..<n).
        init(validatedScalar: Data) throws {
            do {
                key = try P256.Signing.PrivateKey(rawRepresentation: validatedScalar)
            } catch {
                throw CryptoError.invalidKey.with(detail: "P256.Signing.PrivateKey: \(error)")
            }
        }

        var publicX963Representation: Data { key.publicKey.x963Representation }

        var rawRepresentation: Data { key.rawRepresentation }

        func signatureRawRepresentation(for message: Data) throws -> Data {
            do {
                return try key.signature(for: message).rawRepresentation
            } catch {
                throw CryptoError.backend("P256.Signing.PrivateKey.signature: \(error)")
            }
        }
    }

    /// A P-256 public key in CryptoKit.
    struct P256PublicKeyBacking: Sendable {
        private let key: P256.Signing.PublicKey

        init(x963Representation point: Data) throws {
            do {
                key = try P256.Signing.PublicKey(x963Representation: point)
            } catch {
                throw CryptoError.invalidKey.with(detail: "P256.Signing.PublicKey: \(error)")
            }
        }

        func isValidSignature(_ signature: P256Signature, for message: Data) -> Bool {
            guard
                let signature = try? P256.Signing.ECDSASignature(
                    rawRepresentation: signature.rawRepresentation)
            else { return false }
            return key.isValidSignature(signature, for: message)
        }
    }
#endif
