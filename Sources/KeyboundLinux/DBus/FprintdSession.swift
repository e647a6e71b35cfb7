#if os(Linux)
    import Dispatch
    import Foundation
    import Keybound

    /// fprintd's D-Bus API (`net.reactivated.Fprint`) over one connection to the system bus.
    /// Every call blocks; ``run(address:_:)`` runs a body on the queue of its own.
    final class FprintdSession {
        static let serviceName = "net.reactivated.Fprint"
        static let managerPath = "/net/reactivated/Fprint/Manager"
        static let managerInterface = "net.reactivated.Fprint.Manager"
        static let deviceInterface = "net.reactivated.Fprint.Device"

        let bus: DBusConnection
        private let address: String

        /// One verification at a time in the process: fprintd lets one client claim a reader.
        private static let queue = DispatchQueue(label: "Keybound.fprintd", qos: .userInitiated)

        static func run<Value: Sendable>(
            address: String, _ body: @escaping @Sendable (FprintdSession) throws -> Value
        ) async throws -> Value {
            try await withCheckedThrowingContinuation { continuation in
                queue.async {
                    continuation.resume(with: Result { try body(try FprintdSession(address: address)) })
                }
            }
        }

        private init(address: String) throws {
            self.address = address
            do { bus = try DBusConnection(address: address) } catch let failure as DBusFailure {
                throw KeyboundError(
                    .biometryNotAvailable,
                    message: "no D-Bus system bus at \(address) (\(failure)): fprintd runs on the system bus")
            }
        }

        /// The D-Bus failure as a ``KeyboundError`` (the table in docs/linux.md).
        static func error(_ failure: DBusFailure) -> KeyboundError {
            switch failure.name {
            case "net.reactivated.Fprint.Error.NoEnrolledPrints":
                return KeyboundError(.biometryNotEnrolled, message: "no finger enrolled (\(failure))")
            case "net.reactivated.Fprint.Error.NoSuchDevice", "org.freedesktop.DBus.Error.ServiceUnknown",
                "org.freedesktop.DBus.Error.NameHasNoOwner":
                return KeyboundError(
                    .biometryNotAvailable, message: "no fingerprint reader through fprintd (\(failure))")
            case "net.reactivated.Fprint.Error.AlreadyInUse":
                return KeyboundError(
                    .unexpected, message: "another program holds the fingerprint reader (\(failure))",
                    recovery: .retryLater)
            case "net.reactivated.Fprint.Error.PermissionDenied":
                return KeyboundError(
                    .notSupported, message: "polkit does not let this user verify with fprintd (\(failure))")
            default:
                return KeyboundError(.unexpected, message: "fprintd: \(failure)")
            }
        }

        private func call(
            _ path: String, _ interface: String, _ method: String, _ arguments: [DBusArgument] = []
        )
            throws -> [DBusValue]
        {
            do { return try bus.call(Self.serviceName, path, interface, method, arguments) } catch let failure
                as DBusFailure
            {
                throw Self.error(failure)
            }
        }

        /// The default reader's object path.
        func defaultDevice() throws -> String {
            guard
                let path = try call(Self.managerPath, Self.managerInterface, "GetDefaultDevice").first?.string
            else { throw KeyboundError(.unexpected, message: "GetDefaultDevice answered nothing") }
            return path
        }

        /// The names of the fingers `user` enrolled on the default reader (none: empty).
        func enrolledFingers(of user: String) throws -> [String] {
            let device = try defaultDevice()
            do {
                let reply = try call(device, Self.deviceInterface, "ListEnrolledFingers", [.string(user)])
                return reply.first?.array?.compactMap(\.string) ?? []
            } catch let error as KeyboundError where error == .biometryNotEnrolled {
                return []
            }
        }

        /// Claims the reader for `user`, starts a verification against any enrolled finger, and
        /// waits for its result; stops and releases the reader whatever happens.
        /// - Parameter cancelled: polled while waiting; true stops the verification
        ///   (``KeyboundError/appCancel``).
        func verify(user: String, waitingMilliseconds: Int32, cancelled: () -> Bool) throws {
            let device = try defaultDevice()
            try bus.addMatch(
                "type='signal',sender='\(Self.serviceName)',interface='\(Self.deviceInterface)',path='\(device)'"
            )
            _ = try call(device, Self.deviceInterface, "Claim", [.string(user)])
            defer { _ = try? call(device, Self.deviceInterface, "Release") }
            _ = try call(device, Self.deviceInterface, "VerifyStart", [.string("any")])
            defer { _ = try? call(device, Self.deviceInterface, "VerifyStop") }
            let deadline = Date().addingTimeInterval(Double(waitingMilliseconds) / 1000)
            while Date() < deadline {
                if cancelled() {
                    throw KeyboundError(.appCancel, message: "the app cancelled the fingerprint verification")
                }
                let signal: DBusConnection.Signal?
                do { signal = try bus.nextSignal(waiting: 100) } catch let failure as DBusFailure {
                    throw Self.error(failure)
                }
                guard let signal, signal.member == "VerifyStatus", signal.arguments.count == 2,
                    let result = signal.arguments[0].string, case .boolean(let done) = signal.arguments[1]
                else { continue }
                if let outcome = try Self.outcome(result, done: done) { return outcome }
            }
            throw KeyboundError(.systemCancel, message: "no finger on the reader within the timeout")
        }

        /// What a `VerifyStatus` means: nil to keep waiting (the reader asks to scan again).
        /// - Throws: the verification's failure.
        static func outcome(_ result: String, done: Bool) throws -> Void? {
            switch result {
            case "verify-match":
                return ()
            case "verify-no-match":
                throw KeyboundError(.authenticationFailed, message: "the finger did not match (\(result))")
            case "verify-retry-scan", "verify-swipe-too-short", "verify-finger-not-centered",
                "verify-remove-and-retry":
                guard done else { return nil }
                throw KeyboundError(
                    .authenticationFailed, message: "the reader could not read the finger (\(result))")
            case "verify-disconnected":
                throw KeyboundError(
                    .biometryNotAvailable, message: "the fingerprint reader went away (\(result))")
            default:
                throw KeyboundError(.unexpected, message: "fprintd: \(result)")
            }
        }
    }
#endif
