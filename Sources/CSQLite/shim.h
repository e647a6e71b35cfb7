#ifndef KEYBOUND_CSQLITE_SHIM_H
#define KEYBOUND_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro (not imported by Swift): SQLite copies the bound value.
static inline sqlite3_destructor_type kb_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
