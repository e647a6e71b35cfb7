#!/usr/bin/env python3
"""Writes the seed corpora in Fuzz/Corpus/<harness>/ from real inputs (docs/fuzzing.md).

    python3 Fuzz/make-corpus.py

Sources: the test vectors in Tests/*/Vectors (Wycheproof ECDSA; WebAuthn and App Attest
registrations, authentications and attestations from real authenticators, see their SOURCE.md),
valid Server API v1 bodies and requests, and state files written by the emulator. Each input is
framed the way its harness reads it (see the harness's doc comment). Running it again gives the
same files; it never touches .build/fuzz/corpus, where the fuzzer keeps what it finds.
"""

import base64
import hashlib
import json
import os
import shutil
import struct
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "Corpus")
WEBAUTHN = os.path.join(ROOT, "Tests", "KeyboundWebAuthnTests", "Vectors")
CRYPTO = os.path.join(ROOT, "Tests", "KeyboundCryptoTests", "Vectors")

seeds = {}


def add(harness, data):
    if isinstance(data, str):
        data = data.encode()
    seeds.setdefault(harness, set()).add(bytes(data))


def load(*path):
    with open(os.path.join(*path)) as file:
        return json.load(file)


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_text(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def seconds(text):
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def u64(value):
    return struct.pack(">Q", value)


# --- A minimal CBOR reader, enough to take the vectors' attestation objects apart. -------------


def cbor_item(data, offset=0):
    """Returns (value, end offset) of the item at offset; maps become lists of pairs."""
    initial = data[offset]
    major, info = initial >> 5, initial & 0x1F
    offset += 1
    if major == 7:
        return {20: False, 21: True, 22: None}[info], offset
    if info < 24:
        argument = info
    else:
        width = {24: 1, 25: 2, 26: 4, 27: 8}[info]
        argument = int.from_bytes(data[offset:offset + width], "big")
        offset += width
    if major in (0, 1):
        return (argument if major == 0 else -1 - argument), offset
    if major in (2, 3):
        value = data[offset:offset + argument]
        return (bytes(value) if major == 2 else value.decode()), offset + argument
    if major == 4:
        items = []
        for _ in range(argument):
            item, offset = cbor_item(data, offset)
            items.append(item)
        return items, offset
    if major == 5:
        pairs = []
        for _ in range(argument):
            key, offset = cbor_item(data, offset)
            value, offset = cbor_item(data, offset)
            pairs.append((key, value))
        return pairs, offset
    raise ValueError("tag")


def cbor_get(pairs, key):
    return next((value for k, value in pairs if k == key), None)


def attestation_parts(attestation_object):
    """(fmt, x5c DER list, authData, COSE key bytes or None) of an attestation object."""
    pairs, _ = cbor_item(attestation_object)
    statement = cbor_get(pairs, "attStmt") or []
    auth_data = cbor_get(pairs, "authData")
    cose_key = None
    if auth_data[32] & 0x40:
        length = int.from_bytes(auth_data[53:55], "big")
        start = 55 + length
        _, end = cbor_item(auth_data, start)
        cose_key = auth_data[start:end]
    return cbor_get(pairs, "fmt"), cbor_get(statement, "x5c") or [], auth_data, cose_key


# --- KeyboundWire ------------------------------------------------------------------------------

TIME = "2026-05-28T20:26:40Z"
CHALLENGE = b64url_text(bytes(range(32)))
SPKI = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKSexBRK64-3c_kZ4KBKLrSkDJpkZ9whgacjE32xzKDjHeHlk6qwA5ZIfsUmKYPRgZ2az2WhQ"
    "AVWNGpdOc0FRPg"
)
SIGNATURE = "MEQCICujqL5rlNXsgKbZ0RkKQ27_5Q2Foe7oWbjMavm9XC4YAiBM1guFXUQvWzx7EetsTgrnUl_nEPq5qnx3pn955vrddg"
ACTION = {"type": "transfer", "amount": "0.5", "asset": "ETH", "to": "0x12a4c8"}
TOKEN = b64url_text(bytes(range(32, 64)))

