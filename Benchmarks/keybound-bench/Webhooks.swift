import Foundation
import KeyboundServer
import KeyboundTestSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A webhook receiver on 127.0.0.1 that answers every request `200` at once and counts them:
/// keep-alive HTTP/1.1 over POSIX sockets, a thread per connection.
///
/// `@unchecked Sendable`: the listening socket is a C handle set once in `init`; the count is
/// behind a lock.
final class LoopbackReceiver: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let count = NSLock()
    private var received = 0

    /// Deliveries answered so far.
    var deliveries: Int {
        count.lock()
        defer { count.unlock() }
        return received
    }

    init() throws {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && listen(descriptor, 64) == 0
                    && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard descriptor >= 0, listening else {
            close(descriptor)
            throw HTTPClientError(description: "no receiver socket")
        }
        listener = descriptor
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread.detachNewThread { [self] in serve(connection) }
            }
        }
    }

    deinit { close(listener) }

    /// Answers each request on `connection` (head, then `Content-Length` bytes) until it closes.
    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)
        while true {
            // One request: its head ends with CRLF CRLF; its body is Content-Length bytes.
            while true {
                if let end = Self.headEnd(buffer) {
                    let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                    let length =
                        head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap {
                            Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                        }
                        ?? 0
                    if buffer.count >= end + 4 + length {
                        buffer.removeFirst(end + 4 + length)
                        break
                    }
                }
                let read = recv(connection, &chunk, chunk.count, 0)
                guard read > 0 else { return }
                buffer.append(contentsOf: chunk[..<read])
            }
            count.lock()
            received += 1
            count.unlock()
            guard send(connection, answer, answer.count, 0) == answer.count else { return }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10
        {
            return index
        }
        return nil
    }
}

/// Device logins with and without one webhook endpoint registered (issue 24, item 7).
struct WebhookNumbers {
    let without: LoadResult
    let with: LoadResult
    let clients: Int
    /// Deliveries the receiver answered, and how many were written, once the backlog drained.
    let delivered: Int
    let written: Int
    let drainSeconds: Double

    var ratio: Double { without.perSecond > 0 ? with.perSecond / without.perSecond : 0 }
}

extension Benchmark {
    /// Two servers, one with an endpoint that takes every event type (receiving on loopback,
    /// answering 200), their device logins in alternating rounds. A device login emits an event
    /// there: it replaces the session its client held before, a `session.revoked` (reason
    /// `replaced`) that is written in the login's transaction and delivered while the logins go
    /// on. So the figure prices the outbox write in the login and the deliveries beside it.
    func measureWebhookLogins() throws {
        let plain = configuration("webhooks-off", synchronous: options.synchronous)
        var hooked = configuration("webhooks-on", synchronous: options.synchronous)
        hooked.allowPrivateWebhooks = true
        let receiver = try LoopbackReceiver()
        let url = "http://127.0.0.1:\(receiver.port)/hook"
        _ = try WebhookAdministration(configuration: hooked).add(
            url: url, events: WebhookEventType.known.map(\.rawValue))
        let (plainServer, plainPort) = try start(plain)
        defer { plainServer.stop(gracePeriod: 1) }
        let (hookedServer, hookedPort) = try start(hooked)
        defer { hookedServer.stop(gracePeriod: 1) }
        let plainClients = try deviceClients(port: plainPort, tag: "webhooks-off")
        let hookedClients = try deviceClients(port: hookedPort, tag: "webhooks-on")
        progress(
            "device-key logins without and with a webhook endpoint alternating, \(plainClients.count) clients, "
                + "\(2 * durations.growthRounds) x \(durations.growthRoundSeconds) s each")
        let (without, with) = alternate(
            plainClients, hookedClients, rounds: 2 * durations.growthRounds,
            roundSeconds: durations.growthRoundSeconds, warmup: durations.warmup)
        // Every event written is delivered: wait (up to 30 s) for the backlog to drain.
        let administration = try WebhookAdministration(configuration: hooked)
        let started = nanoseconds()
        var deliveries = try administration.deliveries(url: url, limit: 1_000_000)
        while deliveries.contains(where: { $0.status != "delivered" }), seconds(since: started) < 30 {
            usleep(100_000)
            deliveries = try administration.deliveries(url: url, limit: 1_000_000)
        }
        report.webhooks = WebhookNumbers(
            without: without, with: with, clients: plainClients.count, delivered: receiver.deliveries,
            written: deliveries.count, drainSeconds: seconds(since: started))
    }
}

extension Report {
    /// Issue 24, item 7: device logins with one webhook endpoint ≥ 0.9 × without.
    var webhookVerdicts: [Verdict] {
        guard let numbers = webhooks else { return [] }
        return [
            Verdict(
                number: "24.7", id: "webhook_device_logins",
                title: "device logins/s with one webhook endpoint / without", ratio: numbers.ratio,
                comparison: ">=", target: 0.9, stretch: nil,
                details: [
                    "\(f(numbers.with.perSecond, 0))/s with vs \(f(numbers.without.perSecond, 0))/s without, "
                        + "alternating rounds, \(numbers.clients) clients, SQLite synchronous=\(options.synchronous.rawValue)",
                    "each login with the endpoint writes one event (session.revoked, the client's previous "
                        + "session replaced) and its delivery; \(numbers.written) written, \(numbers.delivered) "
                        + "answered by the loopback receiver, drained \(f(numbers.drainSeconds, 1)) s after the rounds",
                    "with: \(Self.spread(numbers.with)), \(failures(numbers.with)); without: "
                        + "\(Self.spread(numbers.without)), \(failures(numbers.without))",
                ],
                numbers: [
                    "with_per_second": numbers.with.perSecond,
                    "without_per_second": numbers.without.perSecond,
                    "events_written": numbers.written, "events_delivered": numbers.delivered,
                    "drain_seconds": numbers.drainSeconds, "clients": numbers.clients,
                ])
        ]
    }
}
