#ifndef KEYBOUND_CSQLITE_SHIM_H
#define KEYBOUND_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro (not imported by Swift): SQLite copies the bound value.
static inline sqlite3_destructor_type kb_sqlite_transient(void) { return SQLITE_TRANSIENT; }

/// Turns off SQLite's memory statistics, which the server never reads: while they are on, every
/// allocation of every connection takes one process-wide mutex, on which the threads that read
/// in parallel queue (`sqlite3_config` is variadic, so Swift cannot call it). Only possible before
/// SQLite initializes itself; returns SQLITE_MISUSE after that.
static inline int kb_sqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