# In the order of Harness.wireMessageTypes (WireMessagesHarness.swift): the first byte picks it.
MESSAGES = [
    {"status": "ok"},
    {"username": "alice", "password": "correct horse battery"},
    {"user_id": "usr_0123456789abcdef"},
    {"username": "alice", "password": "correct horse battery", "client_id": "ios.app-1"},
    {"refresh_token": TOKEN},
    {"access_token": TOKEN, "refresh_token": TOKEN, "token_type": "Bearer", "expires_in": 900,
     "session_id": "ses_1", "user_id": "usr_1"},
    {"user_id": "usr_1", "username": "alice", "session_id": "ses_1", "auth_method": "password",
     "auth_time": TIME},
    {"public_key": SPKI, "name": "Alice's iPhone", "key_protection": "secureEnclave"},
    {"device_id": "dev_1"},
    {"device_id": "dev_1", "name": "iPhone", "key_protection": "emulator", "status": "active",
     "created_at": TIME, "last_used_at": None},
    {"devices": [{"device_id": "dev_1", "name": "iPhone", "key_protection": "software", "status": "revoked",
                  "created_at": TIME, "last_used_at": TIME}]},
    {"device_id": "dev_1"},
    {"challenge_id": "chl_1", "payload": CHALLENGE, "expires_at": TIME},
    {"challenge_id": "chl_1", "signature": SIGNATURE},
    {"device_id": "dev_1", "action": ACTION},
    {"approval_id": "apr_1", "payload": CHALLENGE, "expires_at": TIME},
    {"signature": SIGNATURE},
    {"status": "approved"},
    {"approval_id": "apr_1", "status": "pending", "device_id": "dev_1", "action": ACTION, "created_at": TIME,
     "expires_at": TIME, "decided_at": None},
    {"time": TIME, "type": "login", "method": "password", "user_id": "usr_1", "device_id": None,
     "session_id": "ses_1", "client_address": "127.0.0.1", "count": 1, "last_time": TIME},
    {"events": [{"time": TIME, "type": "logout", "count": 3, "last_time": TIME}]},
    {"type": "urn:keybound:problem:token_invalid", "title": "Unauthorized", "status": 401,
     "code": "token_invalid", "detail": "The access token is missing, unknown or expired."},
    ACTION,
]
for index, message in enumerate(MESSAGES):
    add("wire-messages", bytes([index]) + compact(message))
    add("json", compact(message))
add("json", json.dumps(MESSAGES[9], indent=2))
add("json", '["\\u00e9\\ud83d\\ude00\\n", -0.5e+10, 1E-3, true, false, null, {}, []]')

for purpose, action in [("login", None), ("approve", ACTION)]:
    payload = (
        '{"keybound":1,"purpose":"%s","server":"keybound","device":"dev_1","challenge":"%s","expires":"%s"'
        % (purpose, CHALLENGE, TIME)
    )
    if action:
        payload += ',"action":' + compact(action).decode()
    add("signing-payload", payload + "}")
    add("json", payload + "}")

for text in ["", "AA", "AAA", "AAAA", "_-_-", CHALLENGE, SPKI, SIGNATURE, "A", "AB==", "ab+/"]:
    add("base64url", text)

# --- KeyboundCrypto: Wycheproof ----------------------------------------------------------------

ecdsa = load(CRYPTO, "ecdsa_secp256r1_sha256_test.json")
FIXTURE_KEY = b64url(SPKI).hex()
for group in ecdsa["testGroups"]:
    add("p256-public-key", bytes.fromhex(group["publicKeyDer"]))
    add("p256-public-key", bytes.fromhex(group["publicKey"]["uncompressed"]))
    if group["publicKeyDer"] == FIXTURE_KEY:
        for test in group["tests"]:
            add("p256-signature", bytes.fromhex(test["sig"]))

# --- KeyboundServer ----------------------------------------------------------------------------

for header in ["Bearer {token}", "bearer {token}", "BEARER  {token} ", "Bearer {token}x", "Bearer",
               "Bearer " + TOKEN, "Basic YWxpY2U6cGFzc3dvcmQ=", "Bearer {refresh}", ""]:
    add("bearer", header)


def request(method, target, body=None, token=True, headers=()):
    lines = ["%s %s" % (method, target)]
    if token:
        lines.append("Authorization: Bearer {token}")
    if body is not None:
        lines.append("Content-Type: application/json")
    lines += list(headers)
    text = "\n".join(lines) + "\n\n"
    return text.encode() + (compact(body) if body is not None else b"")


