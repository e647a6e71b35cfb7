"""The load of `make test-ha`: clients that sign up, log in, bind a device, ask for and confirm
approvals and log in with the device, against two `keybound serve` instances, the way an app
with a retrying SDK would.

Every POST is one logical write with an `Idempotency-Key` of its own. On a 503, a lost
connection, a timeout or 409 `idempotency_key_in_flight` the client sends the same request again,
with the same key, to the next instance (a load balancer's round robin), until the write's budget
runs out. Every attempt is recorded (when it started and ended, which instance, what came back),
so that the runner can measure the time to recover and check each write against the database.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

#: Monotonic time + this = wall-clock time (the servers' logs are in UTC seconds).
WALL_OFFSET = time.time() - time.monotonic()

#: What a client may send again with the same Idempotency-Key: the outcome is unknown.
RETRY_STATUSES = {503}
RETRY_CODES = {"idempotency_key_in_flight"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Attempt:
    instance: int
    started: float
    ended: float
    status: int | None  # None: no HTTP answer (connection refused or lost, timeout)
    code: str | None  # the problem's code, or the connection error's class
    body: str = ""
    retry_after: str | None = None

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def utc(self) -> str:
        """When it was sent, as the servers log it (UTC, to the second)."""
        return time.strftime("%H:%M:%S", time.gmtime(self.started + WALL_OFFSET))


@dataclass
class Write:
    """One logical write: a POST and its retries, all with one Idempotency-Key."""

    kind: str  # signup, login, bind, approval, confirm, device_login
    path: str
    body: dict
    key: str
    attempts: list[Attempt] = field(default_factory=list)
    response: dict | None = None  # the 2xx answer's JSON, once acknowledged
    facts: dict = field(default_factory=dict)  # what the database must show for it (ids, names)
    done: bool = False  # no attempt is in flight or to come

    @property
    def acknowledged(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].status is not None and 200 <= self.attempts[-1].status < 300

    @property
    def final(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def retried(self) -> bool:
        return len(self.attempts) > 1

    def redacted_body(self) -> str:
        shown = {k: ("[redacted]" if k in ("password", "signature") else v) for k, v in self.body.items()}
        return json.dumps(shown)


class Ledger:
    """Every write of the run, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes: list[Write] = []

    def add(self, write: Write) -> None:
        with self._lock:
            self.writes.append(write)

    def snapshot(self) -> list[Write]:
        with self._lock:
            return list(self.writes)


