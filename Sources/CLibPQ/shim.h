#ifndef KEYBOUND_CLIBPQ_SHIM_H
#define KEYBOUND_CLIBPQ_SHIM_H
#include <libpq-fe.h>

/// A notice processor that drops every message: libpq would otherwise print each NOTICE
/// ("relation already exists, skipping") to standard error, beside the server's JSON log.
static void kb_pq_ignore_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/// Installs ``kb_pq_ignore_notice`` on a connection (a C function pointer made in C, so Swift
/// needs no `@convention(c)` closure for it).
static inline void kb_pq_silence_notices(PGconn *conn) {
    PQsetNoticeProcessor(conn, kb_pq_ignore_notice, NULL);
}

/// The five-character SQLSTATE of a failed result, or NULL. PG_DIAG_SQLSTATE is a character
/// literal macro, which Swift does not import.
static inline const char *kb_pq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_SQLSTATE);
}

/// The primary message of a failed result, without the DETAIL line (which can quote values).
static inline const char *kb_pq_primary_message(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
}
#endif
