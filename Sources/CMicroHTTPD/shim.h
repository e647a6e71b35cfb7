#ifndef KEYBOUND_CMICROHTTPD_SHIM_H
#define KEYBOUND_CMICROHTTPD_SHIM_H
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <microhttpd.h>

/// MHD_start_daemon is variadic (not imported by Swift): this wrapper passes a fixed option set.
/// `tls_key`/`tls_cert` are PEM strings (both NULL for plain HTTP); they must stay alive until
/// the daemon stops, which the Swift owner guarantees. Clients are parsed strictly
/// (MHD_OPTION_STRICT_FOR_CLIENT: for one, an HTTP/1.1 request without `Host` gets 400).
static inline struct MHD_Daemon *kb_mhd_start(
    unsigned int flags, const struct sockaddr *addr, unsigned int pool_size,
    unsigned int timeout_seconds, unsigned int connection_limit, size_t memory_limit,
    MHD_AccessHandlerCallback handler, void *handler_cls,
    MHD_RequestCompletedCallback completed, MHD_NotifyConnectionCallback connection_notice,
    void *notice_cls, const char *tls_key, const char *tls_cert) {
    struct MHD_OptionItem ops[10];
    int i = 0;
    ops[i++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)addr};
    ops[i++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)timeout_seconds, NULL};
    ops[i++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)connection_limit, NULL};
    ops[i++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)memory_limit, NULL};
    ops[i++] = (struct MHD_OptionItem){MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL};
    if (pool_size > 1) {
        ops[i++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)pool_size, NULL};
    }
    if (tls_key != NULL && tls_cert != NULL) {
        ops[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)tls_key};
        ops[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)tls_cert};
    }
    ops[i++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, notice_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, connection_notice, notice_cls,
                            MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
}

/// MHD_get_daemon_info is variadic: the port the daemon is bound to (useful after port 0), or 0.
static inline uint16_t kb_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// MHD_get_daemon_info is variadic: the number of open connections.
static inline unsigned int kb_mhd_connection_count(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

/// MHD_get_connection_info is variadic: writes the peer's numeric address into `buf`.
/// Returns 0 on success, -1 when unknown.
static inline int kb_mhd_client_address(struct MHD_Connection *connection, char *buf, size_t len) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || len == 0) return -1;
    const struct sockaddr *sa = info->client_addr;
    const char *out = NULL;
    if (sa->sa_family == AF_INET) {
        out = inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
    } else if (sa->sa_family == AF_INET6) {
        out = inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
    }
    return out == NULL ? -1 : 0;
}

/// MHD_get_connection_info is variadic: the connection's socket, or -1 when unknown.
static inline int kb_mhd_connection_socket(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// The network a client's connections are counted under, written to `out`: the IPv4 address
/// (also when it arrives IPv4-mapped over IPv6) or the IPv6 /64 prefix, since one IPv6 client
/// usually holds a whole /64. Returns the number of bytes written (4 or 8), or -1 when unknown.
static inline int kb_mhd_client_network(struct MHD_Connection *connection, uint8_t out[8]) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) return -1;
    const struct sockaddr *sa = info->client_addr;
    if (sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) {
            memcpy(out, v6->s6_addr + 12, 4);
            return 4;
        }
        memcpy(out, v6->s6_addr, 8);
        return 8;
    }
    return -1;
}

/// Fills a sockaddr for `host` (numeric IPv4 or IPv6) and `port`. Returns the address family
/// (AF_INET or AF_INET6) or -1 when `host` is not a numeric address.
static inline int kb_make_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *out) {
    memset(out, 0, sizeof(*out));
    struct sockaddr_in *v4 = (struct sockaddr_in *)out;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        return AF_INET;
    }
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        return AF_INET6;
    }
    return -1;
}
#endif
