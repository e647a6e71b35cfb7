#if canImport(CryptoKit)
    internal import CommonCrypto
    import Foundation

    // CryptoKit has no PBKDF2; CommonCrypto, beside it on every Apple platform, does.
    enum PBKDF2Backend {
        /// The parameters are already within ``PBKDF2SHA256``'s ranges.
        static func deriveKey(password: Data, salt: Data, iterations: Int, outputByteCount: Int) throws
            -> Data
        {
            var output = Data(count: outputByteCount)
            let status = password.withUnsafeBytes { password in
                salt.withUnsafeBytes { salt in
                    output.withUnsafeMutableBytes { output in
                        CCKeyDerivationPBKDF(
                            CCPBKDFAlgorithm(kCCPBKDF2), password.bindMemory(to: CChar.self).baseAddress,
                            password.count, salt.bindMemory(to: UInt8.self).baseAddress, salt.count,
                            CCPseudoRandomAlgorithm(kCCPRFHmacAlgSHA256), UInt32(iterations),
                            output.bindMemory(to: UInt8.self).baseAddress, output.count)
                    }
                }
            }
            guard status == kCCSuccess else {
                throw CryptoError.backend("CCKeyDerivationPBKDF failed with status \(status)")
            }
            return output
        }
    }
#endif
