#if os(Linux)
    internal import CTSS2
    import Foundation
    import Keybound
    internal import KeyboundCrypto

    /// Copies between `Data` and the fixed-size byte arrays of tss2's `TPM2B_*` structures, which
    /// Swift imports as tuples.
    enum TPMBytes {
        /// P-256 coordinates and scalars: 32 bytes.
        static let p256ByteCount = 32

        /// Puts `data` into a `TPM2B_DIGEST` (also `TPM2B_AUTH`, `TPM2B_NONCE`).
        static func set(_ digest: inout TPM2B_DIGEST, _ data: Data) throws {
            digest.size = try fill(&digest.buffer, with: data)
        }

        /// Puts `04 || X || Y` into a `TPM2B_ECC_POINT`.
        /// - Throws: ``KeyboundError/invalidInput`` for anything but 65 bytes starting 04.
        static func setPoint(_ point: inout TPM2B_ECC_POINT, x963: Data) throws {
            let bytes = [UInt8](x963)
            guard bytes.count == 1 + 2 * p256ByteCount, bytes.first == 0x04 else {
                throw KeyboundError.invalidInput("not an uncompressed P-256 point (\(bytes.count) bytes)")
            }
            point.point.x.size = try fill(&point.point.x.buffer, with: Data(bytes[1...p256ByteCount]))
            point.point.y.size = try fill(&point.point.y.buffer, with: Data(bytes[(1 + p256ByteCount)...]))
            point.size = UInt16(2 * (2 + p256ByteCount))
        }

        /// The first `count` bytes of a `TPM2B`'s buffer.
        static func get<Buffer>(_ buffer: Buffer, count: UInt16) -> Data {
            withUnsafeBytes(of: buffer) { Data($0.prefix(Int(count))) }
        }

        /// A P-256 scalar or coordinate as exactly 32 big-endian bytes (a TPM may send it shorter,
        /// without leading zeros).
        static func scalar(_ parameter: TPM2B_ECC_PARAMETER) throws -> Data {
            let value = get(parameter.buffer, count: parameter.size)
            guard value.count <= p256ByteCount else {
                throw KeyboundError(
                    .unexpected, message: "the TPM returned a \(value.count)-byte P-256 value")
            }
            return Data(repeating: 0, count: p256ByteCount - value.count) + value
        }

        /// `04 || X || Y` of a point the TPM returned.
        static func x963(_ point: TPMS_ECC_POINT) throws -> Data {
            Data([0x04]) + (try scalar(point.x)) + (try scalar(point.y))
        }

        /// Copies `data` into a fixed-size buffer and returns the size to store beside it.
        private static func fill<Buffer>(_ buffer: inout Buffer, with data: Data) throws -> UInt16 {
            guard data.count <= MemoryLayout<Buffer>.size, let size = UInt16(exactly: data.count) else {
                throw KeyboundError(.unexpected, message: "\(data.count) bytes do not fit a TPM buffer")
            }
            withUnsafeMutableBytes(of: &buffer) { raw in raw.copyBytes(from: data) }
            return size
        }
    }

    /// An object the TPM made, as it hands it out: the public area and the private area, which
    /// the TPM encrypted and integrity-protected under the parent key (so only this TPM, under the
    /// same primary key, can load it). Kept marshalled (the TPM's own wire format), as tpm2-tools
    /// keeps `.pub` and `.priv` files.
    struct TPMBlob: Codable, Sendable, Hashable {
        /// A marshalled `TPM2B_PUBLIC`.
        let publicBytes: Data
        /// A marshalled `TPM2B_PRIVATE`.
        let privateBytes: Data

        init(public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) throws {
            publicBytes = try Self.marshal(`public`)
            privateBytes = try Self.marshal(`private`)
        }

        init(publicBytes: Data, privateBytes: Data) {
            self.publicBytes = publicBytes
            self.privateBytes = privateBytes
        }

        /// The same object with another private area (after TPM2_ObjectChangeAuth).
        func replacingPrivate(_ privateBytes: Data) -> TPMBlob {
            TPMBlob(publicBytes: publicBytes, privateBytes: privateBytes)
        }

        func publicArea() throws -> TPM2B_PUBLIC {
            var value = TPM2B_PUBLIC()
            try Self.unmarshal(publicBytes, "TPM2B_PUBLIC") { buffer, size, offset in
                Tss2_MU_TPM2B_PUBLIC_Unmarshal(buffer, size, offset, &value)
            }
            return value
        }

        func privateArea() throws -> TPM2B_PRIVATE {
            var value = TPM2B_PRIVATE()
            try Self.unmarshal(privateBytes, "TPM2B_PRIVATE") { buffer, size, offset in
                Tss2_MU_TPM2B_PRIVATE_Unmarshal(buffer, size, offset, &value)
            }
            return value
        }

        /// The public point of an ECC P-256 object, `04 || X || Y`: read from the public area,
        /// without the TPM.
        func eccPublicPoint() throws -> Data {
            let area = try publicArea().publicArea
            guard area.type == TPM2_ALG_ECC, area.parameters.eccDetail.curveID == TPM2_ECC_NIST_P256 else {
                throw KeyboundError(.unexpected, message: "the stored TPM object is not a P-256 key")
            }
            return try TPMBytes.x963(area.unique.ecc)
        }

        static func marshal(_ value: TPM2B_PUBLIC) throws -> Data {
            var value = value
            return try marshal(MemoryLayout<TPM2B_PUBLIC>.size, "TPM2B_PUBLIC") { buffer, size, offset in
                Tss2_MU_TPM2B_PUBLIC_Marshal(&value, buffer, size, offset)
            }
        }

        static func marshal(_ value: TPM2B_PRIVATE) throws -> Data {
            var value = value
            return try marshal(MemoryLayout<TPM2B_PRIVATE>.size, "TPM2B_PRIVATE") { buffer, size, offset in
                Tss2_MU_TPM2B_PRIVATE_Marshal(&value, buffer, size, offset)
            }
        }

        private static func marshal(
            _ capacity: Int, _ what: String,
            _ body: (UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>) -> TSS2_RC
        ) throws -> Data {
            var buffer = [UInt8](repeating: 0, count: capacity)
            var offset = 0
            let code = buffer.withUnsafeMutableBufferPointer { body($0.baseAddress, $0.count, &offset) }
            guard code == TSS2_RC_SUCCESS else {
                throw KeyboundError(.unexpected, native: .tss2(code), message: "cannot marshal a \(what)")
            }
            return Data(buffer.prefix(offset))
        }

        /// Unmarshals all of `data`: a short or overlong area is a damaged file.
        private static func unmarshal(
            _ data: Data, _ what: String,
            _ body: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>) -> TSS2_RC
        ) throws {
            var offset = 0
            let code = [UInt8](data).withUnsafeBufferPointer { body($0.baseAddress, $0.count, &offset) }
            guard code == TSS2_RC_SUCCESS, offset == data.count else {
                throw KeyboundError(
                    .invalidated, native: code == TSS2_RC_SUCCESS ? nil : .tss2(code),
                    message: "the stored \(what) is damaged")
            }
        }
    }

    /// The public areas Keybound asks the TPM to make objects from.
    enum TPMTemplates {
        private static let objectBase: TPMA_OBJECT =
            TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN

        /// The TCG's ECC P-256 storage root key template (TPM 2.0 Provisioning Guidance, "SRK
        /// template"): a restricted decryption key, AES-128-CFB for its children, unique fields of
        /// 32 zero bytes. The same template always yields the same key on one TPM.
        static func storagePrimary() -> TPM2B_PUBLIC {
            var template = TPM2B_PUBLIC()
            template.publicArea.type = TPM2_ALG_ECC
            template.publicArea.nameAlg = TPM2_ALG_SHA256
            template.publicArea.objectAttributes =
                objectBase | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED
                | TPMA_OBJECT_DECRYPT
            template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES
            template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
            template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB
            template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
            template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
            template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
            template.publicArea.unique.ecc.x.size = UInt16(TPMBytes.p256ByteCount)
            template.publicArea.unique.ecc.y.size = UInt16(TPMBytes.p256ByteCount)
            return template
        }

        /// A P-256 key that signs (ECDSA, scheme chosen per command) and does ECDH, not restricted
        /// to TPM-made structures.
        ///
        /// - Parameter authPolicy: nil for a key usable with its (empty) authorization value; else
        ///   the only way to use it: a policy session whose digest is `authPolicy`. `userWithAuth`
        ///   is then clear, and `adminWithPolicy` set, so no authorization value can stand in.
        static func p256Key(authPolicy: Data?) throws -> TPM2B_PUBLIC {
            var template = TPM2B_PUBLIC()
            template.publicArea.type = TPM2_ALG_ECC
            template.publicArea.nameAlg = TPM2_ALG_SHA256
            var attributes = objectBase | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT
            if let authPolicy {
                attributes |= TPMA_OBJECT_ADMINWITHPOLICY
                try TPMBytes.set(&template.publicArea.authPolicy, authPolicy)
            } else {
                // Nothing to guess: failures with it must not count toward the lockout.
                attributes |= TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA
            }
            template.publicArea.objectAttributes = attributes
            template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL
            template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
            template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
            template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
            return template
        }

        /// The PIN object: an HMAC key the TPM generates, whose only job is to have the PIN as its
        /// authorization value. It is subject to the dictionary-attack protection (`noDA` clear),
        /// so every wrong PIN counts toward the TPM's lockout.
        static func pinObject() -> TPM2B_PUBLIC {
            var template = TPM2B_PUBLIC()
            template.publicArea.type = TPM2_ALG_KEYEDHASH
            template.publicArea.nameAlg = TPM2_ALG_SHA256
            template.publicArea.objectAttributes =
                objectBase | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT
            template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_HMAC
            template.publicArea.parameters.keyedHashDetail.scheme.details.hmac.hashAlg = TPM2_ALG_SHA256
            return template
        }

        /// The policy digest of one `TPM2_PolicySecret(authObject)` with an empty policyRef, as the
        /// TPM computes it (TPM 2.0 Part 3, PolicySecret and PolicyUpdate):
        /// `H(H(0³² || TPM_CC_PolicySecret || name) || policyRef)`. Computed here, so a key can
        /// be bound to the PIN without knowing the PIN.
        static func policySecretDigest(authObjectName name: Data) -> Data {
            let commandCode = UInt32(TPM2_CC_PolicySecret).bigEndian
            let code = withUnsafeBytes(of: commandCode) { Data($0) }
            let first = Digest.sha256(Data(repeating: 0, count: 32) + code + name)
            return Digest.sha256(first)
        }
    }
#endif
