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
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/param_build.h>
#include <openssl/objects.h>

// OpenSSL's parameter-name macros import into Swift as `String`; passed as `const char *` they
// become temporaries that `OSSL_PARAM` would keep pointing at. These copies live for the whole
// process.
static const char *const keybound_param_group_name = OSSL_PKEY_PARAM_GROUP_NAME;
static const char *const keybound_param_pub_key = OSSL_PKEY_PARAM_PUB_KEY;
static const char *const keybound_param_priv_key = OSSL_PKEY_PARAM_PRIV_KEY;
static const char *const keybound_param_kdf_digest = OSSL_KDF_PARAM_DIGEST;
static const char *const keybound_param_kdf_key = OSSL_KDF_PARAM_KEY;
static const char *const keybound_param_kdf_salt = OSSL_KDF_PARAM_SALT;
static const char *const keybound_param_kdf_info = OSSL_KDF_PARAM_INFO;
static const char *const keybound_param_kdf_password = OSSL_KDF_PARAM_PASSWORD;
static const char *const keybound_param_kdf_iterations = OSSL_KDF_PARAM_ITER;

// Names OpenSSL keeps pointing at after the call: parameter values in OSSL_PARAM, and the key type
// that EVP_PKEY_CTX_new_from_name stores without copying.
static const char *const keybound_key_type_ec = "EC";
static const char *const keybound_curve_p256 = "prime256v1";
static const char *const keybound_digest_sha256 = "SHA256";

// The HMAC digest parameter's name, kept alive like the names above.
static const char *const keybound_param_mac_digest = OSSL_MAC_PARAM_DIGEST;

// `EVP_PKEY_PUBLIC_KEY` is a compound macro, which Swift does not import.
static const int keybound_selection_public_key = EVP_PKEY_PUBLIC_KEY;

// `EVP_EC_gen` is a macro over the variadic `EVP_PKEY_Q_keygen`; Swift imports neither.
static inline EVP_PKEY *keybound_ec_p256_generate(void) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

// KeyboundWebAuthn: RSA public keys from COSE's n and e, Ed25519 keys, X.509 chains.
static const char *const keybound_param_rsa_n = OSSL_PKEY_PARAM_RSA_N;
static const char *const keybound_param_rsa_e = OSSL_PKEY_PARAM_RSA_E;
static const char *const keybound_key_type_rsa = "RSA";
static const char *const keybound_key_type_ed25519 = "ED25519";

// `sk_X509_*` are macros over OPENSSL_sk_* with casts; Swift imports none of them. The stack only
// borrows the certificates: freeing it leaves them to their owners.
static inline STACK_OF(X509) *keybound_x509_stack_new(void) { return sk_X509_new_null(); }
static inline int keybound_x509_stack_push(STACK_OF(X509) *stack, X509 *certificate) {
    return sk_X509_push(stack, certificate);
}
static inline void keybound_x509_stack_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }

// `OPENSSL_free` is a function-like macro (it passes the caller's file and line).
static inline void keybound_openssl_free(void *pointer) { OPENSSL_free(pointer); }

#endif
