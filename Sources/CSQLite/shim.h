#ifndef KEYBOUND_CSQLITE_SHIM_H
#define KEYBOUND_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
