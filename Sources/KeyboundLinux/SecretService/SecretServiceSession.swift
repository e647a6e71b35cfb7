#if os(Linux)
    import Dispatch
    import Foundation
    import Keybound

    /// The Secret Service API (org.freedesktop.secrets) over one D-Bus connection, with one
    /// session opened with the `plain` algorithm: the values that cross the bus are already
    /// sealed by the TPM (``SecretServiceStore``), so the bus's own encryption would add nothing
    /// an eavesdropper on the user's bus lacks (the keyring hands the same bytes to any process
    /// of the user).
    ///
    /// Every call blocks; ``SecretServiceSession/run(address:_:)`` runs a body on the queue of
    /// its own, off Swift's cooperative pool.
    final class SecretServiceSession {
        static let serviceName = "org.freedesktop.secrets"
        static let servicePath = "/org/freedesktop/secrets"
        static let serviceInterface = "org.freedesktop.Secret.Service"
        static let collectionInterface = "org.freedesktop.Secret.Collection"
        static let itemInterface = "org.freedesktop.Secret.Item"

        let bus: DBusConnection
        private let session: String
        private let address: String

        /// One queue for every Secret Service call of the process: each connects, opens a session,
        /// does its few calls and disconnects.
        private static let queue = DispatchQueue(label: "Keybound.SecretService", qos: .userInitiated)

        /// Runs `body` on the Secret Service queue with a new connection and session, closed
        /// when it returns.
        /// - Throws: what `body` throws; ``KeyboundError/notSupported`` when the bus or the
        ///   service cannot be reached.
        static func run<Value: Sendable>(
            address: String, _ body: @escaping @Sendable (SecretServiceSession) throws -> Value
        ) async throws -> Value {
            try await withCheckedThrowingContinuation { continuation in
                queue.async {
                    continuation.resume(
                        with: Result {
                            let session = try SecretServiceSession(address: address)
                            return try body(session)
                        })
                }
            }
        }

        private init(address: String) throws {
            self.address = address
            let bus: DBusConnection
            do {
                bus = try DBusConnection(address: address)
            } catch let failure as DBusFailure {
                throw KeyboundError(
                    .notSupported,
                    message: "no D-Bus session bus at \(address) (\(failure)): the Secret Service needs "
                        + "the user's session bus")
            }
            let reply = try Self.mapping(address) {
                try bus.call(
                    Self.serviceName, Self.servicePath, Self.serviceInterface, "OpenSession",
                    [.string("plain"), .variant(.string(""))])
            }
            guard reply.count == 2, let session = reply[1].string else {
                throw KeyboundError(.unexpected, message: "OpenSession answered \(reply)")
            }
            self.bus = bus
            self.session = session
        }

        /// Runs a call, mapping its D-Bus failure (the table in docs/linux.md).
        private static func mapping<Value>(_ address: String, _ call: () throws -> Value) throws -> Value {
            do { return try call() } catch let failure as DBusFailure {
                throw SecretServiceSession.error(failure, address: address)
            }
        }

        private func call(
            _ path: String, _ interface: String, _ method: String, _ arguments: [DBusArgument] = []
        )
            throws -> [DBusValue]
        {
            try Self.mapping(address) {
                try bus.call(Self.serviceName, path, interface, method, arguments)
            }
        }

        /// The D-Bus failure as a ``KeyboundError``.
        static func error(_ failure: DBusFailure, address: String) -> KeyboundError {
            switch failure.name {
            case "org.freedesktop.Secret.Error.IsLocked":
                return KeyboundError(
                    .interactionNotAllowed,
                    message: "the keyring is locked (\(failure)): it unlocks when the user logs in, "
                        + "or in the keyring's own app; Keybound shows no unlock prompt")
            case "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject":
                return KeyboundError(.itemNotFound, message: "\(failure)")
            case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
                "org.freedesktop.DBus.Error.Spawn.ServiceNotFound":
                return KeyboundError(
                    .notSupported,
                    message: "no Secret Service on the session bus \(address) (no gnome-keyring or KeePassXC "
                        + "running): \(failure)")
            case "org.freedesktop.DBus.Error.NotSupported", "org.freedesktop.DBus.Error.UnknownMethod",
                "org.freedesktop.DBus.Error.UnknownInterface", "org.freedesktop.DBus.Error.AccessDenied":
                return KeyboundError(
                    .notSupported, message: "the Secret Service on \(address) refused: \(failure)")
            case "org.freedesktop.DBus.Error.NoServer", "org.freedesktop.DBus.Error.NoReply",
                "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.Disconnected":
                return KeyboundError(
                    .unexpected, message: "the Secret Service did not answer: \(failure)",
                    recovery: .retryLater)
            default:
                return KeyboundError(.unexpected, message: "the Secret Service: \(failure)")
            }
        }

        // MARK: The calls

        /// The items whose attributes include all of `attributes`: unlocked, locked.
        func search(_ attributes: [(String, String)]) throws -> (unlocked: [String], locked: [String]) {
            let reply = try call(
                Self.servicePath, Self.serviceInterface, "SearchItems", [.stringDictionary(attributes)])
            guard reply.count == 2, let unlocked = reply[0].array, let locked = reply[1].array else {
                throw KeyboundError(.unexpected, message: "SearchItems answered \(reply)")
            }
            return (unlocked.compactMap(\.string), locked.compactMap(\.string))
        }

        /// The secret of an unlocked item.
        func secret(of item: String) throws -> Data {
            let reply = try call(item, Self.itemInterface, "GetSecret", [.objectPath(session)])
            guard let fields = reply.first?.fields, fields.count == 4, let value = fields[2].bytes else {
                throw KeyboundError(.unexpected, message: "GetSecret answered \(reply)")
            }
            return value
        }

        /// The collection the `default` alias names (gnome-keyring's `login`).
        func defaultCollection() throws -> String {
            let reply = try call(Self.servicePath, Self.serviceInterface, "ReadAlias", [.string("default")])
            guard let path = reply.first?.string else {
                throw KeyboundError(.unexpected, message: "ReadAlias answered \(reply)")
            }
            guard path != "/" else {
                throw KeyboundError(
                    .notSupported,
                    message: "the Secret Service has no default collection (a keyring made at login); "
                        + "create one in the keyring's app")
            }
            return path
        }

        /// Creates or replaces the item with these attributes in `collection`.
        func createItem(
            in collection: String, label: String, attributes: [(String, String)], secret: Data
        ) throws {
            let properties: [(String, DBusArgument)] = [
                ("org.freedesktop.Secret.Item.Label", .string(label)),
                ("org.freedesktop.Secret.Item.Attributes", .stringDictionary(attributes)),
            ]
            let value = DBusArgument.structure([
                .objectPath(session), .bytes(Data()), .bytes(secret), .string("application/octet-stream"),
            ])
            let reply = try call(
                collection, Self.collectionInterface, "CreateItem",
                [.properties(properties), value, .boolean(true)])
            try Self.refusePrompt(reply.count == 2 ? reply[1].string : nil, doing: "storing an item")
        }

        /// Deletes an item.
        func delete(_ item: String) throws {
            let reply = try call(item, Self.itemInterface, "Delete")
            try Self.refusePrompt(reply.first?.string, doing: "deleting an item")
        }

        /// A prompt the service asks to show (an unlock, a confirmation): Keybound shows none.
        private static func refusePrompt(_ prompt: String?, doing what: String) throws {
            guard let prompt, prompt != "/" else { return }
            throw KeyboundError(
                .interactionNotAllowed,
                message: "the Secret Service wants to show a prompt (\(prompt)) for \(what): the keyring is "
                    + "locked or asks for confirmation; Keybound shows no keyring prompt")
        }
    }
#endif
