import CMicroHTTPD
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Options of the HTTP listener.
struct HTTPDaemonOptions {
    var host: String
    var port: UInt16
    var threads: Int
    /// Threads that run request handlers (see ``HandlerThreads``).
    var handlerThreads: Int
    /// Idle connections are closed after this many seconds without a byte (libmicrohttpd's timeout).
    var connectionTimeoutSeconds: Int
    /// A request must arrive whole, and a response leave, within this many seconds (see
    /// ``ConnectionGuard``).
    var requestTimeoutSeconds: Int
    /// Live connections at most; a newcomer beyond it displaces one (see ``ConnectionGuard``).
    var connectionLimit: Int
    /// Open connections allowed per client network (IPv4 address, IPv6 /64); 0 for no limit.
    var perClientConnectionLimit: Int
    /// Open connections allowed per IPv6 /56; 0 for no limit.
    var perSlash56ConnectionLimit = 0
    /// Open connections allowed per IPv6 /48; 0 for no limit.
    var perSlash48ConnectionLimit = 0
    var bodyLimit: Int
    var tlsKeyPEM: String?
    var tlsCertificatePEM: String?
}

/// Errors starting the listener.
struct HTTPDaemonError: Error, CustomStringConvertible {
    /// The failure as the server reports it.
    let kind: ServerError.Kind
    let description: String
}

/// What the C callbacks reach through their `cls` pointer.
private final class DaemonContext: Sendable {
    let bodyLimit: Int
    let handler: @Sendable (HTTPRequest) -> HTTPResponse
    /// Whether a request is answered on libmicrohttpd's thread rather than a handler thread.
    let answersAtOnce: @Sendable (HTTPRequest) -> Bool
    let connections: ConnectionGuard
    let handlers: HandlerThreads
    /// Requests between their first callback and their completion notice.
    let inFlight = Locked(0)
    /// Connections suspended while a handler thread works on their request, and whether the
    /// daemon is stopping (then no connection may be suspended any more: libmicrohttpd aborts
    /// the process when it stops with one). One lock for both, so that a request is either
    /// counted before it is suspended or answered without suspending.
    let suspensions = Locked(Suspensions())

    init(
        bodyLimit: Int, connections: ConnectionGuard, handlers: HandlerThreads,
        answersAtOnce: @escaping @Sendable (HTTPRequest) -> Bool,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) {
        self.bodyLimit = bodyLimit
        self.connections = connections
        self.handlers = handlers
        self.answersAtOnce = answersAtOnce
        self.handler = handler
    }
}

/// See ``DaemonContext/suspensions``.
struct Suspensions {
    /// Connections suspended now (counted before `MHD_suspend_connection`).
    var count = 0
    /// Set once the daemon stops: requests are answered on libmicrohttpd's thread from then on.
    var closed = false
}

/// Per-request state kept in libmicrohttpd's `con_cls` slot while the body arrives.
private final class RequestState {
    var body = Data()
    var exceeded = false
    /// Whether the request went to a handler thread (its connection is suspended until then).
    var handed = false
    /// The handler's answer, set on the handler thread before it resumes the connection.
    let response = Locked<HTTPResponse?>(nil)
}

/// A libmicrohttpd connection handle, to resume it from a handler thread.
///
/// `@unchecked Sendable` is safe because the handle is only used for `MHD_resume_connection`,
/// which libmicrohttpd allows from any thread, while the connection is suspended (it cannot be
/// freed then).
private struct SuspendedConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A request's header fields or query parameters, names lowercased, and the names given more
/// than once (the last value is kept).
private struct CollectedValues {
    var values: [String: String] = [:]
    var repeated: Set<String> = []
}

private func collectValues(_ connection: OpaquePointer, kind: MHD_ValueKind) -> CollectedValues {
    var collected = CollectedValues()
    withUnsafeMutablePointer(to: &collected) { pointer in
        _ = MHD_get_connection_values(connection, kind, collectIterator, pointer)
    }
    return collected
}