for seed in [
    request("GET", "/healthz", token=False),
    request("GET", "/openapi.yaml", token=False),
    request("POST", "/v1/accounts", MESSAGES[1], token=False),
    request("POST", "/v1/sessions/password", {"username": "fuzz", "password": "fuzz-password",
                                               "client_id": "fuzz"}, token=False),
    request("POST", "/v1/sessions/refresh", {"refresh_token": "{refresh}"}, token=False),
    request("DELETE", "/v1/sessions/current"),
    request("GET", "/v1/me", headers=["X-Forwarded-For: 203.0.113.7, 127.0.0.1"]),
    request("GET", "/v1/me", headers=['Forwarded: for="[2001:db8::1]:4711";proto=https, for=127.0.0.1']),
    request("POST", "/v1/devices", {"public_key": SPKI, "name": "Phone", "key_protection": "secureEnclave"}),
    request("GET", "/v1/devices"),
    request("DELETE", "/v1/devices/dev_0123"),
    request("POST", "/v1/challenges", {"device_id": "dev_0123"}, token=False),
    request("POST", "/v1/sessions/device", {"challenge_id": "chl_1", "signature": SIGNATURE}, token=False),
    request("POST", "/v1/approvals", {"device_id": "dev_0123", "action": ACTION}),
    request("POST", "/v1/approvals/apr_1/confirm", {"signature": SIGNATURE}, token=False),
    request("GET", "/v1/approvals/apr_1"),
    request("GET", "/v1/audit?limit=5"),
    request("GET", "/v1/audit?limit=%35&x=%zz"),
    request("PUT", "/v1/me"),
    request("GET", "/metrics", token=False),
]:
    add("server-request", seed)

# --- KeyboundEmulator: state files as EmulatedDevice.save(to:key:) writes them, opened ----------

STATES = [
    # Face ID, two items, two keys, every kind of queued outcome.
    '{"passcode":{"iterations":100000,"derived":"Lpc8MxA4D4OpMK6MLTnmVC7jxPJTXIdNfpkzPWVOtXI=","salt":"hC36pg6DbsZ'
    'C5YhGr93TEA=="},"keys":["open-key",{"policy":{"accessibility":"afterFirstUnlockThisDeviceOnly","reuseDuratio'
    'n":0,"constraints":[],"combination":"or"},"privateKey":"0FdXERn8yZeyf+\\/vSfk\\/Yj0yg84IMI7BkzCtfGNXTHY="},"de'
    'vice-key",{"policy":{"combination":"or","accessibility":"whenPasscodeSetThisDeviceOnly","constraints":["biom'
    'etryCurrentSet","devicePasscode"],"reuseDuration":0},"privateKey":"pklxBa7Fd6tucZBsvxqROq4w53PF7jWhmPBE8KYKI7'
    'I="}],"isLocked":false,"hasUnlockedSinceBoot":true,"enrolledIdentities":1,"queue":[{"match":{}},{"noMatch":{'
    '}},{"passcode":{"_0":"123456"}},{"userFallback":{}},{"userCancel":{}},{"systemCancel":{}},{"appCancel":{}}],'
    '"biometryType":"faceID","consecutiveFailedMatches":0,"items":["plain",{"policy":{"reuseDuration":0,"accessib'
    'ility":"afterFirstUnlockThisDeviceOnly","constraints":[],"combination":"or"},"value":"cGxhaW4="},"token",{"va'
    'lue":"c2VjcmV0","policy":{"combination":"or","reuseDuration":0,"accessibility":"whenPasscodeSetThisDeviceOnl'
    'y","constraints":["biometryCurrentSet"]}}],"enrollmentState":"o7zuPnvA8DCek2J3jZKyRg=="}',
    # Touch ID, rebooted (locked, not unlocked since boot), failed matches queued.
    '{"keys":[],"passcode":{"derived":"ULESlI7zF6mvFP696FaG2Ta6aJTDmi3cmD6iWlUcqog=","iterations":100000,"salt":"h'
    'GBy42t9TdYGs4uskyGJLw=="},"enrolledIdentities":3,"isLocked":true,"consecutiveFailedMatches":0,"enrollmentSta'
    'te":"G\\/9mP9PT95IPj6h6HRAjiA==","biometryType":"touchID","queue":[{"noMatch":{}},{"noMatch":{}},{"noMatch":{'
    '}},{"passcode":{"_0":"0000"}}],"items":[],"hasUnlockedSinceBoot":false}',
    # No sensor, no passcode, one item.
    '{"enrollmentState":"TLtliqa\\/JOXHfh+GZpL0JQ==","consecutiveFailedMatches":0,"items":["x",{"value":"AAEC","po'
    'licy":{"constraints":[],"combination":"or","accessibility":"afterFirstUnlockThisDeviceOnly","reuseDuration":'
    '0}}],"queue":[],"isLocked":false,"keys":[],"hasUnlockedSinceBoot":true,"biometryType":"none","enrolledIdenti'
    'ties":0}',
]
for text in STATES:
    add("emulator-state", text)
    state = json.loads(text)
    if "passcode" in state:
        # The same state with a cheap verifier, so that passcode prompts do not slow the fuzzer.
        passcode = next(o["passcode"]["_0"] for o in state["queue"] if "passcode" in o)
        salt = base64.b64decode(state["passcode"]["salt"])
        state["passcode"]["iterations"] = 10
        state["passcode"]["derived"] = base64.b64encode(
            hashlib.pbkdf2_hmac("sha256", passcode.encode(), salt, 10, 32)).decode()
        add("emulator-state", compact(state))

