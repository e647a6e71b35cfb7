"""`make test-ha`: etcd and two PostgreSQL nodes under Patroni (synchronous replication), two
`keybound serve` instances on a libpq multi-host URL, a mixed load whose clients retry with
Idempotency-Keys, and the failures production sees:

  failover      SIGKILL of the primary's Patroni and postmaster: the standby takes over, every
                acknowledged write is on it, both instances serve again without a restart
  rejoin        the old primary comes back as the synchronous standby (pg_rewind) with every write
  switchover    a planned switchover (patronictl): the same guarantees
  standby-lost  the synchronous standby dies (Patroni's strict synchronous mode): writes get 503
                within the deadline, never hang, and land once when it is back

    run.py KEYBOUND [--deadline SEC] [--out DIR] [--workers N]

It prints the measured RTO (kill -> first acknowledged write) and the acknowledged writes lost,
one line per scenario, and exits 0 only when every scenario passed. Everything it started is
stopped on exit, at its deadline and on SIGTERM/SIGINT.

A switch (environment), off by default:
  HA_TOLERATE_NON_IDEMPOTENT_RETRIES=1  what retries do to a server without Idempotency-Key
      support is reported, not failed: a retried write that took effect twice (a second session,
      device or approval), or that took effect and was then answered as a conflict with itself
      (409 username_taken, challenge_used). Strict by default: every retried write must take
      effect exactly once AND get its first answer again. Lost writes always fail.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

import checks
import cluster as db
import load
from harness import HarnessError, Resources, Server, free_port, watchdog

TOLERATE_NON_IDEMPOTENT = os.environ.get("HA_TOLERATE_NON_IDEMPOTENT_RETRIES") == "1"

#: --db-timeout of the servers. While the synchronous standby is gone a write must be refused
#: within the documented bound: a wait for a pooled connection and a blocked COMMIT, each at most
#: --db-timeout (docs/server.md, "Time bounds"), and some slack.
DB_TIMEOUT = 3.0
DEADLINE_SLACK = 1.5
#: One HTTP attempt of the load gives up after this (seen as a hang), a write after its budget.
ATTEMPT_TIMEOUT = 30.0
WRITE_BUDGET = 60.0
#: RTO must be below this (issue 25).
RTO_LIMIT = 30.0


class Deadline(Exception):
    pass


class ScenarioFailed(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def say(text: str) -> None:
    print(f"test-ha: {text}", flush=True)


def detail(text: str) -> None:
    print(f"    {text}", flush=True)


# --- keybound serve -----------------------------------------------------------------------------


class Instance(Server):
    """One `keybound serve` on a free loopback port, its log in the output folder; waiting for it,
    stopping it and its log are the interop harness's."""

    def __init__(self, name: str, keybound: str, url: str, arguments: list[str], password: str, out: str,
                 resources: Resources, ports: set[int]) -> None:
        self.name = name
        self.log_path = os.path.join(out, f"keybound-{name}.log")
        self.process: subprocess.Popen | None = None
        resources.add(self.stop)
        last = ""
        for _ in range(5):
            self.port = free_port(ports)
            listen = f"127.0.0.1:{self.port}"
            with open(self.log_path, "w") as log:
                self.process = subprocess.Popen(
                    [keybound, "serve", "--listen", listen, "--db", url, *arguments],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                    env={**os.environ, "KEYBOUND_DB_PASSWORD": password})
            pid = self.process.pid
            watchdog(f"if tr '\\0' ' ' </proc/{pid}/cmdline 2>/dev/null | grep -qF -- {shlex.quote(listen)}; then "
                     f"kill -TERM {pid}; fi", f"keybound-ha-{name}-watchdog")
            if self._wait_listening():
                self.pid = pid
                return
            last = self.log_tail(40)
            self.stop()
            if "in use" not in last.lower():
                break
        raise HarnessError(f"keybound serve ({name}) did not start; its log ends:\n{last}")

    def get(self, path: str, timeout: float = 10) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as response:
                return response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")
        except OSError as error:
            return 0, str(error)

    def log_lines(self, predicate, limit: int = 8) -> list[str]:
        """Log lines (JSON) for which predicate(entry) holds, the first `limit`."""
        found = []
        try:
            with open(self.log_path, errors="replace") as log:
                for line in log:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if predicate(entry):
                        found.append(line.strip())
                        if len(found) >= limit:
                            break
        except OSError:
            pass
        return found


