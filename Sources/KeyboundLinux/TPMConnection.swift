#if os(Linux)
    import Foundation
    import Keybound

    /// How to reach a TPM 2.0: a TCTI configuration, as tpm2-tools' `--tcti` option spells it.
    ///
    /// ```swift
    /// let vault = try TPMKeyVault(directory: keys)                                   // /dev/tpmrm0
    /// let test = try TPMKeyVault(directory: keys, connection: .swtpm(port: 2321))   // swtpm
    /// ```
    public struct TPMConnection: Sendable, Hashable, CustomStringConvertible {
        /// The TCTI name and its configuration, `name:conf`: `device:/dev/tpmrm0`,
        /// `swtpm:host=127.0.0.1,port=2321`, `mssim:…`, `tabrmd:…` (tss2's TCTI loader reads it).
        public let tcti: String

        /// A connection by TCTI configuration string.
        /// - Throws: ``KeyboundError/invalidInput`` for an empty string, one over 512 bytes, or
        ///   one with a NUL or a control character.
        public init(tcti: String) throws {
            guard (1...512).contains(tcti.utf8.count),
                !tcti.unicodeScalars.contains(where: { $0.value < 0x20 })
            else {
                throw KeyboundError.invalidInput("a TCTI configuration is 1–512 printable bytes")
            }
            self.tcti = tcti
        }

        private init(valid tcti: String) { self.tcti = tcti }

        /// The kernel's TPM resource manager, `/dev/tpmrm0` (the default): it flushes what a
        /// process leaves loaded, and lets several processes share the TPM. Users need to be in
        /// the `tss` group (Debian's tpm-udev rules) to open it.
        public static let kernelResourceManager = TPMConnection(valid: "device:/dev/tpmrm0")

        /// A swtpm software TPM listening on `host`:`port` (`swtpm socket --server type=tcp,port=…`),
        /// for tests and for machines without a TPM. Its keys are only as safe as swtpm's state
        /// directory.
        public static func swtpm(host: String = "127.0.0.1", port: UInt16) -> TPMConnection {
            TPMConnection(valid: "swtpm:host=\(host),port=\(port)")
        }

        /// The TCTI configuration.
        public var description: String { tcti }

        /// The character device a `device:` TCTI opens (`/dev/tpmrm0` when none is named), or nil
        /// for other TCTIs.
        var devicePath: String? {
            guard tcti == "device" || tcti.hasPrefix("device:") else { return nil }
            let path = tcti.dropFirst("device".count).drop(while: { $0 == ":" })
            return path.isEmpty ? "/dev/tpmrm0" : String(path)
        }

        /// Checks what can be checked before tss2 tries (and logs its own errors): that the device
        /// exists and this user may open it.
        /// - Throws: ``KeyboundError/notSupported`` naming the reason.
        func checkReachable() throws {
            guard let path = devicePath else { return }
            guard FileManager.default.fileExists(atPath: path) else {
                throw KeyboundError(
                    .notSupported,
                    message:
                        "no TPM here: \(path) does not exist (no TPM 2.0, or its kernel driver is not loaded)"
                )
            }
            guard access(path, R_OK | W_OK) == 0 else {
                throw KeyboundError(
                    .notSupported,
                    message: "this user cannot open \(path) (\(String(cString: strerror(errno)))): "
                        + "add it to the group that owns the device, usually tss")
            }
        }
    }
#endif