# --- KeyboundWebAuthn --------------------------------------------------------------------------

RELYING_PARTIES = [  # The order of WebAuthnFixture.relyingParties.
    ("example.org", "https://example.org"), ("dev2.dontneeda.pw", "https://dev2.dontneeda.pw:5000"),
    ("localhost", "http://localhost:5000"), ("localhost", "http://localhost:8000"),
    ("dev.eduid.se", "https://dashboard.dev.eduid.se"), ("eduid.docker", "https://dashboard.eduid.docker"),
]
UNPINNED = 1_730_000_000  # 2024-10-27: inside every unpinned vector's certificates (and the W3C CA's).


def relying_party(rp_id, origin, user_verification):
    return RELYING_PARTIES.index((rp_id, origin)) | (0 if user_verification else 0x80)


def registration(rp_id, origin, challenge, time, response):
    """Seeds for every harness a registration feeds: its parts, framed for each."""
    client_data = b64url(response["response"]["clientDataJSON"])
    attestation_object = b64url(response["response"]["attestationObject"])
    fmt, x5c, auth_data, cose_key = attestation_parts(attestation_object)
    user_verification = bool(auth_data[32] & 0x04)  # Required only when the authenticator did it.
    add("webauthn-registration", bytes([relying_party(rp_id, origin, user_verification)]) + u64(time)
        + bytes([len(challenge)]) + challenge + compact(response))
    add("client-data", client_data)
    add("cbor", attestation_object)
    add("attestation-object", hashlib.sha256(client_data).digest() + u64(time) + attestation_object)
    add("authenticator-data", b"\x00" + auth_data)
    if cose_key:
        add("cose-key", cose_key)
        add("cbor", cose_key)
    if x5c:
        add("x509-chain", u64(time) + b"".join(x5c))
    return cose_key


def authentication(rp_id, origin, challenge, response, cose_key, sign_count, user_verification, user_handle):
    client_data = b64url(response["response"]["clientDataJSON"])
    add("client-data", client_data)
    add("authenticator-data", b"\x00" + b64url(response["response"]["authenticatorData"]))
    add("p256-signature", b64url(response["response"]["signature"]))
    add("cose-key", cose_key)
    auth_data = b64url(response["response"]["authenticatorData"])
    # Bit 0: backup eligible as at registration (BE cannot change); bit 1: identified by user handle.
    flags = (1 if auth_data[32] & 0x08 else 0) | (2 if response["response"].get("userHandle") else 0)
    add("webauthn-authentication", bytes([relying_party(rp_id, origin, user_verification), flags])
        + struct.pack(">I", sign_count) + struct.pack(">H", len(cose_key)) + cose_key
        + bytes([len(user_handle)]) + user_handle + bytes([len(challenge)]) + challenge + compact(response))