# --- the run ------------------------------------------------------------------------------------


class Run:
    def __init__(self, keybound: str, out: str, workers: int, venv_bin: str) -> None:
        self.keybound, self.out, self.workers, self.venv_bin = keybound, out, workers, venv_bin
        self.resources = Resources()
        self.ports: set[int] = set()
        self.ledger = load.Ledger()
        self.load: load.Load | None = None
        self.cluster: db.Cluster | None = None
        self.instances: list[Instance] = []
        self.results: list[tuple[str, bool, list[str]]] = []
        self.rto: float | None = None
        self.lost: int | None = None
        self.acknowledged = 0
        self.tolerated = 0  # retries that were not idempotent, let pass by the switch
        self.reported: set[str] = set()  # findings a scenario failed on already
        self.idempotency = False
        self.broken = False  # the cluster or the servers are in no state for further scenarios

    # --- helpers ---------------------------------------------------------------------------

    @property
    def write_deadline(self) -> float:
        return 2 * DB_TIMEOUT + DEADLINE_SLACK

    def attempts_between(self, start: float, end: float | None = None):
        end = end if end is not None else time.monotonic() + 1e9
        for write in self.ledger.snapshot():
            for attempt in list(write.attempts):
                if start <= attempt.started <= end:
                    yield write, attempt

    def first_acknowledged_after(self, moment: float, instance: int | None = None) -> float | None:
        """When the first write attempt sent after `moment` was acknowledged (monotonic), or None."""
        ends = [a.ended for _, a in self.attempts_between(moment)
                if a.status is not None and 200 <= a.status < 300 and (instance is None or a.instance == instance)]
        return min(ends) if ends else None

    def server_errors(self, start: float, end: float | None = None) -> list[str]:
        """What the servers should not have answered between `start` and `end` (monotonic): any
        5xx but 503, a 503 without Retry-After. Grouped, each with one request and its response,
        and what the servers logged as warnings and errors meanwhile."""
        groups: dict[tuple, list] = {}
        for write, attempt in self.attempts_between(start, end):
            if attempt.status is None:
                continue
            if attempt.status >= 500 and attempt.status != 503:
                label = (f"{attempt.status} {attempt.code}", write.kind)
            elif attempt.status == 503 and not attempt.retry_after:
                label = ("503 without Retry-After", write.kind)
            else:
                continue
            groups.setdefault(label, []).append((write, attempt))
        problems = []
        for (answer, kind), seen in sorted(groups.items(), key=lambda item: -len(item[1])):
            write, attempt = seen[0]
            problems.append(f"{len(seen)} × {answer} to {kind}, e.g. POST {write.path} {write.redacted_body()[:100]} "
                            f"on {'AB'[attempt.instance]} -> {attempt.body[:300]}")
        if problems:
            problems += self.log_summary(start, end)
        return problems

    def log_summary(self, start: float, end: float | None = None) -> list[str]:
        """The servers' warnings and errors between `start` and `end` (monotonic), counted."""
        offset = time.time() - time.monotonic()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + offset - 1))
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((end or time.monotonic()) + offset + 1))
        lines = []
        for instance in self.instances:
            counts: dict[str, int] = {}
            for line in instance.log_lines(lambda e: e.get("level") in ("warning", "error")
                                           and since <= e.get("time", "") <= until, limit=100000):
                entry = json.loads(line)
                text = ", ".join(f"{k}={v}" for k, v in entry.items() if k != "time")
                counts[text[:300]] = counts.get(text[:300], 0) + 1
            for text, count in sorted(counts.items(), key=lambda item: -item[1])[:5]:
                lines.append(f"log of {instance.name}: {count} × {text}")
        return lines

    def refusals_logged(self, start: float) -> list[str]:
        """The servers' log lines since `start` (monotonic) that say why a request got 503."""
        offset = time.time() - time.monotonic()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + offset - 1))
        lines = []
        for instance in self.instances:
            lines += instance.log_lines(lambda e: e.get("msg") in ("database busy", "database unavailable")
                                        and bool(e.get("error")) and since <= e.get("time", ""), limit=100000)
        return lines

    def hangs(self, start: float, end: float) -> list[str]:
        """Write attempts in [start, end] that took longer than the write deadline."""
        slow = [(write, a) for write, a in self.attempts_between(start, end) if a.seconds > self.write_deadline]
        return [f"{write.kind} POST {write.path} on {'AB'[a.instance]}: {a.seconds:.1f} s, then "
                f"{a.status or a.code}" for write, a in slow[:6]] + (
                    [f"… {len(slow)} attempts in all"] if len(slow) > 6 else [])

    def check_database(self, node: db.Node, what: str, writes=None, *,
                       everything: bool = False) -> tuple[list[str], checks.Findings]:
        """Checks the writes finished so far (or only `writes`) on `node`. Fails on what no
        earlier check reported (each scenario its own), or on everything found."""
        findings = checks.check(node, self.ledger, None if writes is None else {w.key for w in writes})
        detail(f"{what}: {findings.acknowledged} acknowledged writes checked on {node.name} ({findings.checked} "
               f"finished), lost {len(findings.lost)}, duplicated {len(findings.duplicated)} + "
               f"{len(findings.duplicated_by_retry)} by a retry, retries answered as a conflict with themselves "
               f"{len(findings.not_replayed)}, refused otherwise {len(findings.unexpected)}")
        fresh = findings.without(self.reported)
        return (findings if everything else fresh).problems(TOLERATE_NON_IDEMPOTENT), findings

    def instances_serve(self, after: float) -> list[str]:
        """Both instances: the same process as at the start, /healthz 200, and a write acknowledged
        after `after`."""
        problems = []
        for index, instance in enumerate(self.instances):
            if not instance.alive():
                problems.append(f"instance {instance.name} died; its log ends:\n{instance.log_tail()}")
                continue
            status, body = instance.get("/healthz")
            if status != 200:
                problems.append(f"instance {instance.name}: GET /healthz {status} {body[:200]}")
            if self.first_acknowledged_after(after, index) is None:
                problems.append(f"instance {instance.name} (pid {instance.pid}, never restarted) acknowledged no "
                                "write since")
        return problems

    def wait_for_writes(self, after: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            first = self.first_acknowledged_after(after)
            if first is not None:
                return first
            if self.load and self.load.errors:
                break
            time.sleep(0.05)
        return None

    def wait_replayed(self, primary: db.Node, standby: db.Node, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        target = primary.sql("SELECT pg_current_wal_lsn()::text")[0][0]

        def caught_up():
            try:
                rows = standby.sql("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))
            except Exception:  # noqa: BLE001 - still starting
                return False
            return bool(rows and rows[0][0])

        self.cluster.wait(caught_up, f"{standby.name} to replay up to {target}", timeout)

    def pair(self, timeout: float = 60) -> tuple[db.Node, db.Node]:
        return self.cluster.wait(self.cluster.synchronous_pair, "a primary with a streaming synchronous standby",
                                 timeout)

    # --- scenarios ---------------------------------------------------------------------------

    def scenario(self, name: str, function) -> None:
        if self.broken:
            self.results.append((name, False, ["not run: an earlier step left no working cluster or servers"]))
            say(f"FAIL {name}: not run (an earlier step left no working cluster or servers)")
            return
        say(f"--- {name}")
        started = time.monotonic()
        try:
            notes = function() or []
        except Deadline:
            raise
        except ScenarioFailed as failure:
            self.results.append((name, False, failure.problems))
            say(f"FAIL {name} ({time.monotonic() - started:.1f} s):")
            for problem in failure.problems:
                detail(problem)
            return
        except Exception as error:  # noqa: BLE001 - reported; the run goes on unless the cluster is lost
            where = traceback.extract_tb(error.__traceback__)[-1]
            message = f"{type(error).__name__} at {os.path.basename(where.filename)}:{where.lineno}: {error}"
            self.results.append((name, False, [message]))
            say(f"FAIL {name} ({time.monotonic() - started:.1f} s): {message}")
            self.broken = self.broken or isinstance(error, HarnessError)
            return
        self.results.append((name, True, notes))
        say(f"ok   {name} ({time.monotonic() - started:.1f} s)")

    def setup(self) -> list[str]:
        cluster = db.Cluster(self.venv_bin, self.resources, self.ports, self.out)
        self.cluster = cluster
        first, second = cluster.nodes
        first.start()
        cluster.wait(lambda: cluster.leader() is first, f"{first.name} to bootstrap and lead", 90)
        second.start()
        self.pair(120)
        cluster.create_role_and_database(first)
        detail(f"etcd {cluster.etcd.host}; {first.name} 127.0.0.1:{first.pg_port} (Patroni :{first.api_port}), "
               f"{second.name} 127.0.0.1:{second.pg_port} (Patroni :{second.api_port}); {cluster.describe()}")
        arguments = ["--signup-limit", "0", "--address-failure-limit", "0", "--db-timeout", f"{DB_TIMEOUT:g}"]
        url = cluster.url()
        detail(f"--db {url}")
        try:
            for name in ("A", "B"):
                self.instances.append(Instance(name, self.keybound, url, arguments, cluster.role_password,
                                               self.out, self.resources, self.ports))
        except HarnessError as error:
            self.broken = True
            lines = [line for line in str(error).splitlines() if '"level":"error"' in line or "error" in line.lower()]
            raise ScenarioFailed([f"keybound serve refused to start on {url}: " + (lines[-1] if lines else str(error))])
        status, document = self.instances[0].get("/openapi.yaml")
        self.idempotency = status == 200 and "Idempotency-Key" in document
        detail(f"instances A :{self.instances[0].port} (pid {self.instances[0].pid}), B :{self.instances[1].port} "
               f"(pid {self.instances[1].pid}); server documents Idempotency-Key: "
               f"{'yes' if self.idempotency else 'NO'}; write deadline {self.write_deadline:g} s "
               f"(pool wait and COMMIT, --db-timeout {DB_TIMEOUT:g} s each, + {DEADLINE_SLACK:g} s)")
        if TOLERATE_NON_IDEMPOTENT:
            detail("HA_TOLERATE_NON_IDEMPOTENT_RETRIES=1: retries that take effect twice or are answered as "
                   "conflicts are reported, not failed")
        return []

    def baseline(self) -> list[str]:
        started = time.monotonic()
        self.load = load.Load([i.port for i in self.instances], self.ledger, self.workers,
                              attempt_timeout=ATTEMPT_TIMEOUT, budget=WRITE_BUDGET)
        self.load.start()
        time.sleep(6)
        problems = self.server_errors(started) + self.instances_serve(started) + list(self.load.errors)
        primary, _ = self.pair()
        found, findings = self.check_database(primary, "baseline")
        if findings.acknowledged == 0:
            problems.append("no write was acknowledged in 6 s of load")
        problems += found
        if problems:
            raise ScenarioFailed(problems)
        return []

    def failover(self) -> list[str]:
        primary, standby = self.pair()
        time.sleep(2)
        pids = primary.kill()
        killed_at = time.monotonic()
        detail(f"SIGKILL to {primary.name}'s Patroni and postmaster (pids {pids}); {standby.name} is the "
               "synchronous standby")
        health: list[tuple[float, str, int]] = []  # (when, instance, status) of GET /healthz meanwhile
        polling = threading.Event()

        def poll_health() -> None:
            while not polling.is_set():
                for instance in self.instances:
                    health.append((time.monotonic(), instance.name, instance.get("/healthz", timeout=10)[0]))
                polling.wait(0.5)

        poller = threading.Thread(target=poll_health, daemon=True)
        poller.start()
        try:
            promoted = self.cluster.wait(lambda: self.cluster.leader() is standby and time.monotonic(),
                                         f"{standby.name} to be promoted", 90, interval=0.05)
        finally:
            polling.set()
            poller.join(15)
        first = self.wait_for_writes(killed_at, 60)
        problems = []
        if first is None:
            problems.append(f"no write was acknowledged within 60 s of the kill ({standby.name} primary after "
                            f"{promoted - killed_at:.1f} s)")
            problems += self.server_errors(killed_at) or self.log_summary(killed_at)
            raise ScenarioFailed(problems)
        self.rto = first - killed_at
        per_instance = []
        time.sleep(5)
        for index, instance in enumerate(self.instances):
            when = self.first_acknowledged_after(killed_at, index)
            per_instance.append(f"{instance.name} {when - killed_at:.1f} s" if when else f"{instance.name} none")
        errors = [a for _, a in self.attempts_between(killed_at, first) if not (a.status and a.status < 300)]
        outcomes: dict[str, int] = {}
        for attempt in errors:
            label = str(attempt.status or attempt.code)
            outcomes[label] = outcomes.get(label, 0) + 1
        detail(f"{standby.name} primary after {promoted - killed_at:.1f} s; RTO (kill -> first acknowledged write) "
               f"{self.rto:.2f} s, {first - promoted:+.2f} s after the promotion was seen; first write per "
               f"instance: {', '.join(per_instance)}")
        detail("answers until then: " + ", ".join(f"{k} × {v}" for k, v in sorted(outcomes.items())))
        outage = [(when, name, status) for when, name, status in health if killed_at + 1 < when < promoted - 1]
        wrong = [f"{name} {status} at +{when - killed_at:.1f} s" for when, name, status in outage if status != 503]
        detail(f"GET /healthz while there was no primary: {len(outage) - len(wrong)} × 503 of {len(outage)}")
        if wrong:
            problems.append("GET /healthz did not answer 503 while there was no primary: " + ", ".join(wrong[:6]))
        if first < promoted - 1.0:
            problems.append(f"a write was acknowledged {self.rto:.2f} s after the kill, {promoted - first:.1f} s before "
                            f"{standby.name} was primary: something of the killed {primary.name} still answered")
        if self.rto >= RTO_LIMIT:
            problems.append(f"RTO {self.rto:.1f} s is not under {RTO_LIMIT:g} s")
        problems += self.server_errors(killed_at) + self.instances_serve(first) + list(self.load.errors)
        found, _ = self.check_database(standby, "after the failover")
        problems += found
        if problems:
            raise ScenarioFailed(problems)
        return [f"RTO {self.rto:.2f} s"]

    def rejoin(self) -> list[str]:
        old = next(node for node in self.cluster.nodes if not node.alive())
        primary = self.cluster.leader()
        if primary is None:
            raise ScenarioFailed(["no primary to rejoin"])
        started = time.monotonic()
        old.start()
        self.pair(120)
        pair = self.cluster.synchronous_pair()
        back = time.monotonic() - started
        detail(f"{old.name} started again: synchronous standby of {pair[0].name} after {back:.1f} s "
               f"({self.cluster.describe()})")
        problems = []
        if pair != (primary, old):
            problems.append(f"expected {primary.name} primary and {old.name} synchronous standby: "
                            f"{self.cluster.describe()}")
        writes = [w for w in self.ledger.snapshot() if w.done]
        self.wait_replayed(primary, old)
        found, _ = self.check_database(old, f"on the rejoined {old.name}", writes)
        problems += found + self.server_errors(started) + list(self.load.errors)
        rewound = "pg_rewind" in open(old.log_path, errors="replace").read()
        detail(f"{old.name} {'was rewound (pg_rewind)' if rewound else 'needed no pg_rewind'}")
        if problems:
            raise ScenarioFailed(problems)
        return []

    def switchover(self) -> list[str]:
        primary, standby = self.pair()
        started = time.monotonic()
        output = self.cluster.patronictl("switchover", "--leader", primary.name, "--candidate", standby.name,
                                         "--force", db.SCOPE, timeout=90)
        said = [line for line in output.splitlines() if line.strip() and not line.startswith(("+", "|"))]
        detail(f"patronictl switchover --leader {primary.name} --candidate {standby.name} --force: "
               f"{' '.join(said)[:200]}")
        self.cluster.wait(lambda: self.cluster.leader() is standby, f"{standby.name} to lead", 60, interval=0.05)
        promoted = time.monotonic()
        first = self.wait_for_writes(promoted, 30)
        problems = []
        if first is None:
            problems.append(f"no write was acknowledged within 30 s of {standby.name} taking over")
        else:
            acked = sorted(a.ended for _, a in self.attempts_between(started - 5)
                           if a.status is not None and 200 <= a.status < 300)
            gap = max((b - a for a, b in zip(acked, acked[1:]) if b >= started), default=0.0)
            detail(f"{standby.name} primary {promoted - started:.1f} s after the switchover began; first write "
                   f"acknowledged after it {first - promoted:.2f} s later; longest pause between acknowledged "
                   f"writes {gap:.2f} s")
        time.sleep(4)
        self.pair(90)
        detail(self.cluster.describe())
        problems += self.server_errors(started) + list(self.load.errors)
        problems += self.instances_serve(first if first else promoted)
        found, _ = self.check_database(standby, "after the switchover")
        problems += found
        if problems:
            raise ScenarioFailed(problems)
        return []

    def standby_lost(self) -> list[str]:
        cluster = self.cluster
        primary, standby = self.pair()
        # Probes: a user with a bound device, made before the standby goes.
        stop = threading.Event()
        client = load.Client([i.port for i in self.instances], self.ledger, attempt_timeout=ATTEMPT_TIMEOUT,
                             budget=WRITE_BUDGET, stop=stop)
        username, password = f"probe-{os.getpid()}-{int(time.time())}", "probe-password-1"
        signup = client.write("signup", "/v1/accounts", {"username": username, "password": password},
                              facts={"username": username})
        login = client.write("login", "/v1/sessions/password",
                             {"username": username, "password": password, "client_id": "probe-app"},
                             facts={"user_id": (signup.response or {}).get("user_id"), "client_id": "probe-app"})
        if not (signup.acknowledged and login.acknowledged):
            raise ScenarioFailed([f"the probe user could not sign up and log in: {signup.final.body[:200]} "
                                  f"{login.final.body[:200]}"])
        user_id, token = signup.response["user_id"], login.response["access_token"]
        device_key = load.ec.generate_private_key(load.ec.SECP256R1())
        spki = load.b64url(device_key.public_key().public_bytes(load.serialization.Encoding.DER,
                                                                load.serialization.PublicFormat.SubjectPublicKeyInfo))
        bind = client.write("bind", "/v1/devices", {"public_key": spki, "name": "probe", "key_protection": "emulator"},
                            token, facts={"user_id": user_id, "public_key": spki})
        if not bind.acknowledged:
            raise ScenarioFailed([f"the probe device could not be bound: {bind.final.body[:200]}"])
        device_id = bind.response["device_id"]

        cluster.set_dynamic(synchronous_mode_strict=True)
        detail(f"patronictl edit-config --set synchronous_mode_strict=true: a commit on {primary.name} waits for "
               f"{standby.name}, whatever happens to it")
        lost_at = time.monotonic()
        standby.kill()
        detail(f"SIGKILL to {standby.name}'s Patroni and postmaster")
        time.sleep(1)
        probe_user = f"probe2-{os.getpid()}-{int(time.time())}"
        to = f"probe-acct-{os.getpid()}"
        probes = [
            ("signup", "/v1/accounts", {"username": probe_user, "password": password}, None,
             {"username": probe_user}),
            ("approval", "/v1/approvals", {"device_id": device_id,
                                           "action": {"type": "transfer", "amount": "1.5", "asset": "EUR", "to": to}},
             token, {"device_id": device_id, "to": to}),
            ("login", "/v1/sessions/password", {"username": username, "password": password, "client_id": "probe-2"},
             None, {"user_id": user_id, "client_id": "probe-2"}),
        ]
        writes: list[load.Write] = [None] * len(probes)

        def send(index: int) -> None:
            kind, path, body, bearer, facts = probes[index]
            probe_client = load.Client([i.port for i in self.instances], self.ledger,
                                       attempt_timeout=ATTEMPT_TIMEOUT, budget=WRITE_BUDGET, stop=stop)
            writes[index] = probe_client.write(kind, path, body, bearer, facts=facts, retry=False)
            probe_client.close()

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(probes))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(ATTEMPT_TIMEOUT + 5)
        problems = []
        for write in writes:
            attempt = write.final
            detail(f"while {standby.name} is gone: {write.kind} POST {write.path} -> {attempt.status or attempt.code} "
                   f"{attempt.code or ''} in {attempt.seconds:.2f} s (Retry-After {attempt.retry_after})")
            if attempt.status != 503 or attempt.seconds > self.write_deadline:
                problems.append(f"{write.kind} POST {write.path} while the synchronous standby is gone: "
                                f"{attempt.status or attempt.code} after {attempt.seconds:.1f} s (wanted 503 within "
                                f"{self.write_deadline:g} s): {attempt.body[:300]}")
            elif not attempt.retry_after:
                problems.append(f"{write.kind}: 503 without Retry-After")
        refused = sum(1 for write in writes if write.final.status == 503)
        reasons = self.refusals_logged(lost_at)
        detail(f"logged with a reason: {len(reasons)} lines for {refused} refused writes"
               + (f", e.g. {json.loads(reasons[0]).get('error', '')[:160]}" if reasons else ""))
        if len(reasons) < refused:
            problems.append(f"{refused} writes got 503 but the servers logged {len(reasons)} reasons")
        # The writes' commits went unanswered: A's health check must say it cannot commit now.
        status, body = self.instances[0].get("/healthz", timeout=self.write_deadline + 5)
        detail(f"GET /healthz on A meanwhile: {status} {body[:120]}")
        if status != 503:
            problems.append(f"GET /healthz on A while its commits wait for the lost standby: {status}, wanted 503")
        time.sleep(2)
        back_started = time.monotonic()
        standby.start()
        self.pair(120)
        back_at = time.monotonic()
        detail(f"{standby.name} started again: synchronous standby after {back_at - back_started:.1f} s "
               f"(writes were blocked {back_at - lost_at:.1f} s)")
        problems += self.hangs(lost_at, back_at)
        status, body = self.instances[0].get("/healthz", timeout=self.write_deadline + 5)
        detail(f"GET /healthz on A once {standby.name} is back: {status} {body[:120]}")
        if status != 200:
            problems.append(f"GET /healthz on A once the standby is back: {status}, wanted 200")
        for index, write in enumerate(writes):
            client.resend(write, probes[index][3], budget=30)
            attempt = write.final
            detail(f"sent again with the same Idempotency-Key: {write.kind} -> {attempt.status} {attempt.code or ''} "
                   f"({len(write.attempts)} attempts)")
        client.close()
        found, findings = self.check_database(primary, "the probes, once the standby is back", writes)
        problems += found
        for write in writes:
            if not write.acknowledged and not (TOLERATE_NON_IDEMPOTENT and any(write.key[:8] in n
                                                                                for n in findings.not_replayed)):
                problems.append(f"{write.kind} was not acknowledged once the standby was back: "
                                f"{write.final.status} {write.final.body[:200]}")
        cluster.set_dynamic(synchronous_mode_strict=False)
        problems += self.server_errors(lost_at) + list(self.load.errors)
        time.sleep(3)
        problems += self.instances_serve(back_at)
        if problems:
            raise ScenarioFailed(problems)
        return []

    def final(self) -> list[str]:
        if self.load:
            if not self.load.stop(ATTEMPT_TIMEOUT + 10):
                say("the load did not stop in time")
        primary = self.cluster.leader()
        if primary is None:
            raise ScenarioFailed([f"no primary at the end: {self.cluster.describe()}"])
        problems, findings = self.check_database(primary, "every write of the run", everything=True)
        self.lost = len(findings.lost)
        self.acknowledged = findings.acknowledged
        self.tolerated = len(findings.duplicated_by_retry) + len(findings.not_replayed)
        writes = self.ledger.snapshot()
        retried = sum(1 for w in writes if w.retried)
        kinds: dict[str, int] = {}
        for write in writes:
            if write.acknowledged:
                kinds[write.kind] = kinds.get(write.kind, 0) + 1
        detail(f"{len(writes)} writes, {self.acknowledged} acknowledged ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}), "
               f"{retried} retried")
        pair = self.cluster.synchronous_pair()
        if pair:
            self.wait_replayed(*pair)
            found, _ = self.check_database(pair[1], "on the standby", everything=True)
            problems += [problem for problem in found if problem not in problems]
        for instance in self.instances:
            if not instance.alive():
                problems.append(f"instance {instance.name} died; its log ends:\n{instance.log_tail()}")
        if problems:
            raise ScenarioFailed(problems)
        return []

    def main(self) -> int:
        scenarios = [("setup: etcd, 2 PostgreSQL under Patroni (synchronous), 2 keybound serve on the multi-host URL",
                      self.setup),
                     ("baseline: the mixed load on both instances", self.baseline),
                     ("failover: SIGKILL of the primary's Patroni and postmaster", self.failover),
                     ("rejoin: the old primary comes back as synchronous standby", self.rejoin),
                     ("switchover: patronictl switchover under load", self.switchover),
                     ("standby-lost: writes get 503 within the deadline, land once when it is back",
                      self.standby_lost),
                     ("final: every acknowledged write of the run, on the primary and the standby", self.final)]
        try:
            for name, function in scenarios:
                if name.startswith("final") and self.cluster is None:
                    continue
                self.scenario(name, function)
                if name.startswith("setup") and self.broken:
                    break
        finally:
            if self.load:
                self.load.stop(5)
        return self.report()

    def report(self) -> int:
        passed = sum(1 for _, ok, _ in self.results if ok)
        failed = len(self.results) - passed
        rto = f"{self.rto:.2f} s" if self.rto is not None else "not measured"
        lost = f"{self.lost} of {self.acknowledged}" if self.lost is not None else "not measured"
        say(f"RTO (SIGKILL of the primary -> first acknowledged write): {rto}")
        say(f"acknowledged writes lost: {lost}")
        ok = failed == 0 and self.lost == 0
        for name, good, problems in self.results:
            if not good:
                say(f"failed: {name.split(':')[0]}: {problems[0][:300] if problems else ''}")
        if TOLERATE_NON_IDEMPOTENT:
            say(f"HA_TOLERATE_NON_IDEMPOTENT_RETRIES=1: {self.tolerated} retried writes that took effect twice or "
                "were answered as a conflict with themselves were let pass")
        say(f"{'passed' if ok else 'FAILED'}")
        print(f"test-ha: {passed} passed, {failed} failed", flush=True)
        return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("keybound")
    parser.add_argument("--venv-bin", required=True)
    parser.add_argument("--deadline", type=int, default=600)
    parser.add_argument("--out", default=".build/ha-out")
    parser.add_argument("--workers", type=int, default=6)
    arguments = parser.parse_args()
    shutil.rmtree(arguments.out, ignore_errors=True)
    os.makedirs(arguments.out)
    run = Run(os.path.abspath(arguments.keybound), os.path.abspath(arguments.out), arguments.workers,
              arguments.venv_bin)

    def on_alarm(signum, frame):
        raise Deadline()

    def on_signal(signum, frame):
        say(f"FAILED: stopped by signal {signum}; cleaning up")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.alarm(arguments.deadline)
    started = time.monotonic()
    try:
        status = run.main()
    except Deadline:
        say(f"FAILED: the run passed its deadline of {arguments.deadline} s")
        run.report()
        status = 1
    finally:
        signal.alarm(0)
        run.resources.close()
    say(f"took {time.monotonic() - started:.0f} s; logs in {arguments.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
