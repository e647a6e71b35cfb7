"""Schemathesis hooks for Keybound's API run (scripts/fuzz-api.sh; docs/testing.md).

- Authentication: a test account's bearer token, from a real password login, on every operation
  whose `security` admits a bearer token. It is refreshed every minute (so the session stays
  inside the 5-minute step-up window that binding a device needs) and at once when a response is
  401 (the run itself logs the session out now and then). The run learns the account's username
  from GET /v1/me and tries it with wrong passwords, which blocks that account on the run's address
  (5 consecutive failures): the test account therefore logs in from another loopback address,
  127.0.0.2, as the design promises that wrong passwords from one address never stop the right
  password from another.
- The string format `p256-spki` (docs/openapi.yaml, BindDeviceRequest.public_key): a P-256 point
  on the curve, which no regular expression can state, generated here from a random scalar.
- A device that holds its key: the hooks remember the private scalar of every p256-spki key they
  generate, which device id a binding of it got, and which device each login challenge and
  approval payload names; half of the positive device logins and approval confirmations for such
  a payload then carry a real signature of its bytes instead of a generated one, so the stateful
  phase reaches the 200s of POST /v1/sessions/device and POST /v1/approvals/{id}/confirm too.
- No DPoP header: a proof is an ES256 signature over the request's method, URI and time, naming
  the server's latest nonce, which no schema can state and the generator cannot make; every
  made-up one is refused (400 or 401 dpop_proof_invalid), so the run sends none and its sessions
  are bearer sessions. Tests/KeyboundServerTests/DPoPTests refuses each defect of a proof.
- The check `keybound_refusal_codes`: where the configuration lets a schema-valid request get 400
  (a documented semantic refusal no schema can state, such as a WebAuthn ceremony that was never
  started), the problem code must say so; `invalid_request` or `unknown_member` on schema-valid
  data means the spec is missing a grammar, and fails the run.

- OAuth (the section at the end): registered clients, live codes and refresh tokens in half of
  the positive cases of the OAuth operations, and an OAuth access token for userinfo.

Pure Python and the packages schemathesis brings (requests, hypothesis), plus scripts/oidc/harness.py
(the standard library only) to register the OAuth clients: nothing else to install.
"""

import base64
import hashlib
import json
import os
import re
import secrets
import threading
import uuid

import requests
import schemathesis
from hypothesis import strategies as st
from requests.adapters import HTTPAdapter

BASE_URL = os.environ["KEYBOUND_URL"].rstrip("/")
USERNAME = "schemathesis"
PASSWORD = secrets.token_urlsafe(24)
CLIENT_ID = "schemathesis"

# --- authentication -----------------------------------------------------------------------------

_account_created = False


class _SourceAddressAdapter(HTTPAdapter):
    """Connects from a chosen local address."""

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (os.environ.get("KEYBOUND_AUTH_SOURCE", "127.0.0.2"), 0)
        super().init_poolmanager(*args, **kwargs)


_auth_http = requests.Session()
_auth_http.mount("http://", _SourceAddressAdapter())


def _password_login() -> str:
    global _account_created
    if not _account_created:
        created = _auth_http.post(
            f"{BASE_URL}/v1/accounts", json={"username": USERNAME, "password": PASSWORD}, timeout=30
        )
        if created.status_code not in (201, 409):
            raise RuntimeError(f"creating the test account: {created.status_code} {created.text}")
        _account_created = True
    reply = _auth_http.post(
        f"{BASE_URL}/v1/sessions/password",
        json={"username": USERNAME, "password": PASSWORD, "client_id": CLIENT_ID},
        timeout=30,
    )
    if reply.status_code != 200:
        raise RuntimeError(f"logging the test account in: {reply.status_code} {reply.text}")
    return reply.json()["access_token"]


def _admits_bearer(operation) -> bool:
    security = operation.definition.raw.get("security") or []
    return any("bearer" in requirement for requirement in security)


@schemathesis.auth(refresh_interval=60)
class KeyboundBearer:
    """A fresh password login of the test account (step-up window included), and for userinfo an
    OAuth access token from a code exchange (see "OAuth 2.0 / OpenID Connect" below)."""

    def get(self, case, context):
        return {"v1": _password_login(), "oauth": _oauth_access_token()}

    def set(self, case, data, context):
        if not _admits_bearer(context.operation):
            return
        token = data["oauth"] if case.path == "/oauth/userinfo" and data["oauth"] else data["v1"]
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {token}"


