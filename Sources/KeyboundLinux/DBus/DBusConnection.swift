#if os(Linux)
    internal import CDBus
    import Foundation
    import Keybound

    /// A D-Bus argument to send, with its signature: only the shapes the Secret Service API needs.
    indirect enum DBusArgument: Sendable {
        case string(String)
        case objectPath(String)
        case boolean(Bool)
        /// `ay`.
        case bytes(Data)
        /// `ao`.
        case objectPaths([String])
        /// `as`.
        case strings([String])
        /// `a{ss}`, in the given order.
        case stringDictionary([(String, String)])
        /// `a{sv}`, in the given order.
        case properties([(String, DBusArgument)])
        /// A variant holding the value.
        case variant(DBusArgument)
        /// `(…)`.
        case structure([DBusArgument])

        var signature: String {
            switch self {
            case .string: "s"
            case .objectPath: "o"
            case .boolean: "b"
            case .bytes: "ay"
            case .objectPaths: "ao"
            case .strings: "as"
            case .stringDictionary: "a{ss}"
            case .properties: "a{sv}"
            case .variant: "v"
            case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
            }
        }
    }

    /// A D-Bus value received, read generically.
    indirect enum DBusValue: Sendable {
        case string(String)
        case objectPath(String)
        case boolean(Bool)
        /// `ay`.
        case bytes(Data)
        case array([DBusValue])
        case structure([DBusValue])
        case dictEntry(DBusValue, DBusValue)
        case variant(DBusValue)
        /// A type the Secret Service does not send us (numbers, file descriptors).
        case other

        var string: String? {
            switch self {
            case .string(let value), .objectPath(let value): value
            case .variant(let value): value.string
            default: nil
            }
        }

        var bytes: Data? {
            if case .bytes(let data) = self { return data }
            if case .array(let values) = self, values.isEmpty { return Data() }
            return nil
        }

        var array: [DBusValue]? {
            if case .array(let values) = self { return values }
            if case .bytes(let data) = self, data.isEmpty { return [] }
            return nil
        }

        var fields: [DBusValue]? {
            if case .structure(let values) = self { return values }
            return nil
        }
    }

    /// A D-Bus error reply or a failure to reach the bus: its name
    /// (`org.freedesktop.Secret.Error.IsLocked`) and message.
    struct DBusFailure: Error, Sendable, CustomStringConvertible {
        let name: String
        let message: String
        var description: String { "\(name): \(message)" }
    }

    /// One private connection to a message bus (libdbus-1), registered on it; closed in `deinit`.
    /// Blocking calls: use it on one thread at a time, off Swift's cooperative pool.
    final class DBusConnection {
        private let connection: OpaquePointer
        /// How long a call may wait for its reply.
        static let timeoutMilliseconds: Int32 = 10_000

        /// libdbus's own locks, in case another part of the process uses libdbus from other
        /// threads; once, before the first connection.
        private static let threads: Void = { _ = dbus_threads_init_default() }()

        /// Connects to the bus at `address` (`unix:path=…`) and says Hello.
        /// - Throws: ``DBusFailure``.
        init(address: String) throws {
            _ = Self.threads
            var error = DBusError()
            dbus_error_init(&error)
            defer { dbus_error_free(&error) }
            guard let connection = dbus_connection_open_private(address, &error) else {
                throw Self.failure(&error, "org.freedesktop.DBus.Error.NoServer")
            }
            // A private connection must not exit the process when the bus goes away.
            dbus_connection_set_exit_on_disconnect(connection, 0)
            guard dbus_bus_register(connection, &error) != 0 else {
                dbus_connection_close(connection)
                dbus_connection_unref(connection)
                throw Self.failure(&error, "org.freedesktop.DBus.Error.NoServer")
            }
            self.connection = connection
        }

        deinit {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
        }

        /// Calls `method` and waits for the reply.
        /// - Returns: the reply's arguments.
        /// - Throws: ``DBusFailure`` for an error reply, a timeout, or a lost connection.
        func call(
            _ destination: String, _ path: String, _ interface: String, _ method: String,
            _ arguments: [DBusArgument] = []
        ) throws -> [DBusValue] {
            guard let message = dbus_message_new_method_call(destination, path, interface, method) else {
                throw DBusFailure(name: "org.freedesktop.DBus.Error.NoMemory", message: "no message")
            }
            defer { dbus_message_unref(message) }
            var iterator = DBusMessageIter()
            dbus_message_iter_init_append(message, &iterator)
            for argument in arguments {
                guard Self.append(argument, to: &iterator) else {
                    throw DBusFailure(name: "org.freedesktop.DBus.Error.NoMemory", message: "cannot append")
                }
            }
            var error = DBusError()
            dbus_error_init(&error)
            defer { dbus_error_free(&error) }
            guard
                let reply = dbus_connection_send_with_reply_and_block(
                    connection, message, Self.timeoutMilliseconds, &error)
            else { throw Self.failure(&error, "org.freedesktop.DBus.Error.Failed") }
            defer { dbus_message_unref(reply) }
            var values: [DBusValue] = []
            var reader = DBusMessageIter()
            guard dbus_message_iter_init(reply, &reader) != 0 else { return [] }
            repeat { values.append(Self.read(&reader)) } while dbus_message_iter_next(&reader) != 0
            return values
        }

        /// A signal received.
        struct Signal {
            let path: String
            let interface: String
            let member: String
            let arguments: [DBusValue]
        }

        /// Asks the bus to route signals matching `rule` here
        /// (`type='signal',interface='…',path='…'`).
        /// - Throws: ``DBusFailure``.
        func addMatch(_ rule: String) throws {
            var error = DBusError()
            dbus_error_init(&error)
            defer { dbus_error_free(&error) }
            dbus_bus_add_match(connection, rule, &error)
            if dbus_error_is_set(&error) != 0 {
                throw Self.failure(&error, "org.freedesktop.DBus.Error.MatchRuleInvalid")
            }
        }

        /// The next signal received, waiting up to `milliseconds` for one; nil when none came.
        /// Method calls and replies that arrive meanwhile are dropped (this connection serves none).
        /// - Throws: ``DBusFailure`` when the connection is lost.
        func nextSignal(waiting milliseconds: Int32) throws -> Signal? {
            let deadline = Date().addingTimeInterval(Double(milliseconds) / 1000)
            repeat {
                while let message = dbus_connection_pop_message(connection) {
                    defer { dbus_message_unref(message) }
                    guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_SIGNAL else { continue }
                    var values: [DBusValue] = []
                    var reader = DBusMessageIter()
                    if dbus_message_iter_init(message, &reader) != 0 {
                        repeat {
                            values.append(Self.read(&reader))
                        } while dbus_message_iter_next(&reader) != 0
                    }
                    return Signal(
                        path: dbus_message_get_path(message).map { String(cString: $0) } ?? "",
                        interface: dbus_message_get_interface(message).map { String(cString: $0) } ?? "",
                        member: dbus_message_get_member(message).map { String(cString: $0) } ?? "",
                        arguments: values)
                }
                let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
                guard dbus_connection_read_write(connection, max(left, 1)) != 0 else {
                    throw DBusFailure(
                        name: "org.freedesktop.DBus.Error.Disconnected", message: "the bus went away")
                }
            } while Date() < deadline
            return nil
        }

        private static func failure(_ error: inout DBusError, _ fallback: String) -> DBusFailure {
            guard dbus_error_is_set(&error) != 0 else { return DBusFailure(name: fallback, message: "") }
            return DBusFailure(
                name: error.name.map { String(cString: $0) } ?? fallback,
                message: error.message.map { String(cString: $0) } ?? "")
        }

        // MARK: Writing

        private static func append(_ argument: DBusArgument, to iterator: inout DBusMessageIter) -> Bool {
            switch argument {
            case .string(let value):
                return appendString(value, type: keybound_dbus_type_string, to: &iterator)
            case .objectPath(let value):
                return appendString(value, type: keybound_dbus_type_object_path, to: &iterator)
            case .boolean(let value):
                var flag: dbus_bool_t = value ? 1 : 0
                return dbus_message_iter_append_basic(&iterator, keybound_dbus_type_boolean, &flag) != 0
            case .bytes(let data):
                return container(keybound_dbus_type_array, "y", &iterator) { inner in
                    [UInt8](data).withUnsafeBufferPointer { buffer in
                        var base = buffer.baseAddress
                        // libdbus reads the bytes through a pointer to the pointer; an empty
                        // array still needs a valid one.
                        var empty: UInt8 = 0
                        return withUnsafeMutablePointer(to: &empty) { placeholder in
                            if base == nil { base = UnsafePointer(placeholder) }
                            return dbus_message_iter_append_fixed_array(
                                &inner, keybound_dbus_type_byte, &base, Int32(buffer.count)) != 0
                        }
                    }
                }
            case .objectPaths(let paths):
                return container(keybound_dbus_type_array, "o", &iterator) { inner in
                    paths.allSatisfy { appendString($0, type: keybound_dbus_type_object_path, to: &inner) }
                }
            case .strings(let values):
                return container(keybound_dbus_type_array, "s", &iterator) { inner in
                    values.allSatisfy { appendString($0, type: keybound_dbus_type_string, to: &inner) }
                }
            case .stringDictionary(let entries):
                return container(keybound_dbus_type_array, "{ss}", &iterator) { inner in
                    entries.allSatisfy { key, value in
                        container(keybound_dbus_type_dict_entry, nil, &inner) { entry in
                            appendString(key, type: keybound_dbus_type_string, to: &entry)
                                && appendString(value, type: keybound_dbus_type_string, to: &entry)
                        }
                    }
                }
            case .properties(let entries):
                return container(keybound_dbus_type_array, "{sv}", &iterator) { inner in
                    entries.allSatisfy { key, value in
                        container(keybound_dbus_type_dict_entry, nil, &inner) { entry in
                            appendString(key, type: keybound_dbus_type_string, to: &entry)
                                && append(.variant(value), to: &entry)
                        }
                    }
                }
            case .variant(let value):
                return container(keybound_dbus_type_variant, value.signature, &iterator) { inner in
                    append(value, to: &inner)
                }
            case .structure(let fields):
                return container(keybound_dbus_type_struct, nil, &iterator) { inner in
                    fields.allSatisfy { append($0, to: &inner) }
                }
            }
        }

        private static func appendString(_ value: String, type: Int32, to iterator: inout DBusMessageIter)
            -> Bool
        {
            value.withCString { pointer in
                var pointer: UnsafePointer<CChar>? = pointer
                return dbus_message_iter_append_basic(&iterator, type, &pointer) != 0
            }
        }

        private static func container(
            _ type: Int32, _ signature: String?, _ iterator: inout DBusMessageIter,
            _ body: (inout DBusMessageIter) -> Bool
        ) -> Bool {
            var inner = DBusMessageIter()
            let opened: Bool
            if let signature {
                opened =
                    signature.withCString { dbus_message_iter_open_container(&iterator, type, $0, &inner) }
                    != 0
            } else {
                opened = dbus_message_iter_open_container(&iterator, type, nil, &inner) != 0
            }
            guard opened else { return false }
            guard body(&inner) else {
                dbus_message_iter_abandon_container(&iterator, &inner)
                return false
            }
            return dbus_message_iter_close_container(&iterator, &inner) != 0
        }

        // MARK: Reading

        private static func read(_ iterator: inout DBusMessageIter) -> DBusValue {
            let type = dbus_message_iter_get_arg_type(&iterator)
            switch type {
            case keybound_dbus_type_string, keybound_dbus_type_object_path:
                var pointer: UnsafePointer<CChar>?
                dbus_message_iter_get_basic(&iterator, &pointer)
                let text = pointer.map { String(cString: $0) } ?? ""
                return type == keybound_dbus_type_string ? .string(text) : .objectPath(text)
            case keybound_dbus_type_boolean:
                var flag: dbus_bool_t = 0
                dbus_message_iter_get_basic(&iterator, &flag)
                return .boolean(flag != 0)
            case keybound_dbus_type_array:
                var inner = DBusMessageIter()
                if dbus_message_iter_get_element_type(&iterator) == keybound_dbus_type_byte {
                    dbus_message_iter_recurse(&iterator, &inner)
                    var base: UnsafeRawPointer?
                    var count: Int32 = 0
                    withUnsafeMutablePointer(to: &base) { pointer in
                        dbus_message_iter_get_fixed_array(&inner, pointer, &count)
                    }
                    guard let base, count > 0 else { return .bytes(Data()) }
                    return .bytes(Data(bytes: base, count: Int(count)))
                }
                return .array(children(&iterator))
            case keybound_dbus_type_struct:
                return .structure(children(&iterator))
            case keybound_dbus_type_dict_entry:
                let pair = children(&iterator)
                guard pair.count == 2 else { return .other }
                return .dictEntry(pair[0], pair[1])
            case keybound_dbus_type_variant:
                var inner = DBusMessageIter()
                dbus_message_iter_recurse(&iterator, &inner)
                return .variant(read(&inner))
            default:
                return .other
            }
        }

        private static func children(_ iterator: inout DBusMessageIter) -> [DBusValue] {
            var inner = DBusMessageIter()
            dbus_message_iter_recurse(&iterator, &inner)
            var values: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&inner) != keybound_dbus_type_invalid {
                values.append(read(&inner))
                dbus_message_iter_next(&inner)
            }
            return values
        }
    }
#endif
