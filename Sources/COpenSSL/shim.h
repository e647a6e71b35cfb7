#ifndef KEYBOUND_COPENSSL_SHIM_H
#define KEYBOUND_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/x509.h>
#include <openssl/bn.h>
#endif