@schemathesis.hook
def before_call(context, case, **kwargs):
    """Drops a generated DPoP header (see the module's docstring), and gives a case that sends an
    Idempotency-Key a new key of its own, in every phase (the coverage phase's cases do not go
    through the generation hooks), unless the case is about a malformed key."""
    if case.headers:
        case.headers.pop("DPoP", None)
        key = case.headers.get("Idempotency-Key")
        if key is not None and not _about_a_malformed_key(case, str(key)):
            case.headers["Idempotency-Key"] = f'"{uuid.uuid4()}"'


# The grammar of docs/openapi.yaml's IdempotencyKey.
_IDEMPOTENCY_KEY = re.compile(r'"([\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\]){16,255}"')


def _about_a_malformed_key(case, key: str) -> bool:
    """Whether the case is a negative one whose malformed key is what it tests: the server must
    refuse that key (400). Every other case sends a new well-formed key. The generator repeats
    values, and the same key with another request is 422 idempotency_key_reused, with the same
    request the first request's answer (a resource since deleted, created again): answers to an
    earlier case, not to this one. And a case that must not be refused for its key gets a good one:
    the coverage phase cannot draw the pattern's quotes for a header, fills the header with a
    value it knows to be invalid, and still calls the case positive; a case without its
    Authorization must get 401, not the 400 of the key it was given besides."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_negative or _IDEMPOTENCY_KEY.fullmatch(key):
        return False
    return getattr(meta.phase.data, "parameter", None) in (None, "Idempotency-Key")


# --- the p256-spki format -----------------------------------------------------------------------

# NIST P-256 (SEC 2 secp256r1): y^2 = x^3 - 3x + b over GF(p), base point G of order N.
_P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)
# DER SubjectPublicKeyInfo header of id-ecPublicKey / prime256v1 with an uncompressed point.
_SPKI_HEADER = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")


def _add(p, q):
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % _P == 0:
        return None
    if p == q:
        slope = (3 * p[0] * p[0] - 3) * pow(2 * p[1], -1, _P) % _P
    else:
        slope = (q[1] - p[1]) * pow(q[0] - p[0], -1, _P) % _P
    x = (slope * slope - p[0] - q[0]) % _P
    return x, (slope * (p[0] - x) - p[1]) % _P


def _multiply(k, point):
    result = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# What the hooks know, filled as responses arrive: key (SPKI text) -> scalar, device id -> scalar,
# challenge or approval id -> payload bytes.
_lock = threading.Lock()
_scalars: dict[str, int] = {}
_device_keys: dict[str, int] = {}
_payloads: dict[str, bytes] = {}


def _spki(scalar: int) -> str:
    x, y = _multiply(scalar, _G)
    assert (y * y - x * x * x + 3 * x - _B) % _P == 0
    text = _b64(_SPKI_HEADER + b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big"))
    with _lock:
        _scalars[text] = scalar
    return text


def _der_integer(value: int) -> bytes:
    raw = value.to_bytes(33, "big").lstrip(b"\x00")
    if raw[0] & 0x80:
        raw = b"\x00" + raw
    return b"\x02" + bytes([len(raw)]) + raw


def _sign(scalar: int, message: bytes) -> str:
    """ECDSA P-256 over SHA-256, DER, as the device would sign the payload."""
    digest = int.from_bytes(hashlib.sha256(message).digest(), "big")
    while True:
        k = secrets.randbelow(_N - 1) + 1
        r = _multiply(k, _G)[0] % _N
        s = pow(k, -1, _N) * (digest + r * scalar) % _N
        if r and s:
            body = _der_integer(r) + _der_integer(s)
            return _b64(b"\x30" + bytes([len(body)]) + body)


schemathesis.openapi.format("p256-spki", st.integers(min_value=1, max_value=_N - 1).map(_spki))

def _json(response):
    try:
        return response.json()
    except ValueError:
        return None


@schemathesis.hook
def after_call(context, case, response):
    """Remembers device ids of keys the hooks generated, and the payloads issued to them."""
    label = f"{case.method.upper()} {case.path}"
    body = _json(response) if 200 <= response.status_code < 300 else None
    if not isinstance(body, dict):
        return
    with _lock:
        if label == "POST /v1/devices" and isinstance(case.body, dict):
            scalar = _scalars.get(case.body.get("public_key"))
            if scalar is not None and "device_id" in body:
                _device_keys[body["device_id"]] = scalar
        elif label in ("POST /v1/challenges", "POST /v1/approvals"):
            identifier = body.get("challenge_id") or body.get("approval_id")
            if identifier and "payload" in body:
                _payloads[identifier] = _unb64(body["payload"])


@schemathesis.hook
def before_call(context, case, kwargs):
    """Half of the positive device logins and confirmations of a known payload get a real signature."""
    label = f"{case.method.upper()} {case.path}"
    if label == "POST /v1/sessions/device" and isinstance(case.body, dict):
        identifier = case.body.get("challenge_id")
    elif label == "POST /v1/approvals/{id}/confirm" and isinstance(case.body, dict):
        identifier = (case.path_parameters or {}).get("id")
    else:
        return
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or secrets.randbelow(2):
        return
    with _lock:
        payload = _payloads.get(identifier)
        device = json.loads(payload).get("device") if payload else None
        scalar = _device_keys.get(device)
    if scalar is not None:
        case.body["signature"] = _sign(scalar, payload)


# --- refusal codes ------------------------------------------------------------------------------

SYNTAX_CODES = {"invalid_request", "unknown_member"}

@schemathesis.check
def keybound_refusal_codes(ctx, response, case):
    """A schema-valid request is never refused for its syntax (the spec states every grammar): a
    400 problem's `code`, or an OAuth error's `error` (RFC 6749 5.2), is never a syntax code."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    try:
        body = response.json()
        code = body.get("code") or body.get("error")
    except (ValueError, AttributeError):
        code = None
    if code in SYNTAX_CODES:
        raise AssertionError(
            f"schema-valid request refused with {code}: the spec misses a grammar the server checks"
        )
    return None


