import Foundation
import KeyboundWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure of ``HTTPConnection``.
public struct HTTPClientError: Error, CustomStringConvertible {
    /// What failed.
    public let description: String
    /// Whether the connection failed before any byte of the response arrived (a kept-alive
    /// connection the server had closed fails so on its next request).
    public let beforeResponse: Bool

    /// A failure saying `description`.
    public init(description: String, beforeResponse: Bool = false) {
        self.description = description
        self.beforeResponse = beforeResponse
    }
}

/// One response: status, header fields (names lowercased; only when the connection keeps them)
/// and body.
public struct HTTPResult: Sendable {
    /// The status code.
    public let status: Int
    /// The header fields by lowercased name; empty unless the connection keeps them.
    public let headers: [String: String]
    /// The body (`Content-Length` bytes).
    public let body: Data
}

/// A minimal HTTP/1.1 keep-alive client over one POSIX socket to 127.0.0.1, for the benchmark
/// and the server tests.
///
/// It writes a request, head and body, with one `send`, reads exactly `Content-Length` bytes
/// back and keeps the connection open; after any I/O error it reconnects on the next request.
/// Not thread-safe: one thread uses it at a time. It exists because URLSession on Linux is slow
/// enough to dominate the server the benchmark measures, and because under load it missed a
/// socket's events until its own 30 s timer fired (seen in the server tests: a response picked
/// up 30 s after the server sent it; a request sent again on a new connection without its body).
public final class HTTPConnection {
    private let port: UInt16
    private let timeoutSeconds: Int
    private var socketDescriptor: Int32 = -1
    private var received: HTTPResponseBuffer
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    /// Connects to 127.0.0.1:`port`.
    /// - Parameters:
    ///   - timeoutSeconds: how long a send or a receive may stall before the request fails.
    ///   - keepsHeaders: whether responses carry their header fields (the benchmark skips them).
    public init(port: UInt16, timeoutSeconds: Int = 10, keepsHeaders: Bool = false) throws {
        self.port = port
        self.timeoutSeconds = timeoutSeconds
        received = HTTPResponseBuffer(keepsHeaders: keepsHeaders)
        try open()
    }

    /// Whether the socket is open (it closes after an error or a `Connection: close` answer).
    public var isOpen: Bool { socketDescriptor >= 0 }

    deinit { disconnect() }

    private func open() throws {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw HTTPClientError(description: "socket: errno \(errno)") }
        var one: Int32 = 1
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        // Nothing may hang: a stalled server fails the request.
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            let code = errno
            close(descriptor)
            throw HTTPClientError(description: "connect 127.0.0.1:\(port): errno \(code)")
        }
        socketDescriptor = descriptor
        received.removeAll()
    }

    private func disconnect() {
        if socketDescriptor >= 0 { close(socketDescriptor) }
        socketDescriptor = -1
    }

    /// Sends one request with a JSON body (if any) and waits for its response.
    public func send(
        _ method: String, _ path: String, body: Data? = nil, bearer: String? = nil,
        headers: [String: String] = [:]
    ) throws -> HTTPResult {
        var head = "Accept: application/json\r\n"
        if let bearer { head += "Authorization: Bearer \(bearer)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if body != nil { head += "Content-Type: application/json\r\n" }
        return try exchange(method, path, fields: head, body: body)
    }

    /// Sends one request with exactly these header fields (besides `Host` and, with a body,
    /// `Content-Length`) and waits for its response.
    public func send(_ method: String, _ path: String, exactHeaders headers: [String: String], body: Data?)
        throws -> HTTPResult
    {
        try exchange(method, path, fields: headers.map { "\($0.key): \($0.value)\r\n" }.joined(), body: body)
    }

    private func exchange(_ method: String, _ path: String, fields: String, body: Data?) throws -> HTTPResult
    {
        if socketDescriptor < 0 { try open() }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if let body { bytes.append(contentsOf: body) }
        do {
            try write(bytes)
            return try readResponse()
        } catch {
            disconnect()
            throw error
        }
    }

    private func write(_ bytes: [UInt8]) throws {
        #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)
        #else
            let flags: Int32 = 0
        #endif
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                systemSend(socketDescriptor, buffer.baseAddress! + offset, buffer.count - offset, flags)
            }
            guard sent > 0 else {
                throw HTTPClientError(description: "send: errno \(errno)", beforeResponse: true)
            }
            offset += sent
        }
    }

    private func receiveMore() throws {
        let count = chunk.withUnsafeMutableBytes { buffer in
            recv(socketDescriptor, buffer.baseAddress, buffer.count, 0)
        }
        guard count > 0 else {
            throw HTTPClientError(
                description: count == 0 ? "connection closed" : "recv: errno \(errno)",
                beforeResponse: received.isEmpty)
        }
        received.append(chunk[0..<count])
    }

    private func readResponse() throws -> HTTPResult {
        while true {
            if let (result, closes) = try received.takeResponse() {
                if closes { disconnect() }
                return result
            }
            try receiveMore()
        }
    }
}