w3c = load(WEBAUTHN, "w3c_l3", "webauthn_l3_test_vectors.json")
for vector in w3c["vectors"]:
    reg = vector["registration"]
    cose_key = registration(w3c["rpId"], w3c["origin"], b64url(reg["challenge_b64url"]), UNPINNED,
                            reg["response"])
    auth = vector.get("authentication")
    if auth and cose_key:
        handle = auth["response"]["response"].get("userHandle")
        authentication(w3c["rpId"], w3c["origin"], b64url(auth["challenge_b64url"]), auth["response"], cose_key,
                       0, False, b64url(handle) if handle else b"owner")

py_webauthn = load(WEBAUTHN, "py_webauthn", "py_webauthn_vectors.json")
for vector in py_webauthn["registrations"]:
    time = seconds(vector["verify_at"]) if vector.get("verify_at") else UNPINNED
    registration(vector["rpId"], vector["origin"], b64url(vector["challenge_b64url"]), time, vector["response"])
for vector in py_webauthn["authentications"]:
    handle = vector["response"]["response"].get("userHandle")
    authentication(vector["rpId"], vector["origin"], b64url(vector["challenge_b64url"]), vector["response"],
                   b64url(vector["credential_public_key_b64url"]), vector["stored_sign_count"],
                   vector["require_user_verification"], b64url(handle) if handle else b"owner")

for vector in load(WEBAUTHN, "fido_mds", "fido_mds_vectors.json")["registrations"]:
    leaf = (vector["attestation"].get("x5c") or [{}])[0]
    time = UNPINNED
    if "not_before" in leaf and "not_after" in leaf:
        time = (seconds(leaf["not_before"]) + seconds(leaf["not_after"])) // 2
    registration(vector["rpId"], vector["origin"], b64url(vector["challenge_b64url"]), time, vector["response"])

fido2 = load(WEBAUTHN, "python_fido2", "apple_attestation_components.json")
add("x509-chain", u64(seconds(fido2["verify_at"])) + b"".join(base64.b64decode(c) for c in fido2["attStmt"]["x5c_b64"]))
add("authenticator-data", b"\x00" + bytes.fromhex(fido2["authData_hex"]))

app_attest = load(WEBAUTHN, "app_attest", "app_attest_vectors.json")
assertion_keys = [v for v in app_attest["vectors"] if v.get("publicKey_pem")]
for vector in app_attest["vectors"]:
    attestation_object = base64.b64decode(vector["attestation_b64"])
    client_data_hash = base64.b64decode(vector["clientDataHash_b64"])
    time = seconds(vector["verify_at"])
    add("app-attest-attestation", bytes([1 if vector["environment"] == "development" else 0])
        + base64.b64decode(vector["keyId_b64"]) + bytes([len(client_data_hash)]) + client_data_hash
        + u64(time) + attestation_object)
    add("cbor", attestation_object)
    _, x5c, auth_data, cose_key = attestation_parts(attestation_object)
    add("authenticator-data", b"\x01" + auth_data)
    add("x509-chain", u64(time) + b"".join(x5c))
    if cose_key:
        add("cose-key", cose_key)
    for assertion in vector["assertions"]:
        data = base64.b64decode(assertion["assertion_b64"])
        client_data = base64.b64decode(assertion["clientData_b64"])
        add("app-attest-assertion", bytes([assertion_keys.index(vector)])
            + struct.pack(">I", assertion["previous_counter"]) + struct.pack(">H", len(client_data)) + client_data
            + data)
        add("cbor", data)

for pem in ["Apple_WebAuthn_Root_CA.pem", os.path.join("app_attest", "Apple_App_Attestation_Root_CA.pem"),
            os.path.join("w3c_l3", "attestation_ca_cert.pem")]:
    with open(os.path.join(WEBAUTHN, pem)) as file:
        der = base64.b64decode("".join(line for line in file.read().splitlines() if not line.startswith("-----")))
    add("x509-chain", u64(UNPINNED) + der)

# --- Write ---------------------------------------------------------------------------------------

for harness, inputs in sorted(seeds.items()):
    folder = os.path.join(CORPUS, harness)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for data in sorted(inputs):
        # Named by content, as libFuzzer names what it finds.
        with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as file:
            file.write(data)
    print("%-24s %4d inputs %8d bytes" % (harness, len(inputs), sum(len(d) for d in inputs)))
