#if canImport(CryptoKit)
    internal import CryptoKit
    import Foundation

    enum AESGCMBackend {
        /// Key and nonce sizes are already checked.
        static func seal(_ plaintext: Data, key: Data, nonce: Data, aad: Data) throws -> (
            ciphertext: Data, tag: Data
        ) {
            do {
                let box = try AES.GCM.seal(
                    plaintext, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: nonce),
                    authenticating: aad)
                return (box.ciphertext, box.tag)
            } catch {
                throw CryptoError.backend("AES.GCM.seal: \(error)")
            }
        }

        /// Key, nonce and tag sizes are already checked.
        static func open(ciphertext: Data, tag: Data, key: Data, nonce: Data, aad: Data) throws -> Data {
            do {
                let box = try AES.GCM.SealedBox(
                    nonce: AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
                return try AES.GCM.open(box, using: SymmetricKey(data: key), authenticating: aad)
            } catch CryptoKitError.authenticationFailure {
                throw CryptoError.authenticationFailure
            } catch {
                throw CryptoError.backend("AES.GCM.open: \(error)")
            }
        }
    }
#endif