# --- OAuth 2.0 / OpenID Connect ----------------------------------------------------------------
#
# The server runs with --issuer (scripts/fuzz-api.sh). So that the OAuth operations answer more
# than "unknown client", the hooks register clients on the server's database as an operator would
# (scripts/oidc/harness.py), and in half of the positive cases put a registered client where the
# generated data has a made-up one: its client_id and redirect_uri (and a PKCE challenge whose
# verifier they keep) in authorization requests, its credentials (HTTP Basic, or a public client's
# client_id) at the token, introspection and revocation endpoints, and at the token endpoint a
# live code with its verifier, or a live refresh token. userinfo gets an OAuth access token (a JWT
# from a real code exchange) instead of the /v1 token.

import harness  # noqa: E402 - scripts/oidc, on PYTHONPATH

_OAUTH_LABELS = {"GET /oauth/authorize", "POST /oauth/authorize", "POST /v1/oauth/authorize", "POST /oauth/token", "POST /oauth/introspect",
                 "POST /oauth/revoke", "POST /oauth/bc-authorize"}
# A keybound_transfer the server accepts, for half of the CIBA requests the hooks authenticate.
_TRANSFER = json.dumps([{"type": "keybound_transfer", "amount": "0.5", "asset": "ETH",
                         "recipient": "0x52908400098527886E0F7030069857D2E4169EE7"}])
_OAUTH_LOGIN_CLIENT = "schemathesis-oauth"  # the /v1 client id of the hooks' own sign-ins


def _register_oauth_clients() -> dict[str, dict]:
    keybound, database = os.environ.get("KEYBOUND_BIN"), os.environ.get("KEYBOUND_DB", "")
    if not keybound or not database.startswith("sqlite:"):
        return {}
    engine = harness.SQLiteEngine(database[len("sqlite:"):])
    clients = {}
    for role, confidential, uri in (("public", False, "http://127.0.0.1/callback"),
                                    ("confidential", True, "https://rp.example/callback"),
                                    ("userinfo", False, "http://127.0.0.1/userinfo")):
        answer = harness.register_client(keybound, engine, f"schemathesis {role}", [uri], confidential=confidential)
        clients[role] = {"client_id": answer["client_id"], "secret": answer.get("secret"), "redirect_uri": uri}
    answer = harness.register_client(keybound, engine, "schemathesis ciba", [], confidential=True, ciba=True)
    clients["ciba"] = {"client_id": answer["client_id"], "secret": answer.get("secret"), "redirect_uri": None}
    return clients


_clients = _register_oauth_clients()
_refresh_tokens: dict[str, str] = {}  # client_id -> its newest refresh token