private let collectIterator: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let collected = cls.assumingMemoryBound(to: CollectedValues.self)
    let name = String(cString: key).lowercased()
    if collected.pointee.values.updateValue(value.map { String(cString: $0) } ?? "", forKey: name) != nil {
        collected.pointee.repeated.insert(name)
    }
    return .YES
}

private let accessHandler: MHD_AccessHandlerCallback = {
    cls, connection, url, method, _, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let url, let method, let uploadDataSize, let conCls else { return .NO }
    let context = Unmanaged<DaemonContext>.fromOpaque(cls).takeUnretainedValue()

    // Step 1: the first call carries only the headers. Create the per-request state.
    guard let statePointer = conCls.pointee else {
        let state = RequestState()
        conCls.pointee = Unmanaged.passRetained(state).toOpaque()
        context.inFlight.withLock { $0 += 1 }
        if let length = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length"),
            let declared = Int(String(cString: length)), declared > context.bodyLimit
        {
            // Answer 413 now, without reading the body: a response queued at this point makes
            // libmicrohttpd skip the body and close the connection after sending it.
            state.exceeded = true
            return respond(context, connection, url: url, method: method, state: state)
        }
        return .YES
    }
    let state = Unmanaged<RequestState>.fromOpaque(statePointer).takeUnretainedValue()

    // Step 2: body chunks. Keep at most the limit; beyond it (a chunked body of undeclared
    // length), read and discard until the end or the request deadline.
    if uploadDataSize.pointee > 0 {
        let size = uploadDataSize.pointee
        if !state.exceeded, let uploadData {
            if state.body.count + size > context.bodyLimit {
                state.exceeded = true
                state.body = Data()
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: size) {
                    state.body.append($0, count: size)
                }
            }
        }
        uploadDataSize.pointee = 0
        return .YES
    }

    // Step 4: a handler thread answered and resumed the connection: send the answer.
    if let response = state.response.withLock({ $0 }) { return queue(response, on: connection, context) }
    guard !state.handed else { return .YES }

    // Step 3: the whole request is here. Answer it here if it cannot wait long; otherwise hand
    // it to a handler thread and suspend the connection, so that this thread goes on with other
    // connections while the request waits (for its group commit, most of all).
    guard context.connections.requestArrived(connection) else { return .NO }
    let request = makeRequest(connection, url: url, method: method, state: state)
    state.handed = true
    if context.answersAtOnce(request) { return queue(context.handler(request), on: connection, context) }
    let mayWait = context.suspensions.withLock { suspensions in
        guard !suspensions.closed else { return false }
        suspensions.count += 1
        return true
    }
    // The daemon is stopping: answer on this thread, as nothing may be suspended any more.
    guard mayWait else { return queue(context.handler(request), on: connection, context) }
    MHD_suspend_connection(connection)
    let suspended = SuspendedConnection(pointer: connection)
    context.handlers.run { [response = state.response] in
        let answer = context.handler(request)
        response.withLock { $0 = answer }
        MHD_resume_connection(suspended.pointer)
        // libmicrohttpd's own stop moves a connection it was asked to resume out of its
        // suspended list, so it may stop from here on.
        context.suspensions.withLock { $0.count -= 1 }
    }
    return .YES
}

/// Answers on this thread (a refusal before the body arrives), unless the request arrived after
/// its deadline.
private func respond(
    _ context: DaemonContext, _ connection: OpaquePointer, url: UnsafePointer<CChar>,
    method: UnsafePointer<CChar>,
    state: RequestState
) -> MHD_Result {
    guard context.connections.requestArrived(connection) else { return .NO }
    return queue(
        context.handler(makeRequest(connection, url: url, method: method, state: state)), on: connection,
        context)
}

