#ifndef KEYBOUND_CSODIUM_SHIM_H
#define KEYBOUND_CSODIUM_SHIM_H
#include <sodium.h>

/// crypto_pwhash_STRBYTES is a chained macro: the size of an encoded Argon2 hash buffer.
static inline size_t kb_pwhash_strbytes(void) { return crypto_pwhash_STRBYTES; }
#endif