extension HTTPConnection {
    /// Sends `body` to `endpoint` (its path with `parameters`) and waits for the response.
    package func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, _ body: Request, parameters: [String] = [],
        bearer: String? = nil, headers: [String: String] = [:]
    ) throws -> HTTPResult {
        try send(endpoint, raw: body.jsonData, parameters: parameters, bearer: bearer, headers: headers)
    }

    /// Sends a request without a body to `endpoint` and waits for the response.
    package func send<Response>(
        _ endpoint: Endpoint<NoBody, Response>, parameters: [String] = [], bearer: String? = nil,
        headers: [String: String] = [:]
    ) throws -> HTTPResult {
        try send(endpoint, raw: nil, parameters: parameters, bearer: bearer, headers: headers)
    }

    /// Sends `body` as it is (nil: none) to `endpoint` and waits for the response: for a body
    /// made once before a measurement.
    package func send<Request, Response>(
        _ endpoint: Endpoint<Request, Response>, raw body: Data?, parameters: [String] = [],
        bearer: String? = nil, headers: [String: String] = [:]
    ) throws -> HTTPResult {
        // A path without parameters is its template: the load generator spends nothing on it.
        let path = parameters.isEmpty ? endpoint.template : endpoint.path(parameters)
        return try send(endpoint.method.rawValue, path, body: body, bearer: bearer, headers: headers)
    }
}

/// Takes HTTP/1.1 responses out of the bytes received so far: a status line, header fields and
/// a `Content-Length` body. ``HTTPConnection`` reads through it, and so do tests that work on a
/// raw socket.
public struct HTTPResponseBuffer {
    private var bytes: [UInt8] = []
    private let keepsHeaders: Bool

    /// - Parameter keepsHeaders: whether responses carry their header fields.
    public init(keepsHeaders: Bool = false) {
        self.keepsHeaders = keepsHeaders
    }

    /// Whether nothing is waiting to be taken.
    public var isEmpty: Bool { bytes.isEmpty }

    /// Adds bytes as they arrived.
    public mutating func append(_ received: ArraySlice<UInt8>) { bytes.append(contentsOf: received) }

    /// Drops what is waiting (the connection it came from is gone).
    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// The next whole response, and whether the server closes the connection after it, taken
    /// out of the buffer; nil while part of it has still to arrive.
    /// - Throws: ``HTTPClientError`` for a malformed status line or a chunked body.
    public mutating func takeResponse() throws -> (result: HTTPResult, closes: Bool)? {
        guard let end = headerEnd() else { return nil }
        // Parsed as bytes: the load generator shares the cores with the server it measures, so
        // it should cost little (Foundation's string trimming once took 2 % of a login run).
        // Split at LF, one byte (the standard library's fast path: splitting at the two bytes
        // CR LF went through a generic collection search that took 12 % of a login run's CPU),
        // then each line's CR dropped.
        let lines = bytes[0..<end].split(separator: 10, omittingEmptySubsequences: false).map {
            $0.last == 13 ? $0.dropLast() : $0
        }
        guard let statusLine = lines.first, statusLine.starts(with: Array("HTTP/1.".utf8)),
            let space = statusLine.firstIndex(of: 32),
            let status = Self.integer(statusLine[(space + 1)...].prefix { $0 != 32 })
        else {
            throw HTTPClientError(description: "bad status line")
        }
        var contentLength = 0
        var closes = false
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = line[..<colon].map { $0 | 0x20 }  // ASCII lower case (header names are tokens)
            let value = line[(colon + 1)...].drop { $0 == 32 || $0 == 9 }
            if keepsHeaders {
                headers[String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
                    .trimmingCharacters(in: .whitespaces)
            }
            if name.elementsEqual("content-length".utf8) {
                contentLength = Self.integer(value.prefix { $0 != 32 && $0 != 9 }) ?? 0
            } else if name.elementsEqual("connection".utf8) {
                closes = value.prefix(5).map({ $0 | 0x20 }).elementsEqual("close".utf8)
            } else if name.elementsEqual("transfer-encoding".utf8) {
                throw HTTPClientError(description: "chunked responses are not supported")
            }
        }
        let total = end + 4 + contentLength
        guard bytes.count >= total else { return nil }
        let body = Data(bytes[(end + 4)..<total])
        bytes.removeFirst(total)
        return (HTTPResult(status: status, headers: headers, body: body), closes)
    }

    /// The index of the blank line ending the header, if it has arrived.
    private func headerEnd() -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13
            && bytes[index + 3] == 10
        {
            return index
        }
        return nil
    }
}

extension HTTPResponseBuffer {
    /// The decimal number `digits` spell, or nil.
    fileprivate static func integer(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= 48, digit <= 57 else { return nil }
            value = value * 10 + Int(digit - 48)
        }
        return value
    }
}

/// The C `send`, which the method of the same name hides inside ``HTTPConnection``.
private func systemSend(_ socket: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
    send(socket, bytes, count, flags)
}
