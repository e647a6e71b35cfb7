#ifndef KEYBOUND_CTSS2_SHIM_H
#define KEYBOUND_CTSS2_SHIM_H
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

// The property tags and response codes below are compound macros (a constant plus an offset),
// which Swift does not import; these copies are the same values under the headers' own names.

static const TPM2_PT keybound_pt_permanent = TPM2_PT_PERMANENT;
static const TPM2_PT keybound_pt_lockout_counter = TPM2_PT_LOCKOUT_COUNTER;
static const TPM2_PT keybound_pt_max_auth_fail = TPM2_PT_MAX_AUTH_FAIL;
static const TPM2_PT keybound_pt_lockout_interval = TPM2_PT_LOCKOUT_INTERVAL;

// Response codes of the TPM itself, without a handle, session or parameter number.
static const TPM2_RC keybound_rc_initialize = TPM2_RC_INITIALIZE;
static const TPM2_RC keybound_rc_disabled = TPM2_RC_DISABLED;
static const TPM2_RC keybound_rc_auth_missing = TPM2_RC_AUTH_MISSING;
static const TPM2_RC keybound_rc_auth_fail = TPM2_RC_AUTH_FAIL;
static const TPM2_RC keybound_rc_bad_auth = TPM2_RC_BAD_AUTH;
static const TPM2_RC keybound_rc_integrity = TPM2_RC_INTEGRITY;
static const TPM2_RC keybound_rc_binding = TPM2_RC_BINDING;
static const TPM2_RC keybound_rc_policy_fail = TPM2_RC_POLICY_FAIL;
static const TPM2_RC keybound_rc_ecc_point = TPM2_RC_ECC_POINT;
static const TPM2_RC keybound_rc_hierarchy = TPM2_RC_HIERARCHY;
static const TPM2_RC keybound_rc_lockout = TPM2_RC_LOCKOUT;
static const TPM2_RC keybound_rc_object_memory = TPM2_RC_OBJECT_MEMORY;
static const TPM2_RC keybound_rc_session_memory = TPM2_RC_SESSION_MEMORY;
static const TPM2_RC keybound_rc_retry = TPM2_RC_RETRY;
static const TPM2_RC keybound_rc_yielded = TPM2_RC_YIELDED;
static const TPM2_RC keybound_rc_testing = TPM2_RC_TESTING;
static const TPM2_RC keybound_rc_canceled = TPM2_RC_CANCELED;

// Software layers of the TPM software stack (TSS2_RC bits 16–23).
static const TSS2_RC keybound_rc_layer_mask = TSS2_RC_LAYER_MASK;
static const TSS2_RC keybound_rc_layer_tpm = TSS2_TPM_RC_LAYER;
static const TSS2_RC keybound_rc_layer_esys = TSS2_ESAPI_RC_LAYER;
static const TSS2_RC keybound_rc_layer_tcti = TSS2_TCTI_RC_LAYER;
static const TSS2_RC keybound_rc_layer_resmgr = TSS2_RESMGR_RC_LAYER;
static const TSS2_RC keybound_rc_layer_resmgr_tpm = TSS2_RESMGR_TPM_RC_LAYER;
#endif
