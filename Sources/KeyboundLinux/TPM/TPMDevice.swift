#if os(Linux)
    import Dispatch
    import Foundation
    import Keybound

    /// One TPM, as this process sees it: every operation on it runs on one serial queue, over a
    /// connection of its own that flushes what it loaded.
    ///
    /// Serial because a TPM without a resource manager holds three transient objects at most, and
    /// an operation needs up to three at once (the storage key, the PIN object, the key); and
    /// because swtpm serves one connection at a time. Off Swift's cooperative pool, because each
    /// call blocks on the TPM (about a millisecond on swtpm, tens on a hardware TPM).
    final class TPMDevice: Sendable {
        /// How to reach it.
        let connection: TPMConnection
        private let queue: DispatchQueue

        private init(_ connection: TPMConnection) {
            self.connection = connection
            queue = DispatchQueue(label: "Keybound.TPM \(connection.tcti)", qos: .userInitiated)
        }

        /// Devices by TCTI configuration: two vaults on one TPM share its queue.
        private static let devices = Mutex<[TPMConnection: TPMDevice]>([:])

        /// The device `connection` reaches, made on first use.
        static func shared(_ connection: TPMConnection) -> TPMDevice {
            devices.withLock { devices in
                if let device = devices[connection] { return device }
                let device = TPMDevice(connection)
                devices[connection] = device
                return device
            }
        }

        /// Runs `body` on the TPM's queue with a new connection, closed (and everything it loaded
        /// flushed) when `body` returns or throws.
        func withConnection<Value: Sendable>(_ body: @escaping @Sendable (ESYSConnection) throws -> Value)
            async throws -> Value
        {
            let tpm = connection
            return try await serially {
                try tpm.checkReachable()
                return try body(try ESYSConnection(tcti: tpm.tcti))
            }
        }

        /// Runs `body` on the TPM's queue without connecting: file work that must not interleave
        /// with an operation on the same keys (a delete during a sign).
        func serially<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
            try await withCheckedThrowingContinuation { continuation in
                queue.async { continuation.resume(with: Result { try body() }) }
            }
        }
    }
#endif