class Client:
    """HTTP/1.1 keep-alive connections to the instances (one per instance), and the retry loop."""

    def __init__(self, ports: list[int], ledger: Ledger, *, attempt_timeout: float, budget: float,
                 stop: threading.Event) -> None:
        self.ports, self.ledger = ports, ledger
        self.attempt_timeout, self.budget, self.stop = attempt_timeout, budget, stop
        self._connections: dict[int, http.client.HTTPConnection] = {}
        self._next = random.randrange(len(ports))

    def _connection(self, index: int) -> http.client.HTTPConnection:
        connection = self._connections.get(index)
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", self.ports[index], timeout=self.attempt_timeout)
            self._connections[index] = connection
        return connection

    def _drop(self, index: int) -> None:
        connection = self._connections.pop(index, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for index in list(self._connections):
            self._drop(index)

    def request(self, method: str, path: str, body: dict | None = None, token: str | None = None,
                key: str | None = None, instance: int | None = None) -> Attempt:
        """One attempt on one instance (the next in turn unless given)."""
        if instance is None:
            instance = self._next
            self._next = (self._next + 1) % len(self.ports)
        headers = {"Host": f"127.0.0.1:{self.ports[instance]}", "Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if key:
            # An RFC 8941 string, as draft-ietf-httpapi-idempotency-key-header defines the field.
            headers["Idempotency-Key"] = f'"{key}"'
        started = time.monotonic()
        try:
            connection = self._connection(instance)
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            text = response.read().decode(errors="replace")
            if response.getheader("Connection", "").lower() == "close":
                self._drop(instance)
        except (OSError, http.client.HTTPException) as error:
            self._drop(instance)
            code = "timeout" if isinstance(error, (socket.timeout, TimeoutError)) else type(error).__name__
            return Attempt(instance, started, time.monotonic(), None, code, str(error))
        ended = time.monotonic()
        code = None
        if response.status >= 400:
            try:
                code = json.loads(text).get("code")
            except (ValueError, AttributeError):
                code = None
        return Attempt(instance, started, ended, response.status, code, text[:2000], response.getheader("Retry-After"))

    def write(self, kind: str, path: str, body: dict, token: str | None = None, *, facts: dict | None = None,
              key: str | None = None, retry: bool = True) -> Write:
        """A logical write: sent until it is answered with anything but 'try again', or until its
        budget runs out (then it is not acknowledged, and its outcome is unknown)."""
        write = Write(kind, path, body, key or secrets.token_urlsafe(18), facts=dict(facts or {}))
        self.ledger.add(write)
        return self.resend(write, token, retry=retry)

    def resend(self, write: Write, token: str | None = None, *, retry: bool = True,
               budget: float | None = None) -> Write:
        write.done = False
        deadline = time.monotonic() + (self.budget if budget is None else budget)
        pause = 0.05
        while True:
            attempt = self.request("POST", write.path, write.body, token, write.key)
            write.attempts.append(attempt)
            again = attempt.status is None or attempt.status in RETRY_STATUSES or attempt.code in RETRY_CODES
            if not again or not retry or time.monotonic() > deadline or self.stop.is_set():
                break
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.5)
        if write.acknowledged:
            try:
                write.response = json.loads(write.final.body)
            except ValueError:
                write.response = {}
        write.done = True
        return write


class Story:
    """One user's life, over and over: sign up, log in, bind a device, then approvals (created and
    confirmed) and device logins. A write that is not acknowledged starts a new user."""

    def __init__(self, client: Client, worker: int) -> None:
        self.client, self.worker = client, worker
        self.count = 0

    def _unique(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}-{self.worker}-{self.count}-{secrets.token_hex(4)}"

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._one_user(stop)

    def _one_user(self, stop: threading.Event) -> None:
        client = self.client
        username = self._unique("ha")
        password = secrets.token_urlsafe(12)
        signup = client.write("signup", "/v1/accounts", {"username": username, "password": password},
                              facts={"username": username})
        if not signup.acknowledged:
            return
        user_id = signup.response.get("user_id")
        signup.facts["user_id"] = user_id
        client_id = self._unique("app")
        login = client.write("login", "/v1/sessions/password",
                             {"username": username, "password": password, "client_id": client_id},
                             facts={"user_id": user_id, "client_id": client_id})
        if not login.acknowledged:
            return
        login.facts["session_id"] = login.response.get("session_id")
        token = login.response.get("access_token")
        key = ec.generate_private_key(ec.SECP256R1())
        spki = b64url(key.public_key().public_bytes(serialization.Encoding.DER,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo))
        bind = client.write("bind", "/v1/devices", {"public_key": spki, "name": "ha phone", "key_protection": "emulator"},
                            token, facts={"user_id": user_id, "public_key": spki})
        if not bind.acknowledged:
            return
        device_id = bind.response.get("device_id")
        bind.facts["device_id"] = device_id
        for _ in range(4):
            if stop.is_set():
                return
            to = self._unique("acct")
            action = {"type": "transfer", "amount": f"{random.randint(1, 999)}.{random.randint(0, 99):02d}",
                      "asset": "EUR", "to": to}
            created = client.write("approval", "/v1/approvals", {"device_id": device_id, "action": action}, token,
                                   facts={"device_id": device_id, "to": to})
            if not created.acknowledged:
                return
            approval_id = created.response.get("approval_id")
            created.facts["approval_id"] = approval_id
            payload = unb64url(created.response.get("payload", ""))
            signature = b64url(key.sign(payload, ec.ECDSA(hashes.SHA256())))
            confirm = client.write("confirm", f"/v1/approvals/{approval_id}/confirm", {"signature": signature}, token,
                                   facts={"approval_id": approval_id})
            if not confirm.acknowledged:
                return
            # A device login: the challenge writes nothing (it is signed, not stored), so it is
            # asked for again until one answers; using it is the write.
            challenge = None
            deadline = time.monotonic() + client.budget
            while challenge is None and time.monotonic() < deadline and not stop.is_set():
                attempt = client.request("POST", "/v1/challenges", {"device_id": device_id})
                if attempt.status == 201:
                    challenge = json.loads(attempt.body)
                elif attempt.status is not None and attempt.status not in RETRY_STATUSES:
                    return
                else:
                    time.sleep(0.1)
            if challenge is None:
                return
            signature = b64url(key.sign(unb64url(challenge["payload"]), ec.ECDSA(hashes.SHA256())))
            device_login = client.write("device_login", "/v1/sessions/device",
                                        {"challenge_id": challenge["challenge_id"], "signature": signature},
                                        facts={"device_id": device_id, "user_id": user_id})
            if not device_login.acknowledged:
                return
            device_login.facts["session_id"] = device_login.response.get("session_id")
            # A login ends the previous session of the same client (the app installation).
            token = device_login.response.get("access_token")


class Load:
    """`workers` threads, each running a `Story` with its own `Client`, until stopped."""

    def __init__(self, ports: list[int], ledger: Ledger, workers: int, *, attempt_timeout: float,
                 budget: float) -> None:
        self.stop_event = threading.Event()
        self.clients = [Client(ports, ledger, attempt_timeout=attempt_timeout, budget=budget, stop=self.stop_event)
                        for _ in range(workers)]
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True, name=f"load-{i}")
                        for i in range(workers)]
        self.errors: list[str] = []

    def _run(self, index: int) -> None:
        try:
            Story(self.clients[index], index).run(self.stop_event)
        except Exception as error:  # noqa: BLE001 - reported by the runner
            self.errors.append(f"load worker {index}: {type(error).__name__}: {error}")
        finally:
            self.clients[index].close()

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self, timeout: float) -> bool:
        """Stops the workers (writes in flight get no more retries); True if all ended in time."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self.threads)