/// The request as the router sees it.
private func makeRequest(
    _ connection: OpaquePointer, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>, state: RequestState
) -> HTTPRequest {
    var address = [CChar](repeating: 0, count: 64)
    let clientAddress =
        kb_mhd_client_address(connection, &address, address.count) == 0
        ? String(decoding: address.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        : "unknown"
    // libmicrohttpd has split the query off and percent-decoded the path: take it as it is.
    let query = collectValues(connection, kind: .GET_ARGUMENT_KIND)
    let headers = collectValues(connection, kind: .HEADER_KIND)
    var request = HTTPRequest(
        method: String(cString: method), decodedPath: String(cString: url), query: query.values,
        headers: headers.values, body: state.body, clientAddress: clientAddress)
    request.bodyExceededLimit = state.exceeded
    request.repeatedQueryNames = query.repeated
    request.repeatedHeaderNames = headers.repeated
    return request
}

/// Queues the response; from then on it must leave within the request timeout.
private func queue(_ response: HTTPResponse, on connection: OpaquePointer, _ context: DaemonContext)
    -> MHD_Result
{
    let created = response.body.withUnsafeBytes { buffer in
        MHD_create_response_from_buffer(
            buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let mhdResponse = created else { return .NO }
    defer { MHD_destroy_response(mhdResponse) }
    for (name, value) in response.headers where MHD_add_response_header(mhdResponse, name, value) != .YES {
        return .NO
    }
    let queued = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    if queued == .YES { context.connections.responseQueued(connection) }
    return queued
}

private let completedHandler: MHD_RequestCompletedCallback = { cls, connection, conCls, _ in
    guard let cls, let conCls, let statePointer = conCls.pointee else { return }
    let context = Unmanaged<DaemonContext>.fromOpaque(cls).takeUnretainedValue()
    if let connection { context.connections.requestCompleted(connection) }
    Unmanaged<RequestState>.fromOpaque(statePointer).release()
    conCls.pointee = nil
    context.inFlight.withLock { $0 -= 1 }
}

private let connectionHandler: MHD_NotifyConnectionCallback = { cls, connection, _, notice in
    guard let cls, let connection else { return }
    let context = Unmanaged<DaemonContext>.fromOpaque(cls).takeUnretainedValue()
    switch notice {
    case .CONNECTION_NOTIFY_STARTED: context.connections.opened(connection)
    case .CONNECTION_NOTIFY_CLOSED: context.connections.closed(connection)
    @unknown default: break
    }
}

/// The libmicrohttpd daemon: a pool of worker threads accepting HTTP/1.1 (optionally TLS) on one
/// address, handing each complete request to a synchronous handler.
///
/// `@unchecked Sendable` is safe because the stored C handles (the daemon, the TLS strings it
/// reads) are created in `init`, never mutated, and freed once: `stop()` runs under `stopped`'s
/// lock, and `deinit` runs when no other reference exists. libmicrohttpd itself is thread-safe
/// for `MHD_quiesce_daemon`/`MHD_stop_daemon` called from one thread.
final class HTTPDaemon: @unchecked Sendable {
    private let daemon: OpaquePointer
    private let context: Unmanaged<DaemonContext>
    private let tlsKey: UnsafeMutablePointer<CChar>?
    private let tlsCertificate: UnsafeMutablePointer<CChar>?
    private let stopped = Locked(false)
    /// The port the daemon listens on (the real one when 0 was asked for).
    let port: UInt16

    /// - Parameters:
    ///   - answersAtOnce: which requests are answered on libmicrohttpd's thread that read them
    ///     (they must not wait long); every other one goes to a handler thread.
    ///   - handler: answers a request.
    init(
        options: HTTPDaemonOptions, answersAtOnce: @escaping @Sendable (HTTPRequest) -> Bool = { _ in false },
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws {
        var storage = sockaddr_storage()
        let family = kb_make_sockaddr(options.host, options.port, &storage)
        guard family >= 0 else {
            throw HTTPDaemonError(
                kind: .cannotListen,
                description: "listen address \(options.host) is not a numeric IPv4 or IPv6 address")
        }
        // poll(2), not epoll: with epoll, libmicrohttpd 0.9.75's MHD_quiesce_daemon removes the
        // listening socket from each worker's epoll set while the worker may be removing it
        // too, and the loser aborts the process ("Failed to remove listen FD from epoll set",
        // still so upstream; DaemonStopTests reproduces it). With poll, quiescing only signals each
        // worker. A worker polls its own connections only, so poll costs little here.
        var flags =
            MHD_USE_POLL_INTERNAL_THREAD.rawValue | MHD_USE_ITC.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if family == AF_INET6 { flags |= MHD_USE_IPv6.rawValue }
        var tlsKey: UnsafeMutablePointer<CChar>?
        var tlsCertificate: UnsafeMutablePointer<CChar>?
        if let key = options.tlsKeyPEM, let certificate = options.tlsCertificatePEM {
            guard MHD_is_feature_supported(.FEATURE_TLS) == .YES else {
                throw HTTPDaemonError(kind: .tls, description: "this libmicrohttpd was built without TLS")
            }
            flags |= MHD_USE_TLS.rawValue
            tlsKey = strdup(key)
            tlsCertificate = strdup(certificate)
        }
        let connections = ConnectionGuard(
            requestTimeoutSeconds: options.requestTimeoutSeconds, connectionLimit: options.connectionLimit,
            caps: NetworkCaps(
                address: options.perClientConnectionLimit, slash56: options.perSlash56ConnectionLimit,
                slash48: options.perSlash48ConnectionLimit))
        let handlers = HandlerThreads(count: options.handlerThreads)
        let context = Unmanaged.passRetained(
            DaemonContext(
                bodyLimit: options.bodyLimit, connections: connections, handlers: handlers,
                answersAtOnce: answersAtOnce, handler: handler))
        // Above the guard's own limit, so that the guard can admit a newcomer before libmicrohttpd
        // stops accepting (see ``ConnectionGuard``).
        let limit = ConnectionGuard.libmicrohttpdLimit(
            connectionLimit: options.connectionLimit, threads: options.threads)
        let started = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                kb_mhd_start(
                    flags, address, UInt32(max(1, options.threads)), UInt32(options.connectionTimeoutSeconds),
                    UInt32(limit), 64 * 1024, accessHandler, context.toOpaque(),
                    completedHandler, connectionHandler, context.toOpaque(), tlsKey, tlsCertificate)
            }
        }
        guard let started else {
            // libmicrohttpd returns no reason; bind(2) left it in errno.
            let reason = errno
            connections.stop()
            handlers.stop()
            context.release()
            free(tlsKey)
            free(tlsCertificate)
            let address = "\(options.host):\(options.port)"
            if reason == EADDRINUSE {
                throw HTTPDaemonError(
                    kind: .addressInUse, description: "\(address) is in use by another process")
            }
            if tlsKey != nil {
                throw HTTPDaemonError(
                    kind: .tls, description: "cannot listen on \(address) with this TLS key and certificate")
            }
            throw HTTPDaemonError(
                kind: .cannotListen,
                description: "cannot listen on \(address): \(String(cString: strerror(reason)))")
        }
        daemon = started
        self.context = context
        self.tlsKey = tlsKey
        self.tlsCertificate = tlsCertificate
        port = kb_mhd_bound_port(started)
    }

    /// Stops accepting connections, lets requests in flight finish (up to `gracePeriod`), then
    /// stops the worker threads. Safe to call more than once.
    func stop(gracePeriod: TimeInterval = 5) {
        let first = stopped.withLock { alreadyStopped in
            defer { alreadyStopped = true }
            return !alreadyStopped
        }
        guard first else { return }
        let listener = MHD_quiesce_daemon(daemon)
        let deadline = Date().addingTimeInterval(gracePeriod)
        while context.takeUnretainedValue().inFlight.withLock({ $0 }) > 0, Date() < deadline {
            usleep(10_000)
        }
        // libmicrohttpd must not stop with a suspended connection: suspend no more, and let the
        // handlers that are still at work finish (each does in bounded time: a write waits at
        // most the busy timeout).
        context.takeUnretainedValue().suspensions.withLock { $0.closed = true }
        while context.takeUnretainedValue().suspensions.withLock({ $0.count }) > 0 { usleep(1000) }
        MHD_stop_daemon(daemon)
        context.takeUnretainedValue().connections.stop()
        context.takeUnretainedValue().handlers.stop()
        if listener >= 0 { close(listener) }
    }

    deinit {
        stop(gracePeriod: 0)
        context.release()
        free(tlsKey)
        free(tlsCertificate)
    }
}
