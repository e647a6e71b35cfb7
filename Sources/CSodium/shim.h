#ifndef KEYBOUND_CSODIUM_SHIM_H
#define KEYBOUND_CSODIUM_SHIM_H
#include <sodium.h>
#endif
