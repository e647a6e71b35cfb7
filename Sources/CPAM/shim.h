#ifndef KEYBOUND_CPAM_SHIM_H
#define KEYBOUND_CPAM_SHIM_H
// Linux-PAM's application interface: pam_start_confdir (Linux-PAM 1.4 and later), pam_authenticate,
// pam_acct_mgmt, pam_strerror, and the conversation types. Every name Swift needs imports as is.
#include <security/pam_appl.h>
#endif
