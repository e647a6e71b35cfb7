import Foundation
import Testing

@testable import KeyboundServer

/// Stopping the HTTP daemon while clients keep connecting. libmicrohttpd 0.9.75's
/// `MHD_quiesce_daemon` removes the listening socket from each worker's epoll set while that
/// worker may be removing it too (it does when it sees the quiesce flag or reaches the
/// connection limit); the loser's `epoll_ctl` fails with ENOENT and libmicrohttpd aborts the
/// process ("Failed to remove listen FD from epoll set"). The daemon polls with poll(2), where
/// quiescing only signals each worker, so a stop under load ends cleanly. A regression aborts the
/// test process, which fails the run.
@Suite(.serialized)
struct DaemonStopTests {
    @Test func stoppingUnderLoadNeverAbortsTheProcess() throws {
        for _ in 0..<300 {
            let daemon = try HTTPDaemon(
                options: HTTPDaemonOptions(
                    host: "127.0.0.1", port: 0, threads: 4, handlerThreads: 4, connectionTimeoutSeconds: 5,
                    requestTimeoutSeconds: 5, connectionLimit: 8, perClientConnectionLimit: 0,
                    bodyLimit: 1024,
                    tlsKeyPEM: nil, tlsCertificatePEM: nil)
            ) { _ in HTTPResponse(status: 200, body: Data("ok".utf8)) }
            let port = daemon.port
            let answered = Locked(0)
            let stopping = Locked(false)
            let finished = Locked(0)
            let clients = 12
            // Threads of their own: blocking sockets must not occupy the shared dispatch pool.
            for _ in 0..<clients {
                Thread.detachNewThread {
                    defer { finished.withLock { $0 += 1 } }
                    while !stopping.withLock({ $0 }) {
                        // Refused before the stop only when the machine is short of something
                        // (ports, descriptors): try again; after it, the daemon is gone.
                        guard let connection = try? RawConnection(port: port) else {
                            usleep(1000)
                            continue
                        }
                        connection.send(
                            "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                        if connection.response()?.status == 200 { answered.withLock { $0 += 1 } }
                    }
                }
            }
            // Under load, or after 10 s whatever the clients managed: the stop is what is tested.
            let deadline = Date().addingTimeInterval(10)
            while answered.withLock({ $0 }) < 50, Date() < deadline { usleep(1000) }
            daemon.stop(gracePeriod: 1)
            stopping.withLock { $0 = true }
            while finished.withLock({ $0 }) < clients { usleep(1000) }
            // Stopped for good: nothing listens on the port any more.
            #expect((try? RawConnection(port: port)) == nil)
        }
    }

    /// Both ways a request is answered, mixed on kept-alive connections under load: at once on
    /// libmicrohttpd's thread, or on a handler thread while its connection is suspended (some
    /// quickly, some after a wait, as a group commit would). Each request gets its own answer and
    /// none is lost (a lost resume would leave a connection silent until the client gives up);
    /// the daemon then stops with requests still on handler threads.
    @Test func everyHandOffAnswersEachRequestOnceAndStopsCleanly() throws {
        let daemon = try HTTPDaemon(
            options: HTTPDaemonOptions(
                host: "127.0.0.1", port: 0, threads: 2, handlerThreads: 4, connectionTimeoutSeconds: 10,
                requestTimeoutSeconds: 10, connectionLimit: 64, perClientConnectionLimit: 0, bodyLimit: 1024,
                tlsKeyPEM: nil, tlsCertificatePEM: nil),
            answersAtOnce: { $0.path == "/now" },
            handler: { request in
                if request.path == "/waits" { usleep(UInt32.random(in: 0...300)) }
                return HTTPResponse(status: 200, body: Data((request.query["n"] ?? "").utf8))
            })
        let port = daemon.port
        let paths = ["/now", "/handler", "/waits"]
        let clients = 16
        let requestsEach = 200
        let wrong = Locked<[String]>([])
        let done = DispatchGroup()
        for client in 0..<clients {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                guard let connection = try? RawConnection(port: port) else {
                    return wrong.withLock { $0.append("client \(client) could not connect") }
                }
                for index in 0..<requestsEach {
                    let n = "\(client)-\(index)"
                    let path = paths[(client + index) % paths.count]
                    connection.send("GET \(path)?n=\(n) HTTP/1.1\r\nHost: x\r\n\r\n")
                    guard let response = connection.response() else {
                        return wrong.withLock { $0.append("\(path)?n=\(n): no answer within 10 s") }
                    }
                    if response.status != 200 || String(decoding: response.body, as: UTF8.self) != n {
                        wrong.withLock { $0.append("\(path)?n=\(n): \(response.status) \(response.body)") }
                    }
                }
            }
        }
        done.wait()
        #expect(wrong.withLock { $0 } == [])

        // Stop while requests are still on handler threads: the stop lets them finish, then ends.
        // A request the stop cut off gets no answer; one that gets an answer gets its own.
        let stopping = Locked(false)
        for client in 0..<clients {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var index = 0
                while !stopping.withLock({ $0 }), let connection = try? RawConnection(port: port) {
                    let n = "stop-\(client)-\(index)"
                    let path = paths[client % paths.count]
                    index += 1
                    connection.send("GET \(path)?n=\(n) HTTP/1.1\r\nHost: x\r\n\r\n")
                    if let response = connection.response(),
                        response.status != 200 || String(decoding: response.body, as: UTF8.self) != n
                    {
                        wrong.withLock { $0.append("\(path)?n=\(n) while stopping: \(response.status)") }
                    }
                }
            }
        }
        usleep(50_000)
        daemon.stop(gracePeriod: 1)
        stopping.withLock { $0 = true }
        done.wait()
        #expect(wrong.withLock { $0 } == [])
        #expect((try? RawConnection(port: port)) == nil)
    }
}