def _oauth_code(client: dict, scope: str = "openid offline_access") -> tuple[str, str]:
    """A fresh authorization code for `client` and the test account, with its PKCE verifier."""
    verifier = secrets.token_urlsafe(48)
    reply = _auth_http.post(
        f"{BASE_URL}/v1/sessions/password",
        json={"username": USERNAME, "password": PASSWORD, "client_id": _OAUTH_LOGIN_CLIENT}, timeout=30)
    access = reply.json()["access_token"]
    body = {"client_id": client["client_id"], "redirect_uri": client["redirect_uri"], "response_type": "code",
            "scope": scope, "state": secrets.token_urlsafe(8), "code_challenge_method": "S256",
            "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest())}
    reply = _auth_http.post(f"{BASE_URL}/v1/oauth/authorize", json=body,
                            headers={"Authorization": f"Bearer {access}"}, timeout=30)
    location = reply.json()["redirect_to"]
    query = dict(part.split("=", 1) for part in location.split("?", 1)[1].split("&"))
    return requests.utils.unquote(query["code"]), verifier


def _oauth_access_token() -> str | None:
    """An OAuth access token (RFC 9068 JWT) with the openid scope, for userinfo."""
    client = _clients.get("userinfo")
    if client is None:
        return None
    code, verifier = _oauth_code(client, "openid profile")
    reply = _auth_http.post(
        f"{BASE_URL}/oauth/token",
        data={"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
              "redirect_uri": client["redirect_uri"], "client_id": client["client_id"]}, timeout=30)
    return reply.json()["access_token"]


def _authenticate(case, client: dict) -> None:
    """Replaces whatever client authentication the case has with `client`'s."""
    for name in ("client_id", "client_secret", "client_assertion_type", "client_assertion"):
        case.body.pop(name, None)
    case.headers = case.headers or {}
    if client["secret"]:
        token = base64.b64encode(f"{client['client_id']}:{client['secret']}".encode()).decode()
        case.headers["Authorization"] = f"Basic {token}"
    else:
        case.body["client_id"] = client["client_id"]


@schemathesis.hook("before_call")
def oauth_before_call(context, case, kwargs):
    """Half of the positive OAuth cases get a registered client and, where it fits, live values."""
    label = f"{case.method.upper()} {case.path}"
    meta = case.meta
    if label not in _OAUTH_LABELS or not _clients or meta is None or not meta.generation.mode.is_positive:
        return
    if secrets.randbelow(2):
        return
    client = _clients["confidential" if secrets.randbelow(2) else "public"]
    if label in ("GET /oauth/authorize", "POST /oauth/authorize", "POST /v1/oauth/authorize"):
        values = case.query if label.startswith("GET") else case.body
        if not isinstance(values, dict):
            return
        values["client_id"], values["redirect_uri"] = client["client_id"], client["redirect_uri"]
        if secrets.randbelow(2):
            values["code_challenge_method"] = "S256"
            values["code_challenge"] = _b64(hashlib.sha256(secrets.token_bytes(32)).digest())
        return
    if not isinstance(case.body, dict):
        return
    if label == "POST /oauth/bc-authorize":
        # The CIBA client, for the test account (which has no device: 403 access_denied), with a
        # transfer the server accepts half of the time.
        _authenticate(case, _clients["ciba"])
        case.body["login_hint"] = USERNAME
        if secrets.randbelow(2):
            case.body["authorization_details"] = _TRANSFER
        return
    _authenticate(case, client)
    if label == "POST /oauth/token":
        grant = case.body.get("grant_type")
        if grant == "authorization_code":
            code, verifier = _oauth_code(client)
            case.body.update(code=code, code_verifier=verifier, redirect_uri=client["redirect_uri"])
        elif grant == "refresh_token" and client["client_id"] in _refresh_tokens:
            case.body["refresh_token"] = _refresh_tokens[client["client_id"]]
    elif label == "POST /oauth/introspect" and _refresh_tokens and secrets.randbelow(2):
        case.body["token"] = secrets.choice(list(_refresh_tokens.values()))


@schemathesis.hook("after_call")
def oauth_after_call(context, case, response):
    """Remembers the newest refresh token of each client the hooks authenticated as."""
    if f"{case.method.upper()} {case.path}" != "POST /oauth/token" or response.status_code != 200:
        return
    body = _json(response)
    refresh = body.get("refresh_token") if isinstance(body, dict) else None
    if not refresh:
        return
    for client in _clients.values():
        authorization = (case.headers or {}).get("Authorization", "")
        if client["client_id"] in (case.body or {}).get("client_id", "") or (
                client["secret"] and authorization.endswith(
                    base64.b64encode(f"{client['client_id']}:{client['secret']}".encode()).decode())):
            with _lock:
                _refresh_tokens[client["client_id"]] = refresh
