"""The database side of `make test-ha`: etcd and two PostgreSQL 15 nodes under Patroni, on
loopback, in temporary folders; and the operator's view of them (who is primary, patronictl, SQL).

Ports are below the kernel's ephemeral range (a node restarted on an ephemeral port can find it
taken by an outgoing connection). Everything started here is stopped by `Resources.close()`, and a
watchdog shell stops the processes and deletes the folder should the runner die first (SIGKILL).
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import psycopg

from harness import HarnessError, Resources, _postgres_binaries, free_port, watchdog

#: Patroni's timing (seconds). ttl is Patroni's minimum: the leader key of a dead primary expires
#: after at most this long, so a failover takes about ttl + loop_wait. Patroni requires
#: loop_wait + 2 × retry_timeout ≤ ttl.
TTL, LOOP_WAIT, RETRY_TIMEOUT = 20, 2, 9
SCOPE = "keybound-ha"
ROLE, DATABASE = "keybound", "keybound"


class Owner:
    """Who PostgreSQL's programs (and so Patroni) run as: the postgres user when we are root
    (postgres refuses root), else ourselves."""

    def __init__(self) -> None:
        self.root = os.getuid() == 0
        if self.root:
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                raise HarnessError("running as root, but there is no postgres user to run PostgreSQL as") from None
            self.uid, self.gid = entry.pw_uid, entry.pw_gid
        else:
            self.uid, self.gid = os.getuid(), os.getgid()

    def popen_options(self) -> dict:
        """Popen arguments that run the child as this user directly (no runuser in between, so
        that the pid we hold is the program's own and SIGKILL reaches it)."""
        if not self.root:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": [],
                "env": {**os.environ, "HOME": self.home(), "USER": "postgres", "LOGNAME": "postgres"}}

    def home(self) -> str:
        return pwd.getpwuid(self.uid).pw_dir if self.root else os.environ.get("HOME", "/")

    def chown(self, path: str) -> None:
        if self.root:
            os.chown(path, self.uid, self.gid)


