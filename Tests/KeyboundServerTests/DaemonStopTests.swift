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
                        guard let connection = try? RawConnection(port: port) else { return }
                        connection.send(
                            "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                        if connection.response()?.status == 200 { answered.withLock { $0 += 1 } }
                    }
                }
            }
            while answered.withLock({ $0 }) < 50 { usleep(1000) }
            daemon.stop(gracePeriod: 1)
            stopping.withLock { $0 = true }
            while finished.withLock({ $0 }) < clients { usleep(1000) }
            // Stopped for good: nothing listens on the port any more.
            #expect((try? RawConnection(port: port)) == nil)
        }
    }
}
