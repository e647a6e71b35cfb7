#ifndef KEYBOUND_LIBFUZZER_H
#define KEYBOUND_LIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver for programs with a main of their own (LLVM 11 and later), linked in by
/// `-sanitize=fuzzer`. It reads libFuzzer's flags and corpus directories from argv, then fuzzes
/// `callback`, which must return 0. SwiftPM links every executable with its own main, so the
/// harness calls this instead of relying on libFuzzer's main.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