def http_json(url: str, method: str = "GET", body: dict | None = None, timeout: float = 5) -> tuple[int, object]:
    """A Patroni REST call: (status, decoded JSON or text); (0, error) when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode(errors="replace")
    except (OSError, ValueError) as error:
        return 0, str(error)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


class Etcd:
    """One etcd member (Debian's etcd-server, 3.4) on two loopback ports; its data on tmpfs when
    there is one (it syncs every write, and the machine is shared)."""

    def __init__(self, folder: str, ports: set[int], resources: Resources, log_folder: str) -> None:
        binary = shutil.which("etcd")
        if binary is None:
            raise HarnessError("etcd was not found: scripts/test-ha.sh installs Debian's etcd-server")
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else folder
        self.data = tempfile.mkdtemp(prefix="keybound-ha-etcd-", dir=base)
        resources.add(lambda: shutil.rmtree(self.data, ignore_errors=True))
        self.log_path = os.path.join(log_folder, "etcd.log")
        self.process: subprocess.Popen | None = None
        resources.add(self.stop)
        for _ in range(5):
            client, peer = free_port(ports), free_port(ports)
            self.client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
            with open(self.log_path, "w") as log:
                self.process = subprocess.Popen(
                    [binary, "--name", "ha", "--data-dir", self.data,
                     "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
                     "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                     "--initial-cluster", f"ha={peer_url}", "--initial-cluster-state", "new",
                     "--log-level", "warn", "--logger", "zap"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
            with open(os.path.join(folder, "etcd.pid"), "w") as f:
                f.write(str(self.process.pid))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.process.poll() is None:
                status, answer = http_json(self.client_url + "/health", timeout=2)
                if status == 200 and isinstance(answer, dict) and answer.get("health") == "true":
                    self.host = f"127.0.0.1:{client}"
                    return
                time.sleep(0.2)
            self.stop()
            shutil.rmtree(self.data, ignore_errors=True)
            os.makedirs(self.data, mode=0o700)
        raise HarnessError(f"etcd did not start; its log ends:\n{_tail(self.log_path)}")

    def stop(self) -> None:
        _end(self.process, 10)
        self.process = None


class Node:
    """One PostgreSQL node under Patroni: its own folder (data, Unix socket, Patroni's YAML),
    PostgreSQL on `pg_port`, Patroni's REST API on `api_port`."""

    def __init__(self, name: str, cluster: "Cluster", folder: str, ports: set[int]) -> None:
        self.name, self.cluster = name, cluster
        self.folder = os.path.join(folder, name)
        os.makedirs(self.folder, mode=0o700)
        cluster.owner.chown(self.folder)
        self.data = os.path.join(self.folder, "data")
        self.pg_port, self.api_port = free_port(ports), free_port(ports)
        self.api = f"http://127.0.0.1:{self.api_port}"
        self.config_path = os.path.join(self.folder, "patroni.yml")
        self.log_path = os.path.join(cluster.log_folder, f"patroni-{name}.log")
        self.process: subprocess.Popen | None = None
        self.starts = 0
        with open(self.config_path, "w") as f:
            json.dump(self._config(), f, indent=1)  # JSON is YAML
        cluster.owner.chown(self.config_path)

    def _config(self) -> dict:
        cluster = self.cluster
        return {
            "scope": SCOPE,
            "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.api_port}", "connect_address": f"127.0.0.1:{self.api_port}"},
            "etcd3": {"hosts": cluster.etcd.host, "protocol": "http"},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 1048576,
                    # Every commit waits for the standby; Patroni promotes only that standby.
                    "synchronous_mode": True,
                    "synchronous_mode_strict": False,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            # A standby notices the new primary this soon (5 s by default).
                            "wal_retrieve_retry_interval": "100ms",
                            "max_connections": 100,
                            "shared_buffers": "32MB",
                            # No OS crash here, only processes killed: the page cache keeps what
                            # fsync would have forced to disk, and the machine is shared.
                            "fsync": "off",
                            "full_page_writes": "on",
                            "log_min_messages": "warning",
                            "log_connections": "off",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, "no-locale", "data-checksums"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": self.data,
                "bin_dir": cluster.binaries,
                "pgpass": os.path.join(self.folder, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": cluster.superuser_password},
                    "replication": {"username": "replicator", "password": cluster.replication_password},
                },
                "parameters": {"unix_socket_directories": self.folder},
                "pg_hba": [
                    "local all all trust",
                    "host replication replicator 127.0.0.1/32 scram-sha-256",
                    "host all all 127.0.0.1/32 scram-sha-256",
                ],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    # --- processes ---------------------------------------------------------------------------

    def start(self) -> None:
        """Starts Patroni (which starts, bootstraps, clones or rewinds PostgreSQL itself)."""
        if self.alive():
            return
        self.starts += 1
        with open(self.log_path, "a") as log:
            log.write(f"--- start {self.starts} at {time.strftime('%H:%M:%S')} ---\n")
            log.flush()
            self.process = subprocess.Popen(
                [self.cluster.patroni, self.config_path], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=self.folder, start_new_session=True, **self.cluster.owner.popen_options())
        with open(os.path.join(self.folder, "patroni.pid"), "w") as f:
            f.write(str(self.process.pid))

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return None
        return pid if _running(pid) else None

    def kill(self) -> list[int]:
        """The node dies: SIGKILL of Patroni, then at once of the postmaster and of every
        PostgreSQL process under it, so that no backend outlives it for a moment and acknowledges a
        commit (each backend is a process group of its own, and one that is not waiting for its
        client finishes its transaction before it notices the postmaster is gone). The
        postmaster is stopped first, so that it forks nothing meanwhile. Patroni goes first:
        alive, it would restart the postmaster in place. Returns the pids of Patroni and the
        postmaster."""
        killed = []
        postmaster = self.postmaster_pid()
        if self.alive():
            self.process.kill()
            self.process.wait(timeout=10)
            killed.append(self.process.pid)
        if postmaster:
            try:
                os.kill(postmaster, signal.SIGSTOP)
                for child in _children(postmaster):
                    try:
                        os.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                os.kill(postmaster, signal.SIGKILL)
                killed.append(postmaster)
            except ProcessLookupError:
                pass
        self.process = None
        return killed

    def stop(self) -> None:
        """Patroni stops PostgreSQL on SIGTERM; should either hang, both are killed."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        deadline = time.monotonic() + 10
        while self.postmaster_pid() and time.monotonic() < deadline:
            time.sleep(0.1)

    # --- state ---------------------------------------------------------------------------------

    def patroni_state(self) -> dict:
        """GET /patroni: role (primary/replica), state (running/…), timeline, replication_state."""
        status, answer = http_json(self.api + "/patroni", timeout=3)
        return answer if status in (200, 503) and isinstance(answer, dict) else {}

    def sql(self, statement: str, parameters: tuple = (), timeout: float = 10) -> list[tuple]:
        """SQL on this node as the superuser, over its Unix socket (trust)."""
        with psycopg.connect(host=self.folder, port=self.pg_port, user="postgres", dbname=DATABASE,
                             connect_timeout=max(1, int(timeout)), autocommit=True,
                             options=f"-c statement_timeout={int(timeout * 1000)}") as connection:
            return connection.execute(statement, parameters).fetchall()

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)


class Cluster:
    """etcd and two Patroni nodes in one temporary folder."""

    def __init__(self, venv_bin: str, resources: Resources, ports: set[int], log_folder: str) -> None:
        self.owner = Owner()
        self.binaries = _postgres_binaries()
        if self.binaries is None:
            raise HarnessError("PostgreSQL's initdb and pg_ctl were not found: run `make deps`")
        self.patroni = os.path.join(venv_bin, "patroni")
        self.patronictl_path = os.path.join(venv_bin, "patronictl")
        self.log_folder = log_folder
        self.folder = tempfile.mkdtemp(prefix="keybound-ha-")
        os.chmod(self.folder, 0o700)
        self.owner.chown(self.folder)
        resources.add(lambda: shutil.rmtree(self.folder, ignore_errors=True))
        self.superuser_password = "su-" + secrets.token_hex(16)
        self.replication_password = "repl-" + secrets.token_hex(16)
        self.role_password = "kb-" + secrets.token_hex(16)
        self._check_patroni_runs()
        self.etcd = Etcd(self.folder, ports, resources, log_folder)
        self.nodes = [Node("pg1", self, self.folder, ports), Node("pg2", self, self.folder, ports)]
        # Reverse order of creation: the nodes stop before etcd, the folder goes last.
        resources.add(self.stop)
        self._watchdog()
        self.ctl_config = os.path.join(self.folder, "patronictl.yml")
        with open(self.ctl_config, "w") as f:
            json.dump({"scope": SCOPE, "etcd3": {"hosts": self.etcd.host, "protocol": "http"}}, f)

    def _watchdog(self) -> None:
        """Should the runner die without cleaning up, one shell kills what runs now (the pids
        are read then, from the files each start writes: nodes restart during the run) and
        deletes the folders."""
        lines = []
        for node in self.nodes:
            lines.append(_kill_pid_file(os.path.join(node.folder, "patroni.pid"), node.config_path))
            lines.append(_kill_pid_file(os.path.join(node.data, "postmaster.pid"), node.data))
        lines.append(_kill_pid_file(os.path.join(self.folder, "etcd.pid"), self.etcd.data))
        lines.append(f"sleep 1; rm -rf {shlex.quote(self.folder)} {shlex.quote(self.etcd.data)}")
        watchdog("\n".join(lines), "keybound-ha-cluster-watchdog")

    def _check_patroni_runs(self) -> None:
        """The postgres user must be able to run the venv's Patroni (not so under a root-only
        folder): say so now rather than through a node that never starts."""
        options = self.owner.popen_options()
        done = subprocess.run([self.patroni, "--version"], capture_output=True, text=True, timeout=60, cwd="/",
                              **options)
        if done.returncode != 0:
            raise HarnessError(f"{self.patroni} does not run as the postgres user ({done.returncode}): "
                               f"{done.stderr.strip()[-500:]}")

    def stop(self) -> None:
        for node in self.nodes:
            try:
                node.stop()
            except Exception as error:  # noqa: BLE001 - the others still get stopped
                print(f"test-ha: stopping {node.name}: {error}", flush=True)

    # --- who is who --------------------------------------------------------------------------

    def members(self) -> list[dict]:
        """Patroni's /cluster from any node that answers: name, role (leader, sync_standby,
        replica), state, timeline, lag."""
        for node in self.nodes:
            status, answer = http_json(node.api + "/cluster", timeout=3)
            if status == 200 and isinstance(answer, dict):
                return answer.get("members", [])
        return []

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def leader(self) -> Node | None:
        """The node that is primary and running, by its own REST API (not only the DCS)."""
        for node in self.nodes:
            state = node.patroni_state()
            if state.get("role") in ("primary", "master") and state.get("state") == "running":
                return node
        return None

    def wait(self, condition, what: str, timeout: float, interval: float = 0.2):
        """Polls `condition()` until it is truthy (returned), or raises HarnessError naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise HarnessError(f"timed out after {timeout:.0f} s waiting for {what}; members: "
                                   f"{self.describe()}")
            time.sleep(interval)

    def synchronous_pair(self) -> tuple[Node, Node] | None:
        """(primary, its synchronous standby, streaming), once both are so."""
        members = self.members()
        leader = next((m for m in members if m.get("role") == "leader" and m.get("state") == "running"), None)
        standby = next((m for m in members if m.get("role") == "sync_standby"
                        and m.get("state") in ("streaming", "running")), None)
        if leader and standby:
            return self.node(leader["name"]), self.node(standby["name"])
        return None

    def describe(self) -> str:
        members = self.members()
        if not members:
            return "(no node answers)"
        return ", ".join(f"{m.get('name')} {m.get('role')} {m.get('state')} tl{m.get('timeline', '?')}"
                         + (f" lag {m['lag']}" if m.get("lag") not in (None, 0, "") else "") for m in members)

    # --- the operator --------------------------------------------------------------------------

    def patronictl(self, *arguments: str, timeout: float = 60) -> str:
        done = subprocess.run([self.patronictl_path, "-c", self.ctl_config, *arguments], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise HarnessError(f"patronictl {' '.join(arguments)}: {done.returncode} {done.stdout.strip()} "
                               f"{done.stderr.strip()}")
        return done.stdout

    def set_dynamic(self, **settings) -> None:
        """Changes the cluster's dynamic configuration (in etcd) as an operator does, with
        `patronictl edit-config --set`, then waits for the primary to apply it (one loop)."""
        arguments = []
        for key, value in settings.items():
            arguments += ["--set", f"{key}={json.dumps(value)}"]
        self.patronictl("edit-config", "--force", *arguments)

        def applied():
            status, answer = http_json(self.nodes[0].api + "/config", timeout=3)
            if status != 200:
                status, answer = http_json(self.nodes[1].api + "/config", timeout=3)
            return isinstance(answer, dict) and all(answer.get(k) == v for k, v in settings.items())

        self.wait(applied, f"the dynamic configuration {settings}", 30)
        time.sleep(LOOP_WAIT * 2 + 1)

    def create_role_and_database(self, primary: Node) -> None:
        with psycopg.connect(host=primary.folder, port=primary.pg_port, user="postgres", dbname="postgres",
                             autocommit=True, connect_timeout=10) as connection:
            exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchall()
            if not exists:
                connection.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{self.role_password}'")
            if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchall():
                connection.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")

    def url(self) -> str:
        """The URL every `keybound serve` gets: both nodes, the writable one wanted."""
        hosts = ",".join(f"127.0.0.1:{node.pg_port}" for node in self.nodes)
        return f"postgres://{ROLE}@{hosts}/{DATABASE}?target_session_attrs=read-write"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry))
    return found


def _end(process: subprocess.Popen | None, grace: float) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _kill_pid_file(pid_file: str, mark: str) -> str:
    """Shell for a watchdog: SIGKILL the pid on the first line of `pid_file` if it is still the
    process whose command line names `mark` (never a stranger that got the pid since)."""
    return (f"p=$(head -n1 {shlex.quote(pid_file)} 2>/dev/null); case $p in (''|*[!0-9]*) ;; (*) "
            f"if tr '\\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -qF -- {shlex.quote(mark)}; then "
            f"kill -KILL $p; fi;; esac")


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
