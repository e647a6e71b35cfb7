"""What the interop suite runs against: a live `keybound serve` with `--issuer`, on SQLite or on a
throwaway PostgreSQL cluster, and the operator's side (registering OAuth clients).

Everything started here is stopped by `Resources.close()`, which the runner calls on exit, on
SIGTERM/SIGINT and on its own deadline; a PostgreSQL cluster also has a watchdog shell that stops
it and deletes its folder should this process die without cleaning up (SIGKILL).
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import random
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import time


class HarnessError(RuntimeError):
    """The environment could not be set up (the server or PostgreSQL did not start)."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return min(int(f.read().split()[0]), 32768)
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(taken: set[int]) -> int:
    """A port free on 127.0.0.1 now, below the kernel's ephemeral range, so that no outgoing
    connection takes it between this probe and the server's bind (PITFALLS.md)."""
    for _ in range(200):
        port = random.randrange(10000, _ephemeral_start())
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise HarnessError("no free loopback port below the ephemeral range")


def watchdog(cleanup: str, name: str) -> None:
    """A detached shell that runs `cleanup` (shell code) once this process is gone without having
    cleaned up itself (SIGKILL, a crash): it waits while this process lives. It ignores SIGINT,
    SIGHUP and SIGTERM, which a Ctrl-C or a CI's stop sends to the whole group, so that it outlives
    us; `cleanup` must do nothing when there is nothing left to do."""
    script = f"trap '' INT HUP TERM\nwhile kill -0 \"$1\" 2>/dev/null; do sleep 1; done\n{cleanup}\n"
    subprocess.run(["/bin/sh", "-c", f"({script}) >/dev/null 2>&1 &", name, str(os.getpid())], check=True,
                   timeout=10)


class Resources:
    """Processes and folders to end and delete, in reverse order of creation."""

    def __init__(self) -> None:
        self._closers: list = []

    def add(self, closer) -> None:
        self._closers.append(closer)

    def close(self) -> None:
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception as error:  # noqa: BLE001 - clean-up goes on
                print(f"oidc-interop: clean-up: {error}", flush=True)


# --- PostgreSQL ---------------------------------------------------------------------------------


def _postgres_binaries() -> str | None:
    explicit = os.environ.get("KEYBOUND_TEST_PG_BIN")
    candidates = [explicit] if explicit else []
    root = "/usr/lib/postgresql"
    if not explicit and os.path.isdir(root):
        versions = sorted((v for v in os.listdir(root) if v.isdigit()), key=int, reverse=True)
        candidates += [f"{root}/{v}/bin" for v in versions]
    if not explicit:
        candidates += os.environ.get("PATH", "").split(":")
    for folder in candidates:
        if all(os.access(os.path.join(folder, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "psql")):
            return folder
    return None


class PostgresCluster:
    """A throwaway cluster as Tests/KeyboundTestSupport/PostgresCluster.swift makes one: initdb into
    a temporary folder, pg_ctl start on a free loopback port (scram-sha-256 over TCP for the
    server's role, trust on the Unix socket in the folder for psql), stopped and deleted by
    `close()` or, if this process dies first, by a watchdog."""

    role = "keybound"

    def __init__(self, resources: Resources, ports: set[int]) -> None:
        binaries = _postgres_binaries()
        if binaries is None:
            raise HarnessError(
                "PostgreSQL's initdb, pg_ctl and psql were not found: run `make deps`, which installs "
                "Debian's postgresql (or set KEYBOUND_TEST_PG_BIN to their folder)"
            )
        self.binaries = binaries
        self.run_as: list[str] = []
        owner = None
        if os.getuid() == 0:
            # initdb refuses to run as root: PostgreSQL's programs run as the postgres user.
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                raise HarnessError("running as root, but there is no postgres user to run initdb as") from None
            runuser = shutil.which("runuser") or "/usr/sbin/runuser"
            self.run_as = [runuser, "-u", "postgres", "--"]
            owner = (entry.pw_uid, entry.pw_gid)
        self.folder = tempfile.mkdtemp(prefix="keybound-oidc-pg-")
        os.chmod(self.folder, 0o700)
        if owner:
            os.chown(self.folder, *owner)
        self.data = os.path.join(self.folder, "data")
        self.password = "pw-" + secrets.token_hex(16)
        resources.add(self.close)
        self._watchdog()
        password_file = os.path.join(self.folder, "superuser-password")
        with open(password_file, "w") as f:
            f.write(secrets.token_hex(16))
        if owner:
            os.chown(password_file, *owner)
        self._pg(
            "initdb", "-D", self.data, "-U", "postgres", "--no-locale", "--encoding=UTF8",
            "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={password_file}",
            "--no-sync", "--no-instructions",
        )
        os.unlink(password_file)
        last = None
        for _ in range(5):
            port = free_port(ports)
            settings = {
                "listen_addresses": "127.0.0.1", "port": str(port), "unix_socket_directories": self.folder,
                "shared_buffers": "16MB", "fsync": "off", "full_page_writes": "off", "max_connections": "100",
                "log_min_messages": "warning",
            }
            options = " ".join(f"-c {name}={value}" for name, value in settings.items())
            try:
                self._pg("pg_ctl", "-D", self.data, "-l", os.path.join(self.folder, "log"), "-w", "-t", "60",
                         "-o", options, "start")
                self.port = port
                break
            except HarnessError as error:
                last = error
        else:
            raise last or HarnessError("pg_ctl start failed")
        self.psql(f"CREATE ROLE {self.role} LOGIN PASSWORD '{self.password}'")
        self.version = self.psql("SHOW server_version")

    def _pg(self, tool: str, *arguments: str) -> str:
        command = self.run_as + [os.path.join(self.binaries, tool), *arguments]
        done = subprocess.run(command, capture_output=True, text=True, cwd="/", timeout=120,
                              env={**os.environ, "LC_ALL": "C"})
        if done.returncode != 0:
            log = os.path.join(self.folder, "log")
            tail = open(log).read()[-2000:] if os.path.exists(log) else ""
            raise HarnessError(f"{tool} failed ({done.returncode}): {done.stderr.strip()[:2000]}\n{tail}")
        return done.stdout.strip()

    def _watchdog(self) -> None:
        """Stops the cluster and deletes its folder should this process die first."""
        stop = " ".join(shlex.quote(p) for p in self.run_as + [
            os.path.join(self.binaries, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"])
        folder = shlex.quote(self.folder)
        watchdog(f"if [ -d {folder} ]; then {stop} >/dev/null 2>&1; rm -rf {folder}; fi", "keybound-oidc-pg-watchdog")

    def psql(self, statement: str, database: str = "postgres") -> str:
        """Runs SQL as the superuser over the Unix socket; returns the unaligned tuples."""
        command = [os.path.join(self.binaries, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                   "-h", self.folder, "-p", str(self.port), "-U", "postgres", "-d", database, "-c", statement]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "LC_ALL": "C", "PGPASSWORD": ""})
        if done.returncode != 0:
            raise HarnessError(f"psql: {done.stderr.strip()}")
        return done.stdout.strip()

    def create_database(self) -> str:
        name = "kb_" + secrets.token_hex(8)
        self.psql(f"CREATE DATABASE {name} OWNER {self.role}")
        return name

    def close(self) -> None:
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            try:
                self._pg("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
            except (HarnessError, subprocess.TimeoutExpired) as error:
                print(f"oidc-interop: stopping PostgreSQL: {error}", flush=True)
        shutil.rmtree(self.folder, ignore_errors=True)


# --- the server ---------------------------------------------------------------------------------


class Engine:
    """Where the server keeps its data, and the environment its operator commands need."""

    name: str
    url: str
    environment: dict[str, str] = {}


class SQLiteEngine(Engine):
    name = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self.url = f"sqlite:{self.path}"
        self.environment = {}



class PostgresEngine(Engine):
    name = "postgresql"

    def __init__(self, cluster: PostgresCluster) -> None:
        self.cluster = cluster
        self.database = cluster.create_database()
        self.url = f"postgres://{cluster.role}@127.0.0.1:{cluster.port}/{self.database}"
        # The PostgreSQL run also seals the signing keys at rest (KEYBOUND_KEY_ENCRYPTION_KEY).
        self.environment = {
            "KEYBOUND_DB_PASSWORD": cluster.password,
            "KEYBOUND_KEY_ENCRYPTION_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        }


#: The `--ciba-interval` of the server: the seconds a CIBA client waits between two polls.
CIBA_INTERVAL = 1


class Server:
    """`keybound serve --issuer http://127.0.0.1:PORT` on a port chosen before it starts (the
    issuer names the port): a free port below the ephemeral range, another one if the bind fails."""

    def __init__(self, keybound: str, engine: Engine, folder: str, resources: Resources, ports: set[int]) -> None:
        self.keybound = keybound
        self.engine = engine
        self.log_path = os.path.join(folder, f"server-{engine.name}.log")
        self.process: subprocess.Popen | None = None
        resources.add(self.stop)
        last = ""
        for _ in range(5):
            port = free_port(ports)
            issuer = f"http://127.0.0.1:{port}"
            log = open(self.log_path, "w")
            # Sign-up and per-address failure limits off: the suite signs up and fails logins from
            # one address on purpose. CIBA clients poll every second (the interval the server gives
            # them), and ping mode notifies a receiver on loopback, which the SSRF guard allows only
            # with --allow-private-webhooks.
            self.process = subprocess.Popen(
                [keybound, "serve", "--listen", f"127.0.0.1:{port}", "--issuer", issuer, "--db", engine.url,
                 "--signup-limit", "0", "--address-failure-limit", "0", "--ciba-interval", str(CIBA_INTERVAL),
                 "--allow-private-webhooks"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env={**os.environ, **engine.environment},
            )
            log.close()
            # Should this process die without stopping it, the server goes too: the watchdog ends
            # that pid only while it is still this server (its command line names this database).
            pid, mark = self.process.pid, shlex.quote(engine.url)
            watchdog(f"if tr '\\0' ' ' </proc/{pid}/cmdline 2>/dev/null | grep -qF -- {mark}; then "
                     f"kill -TERM {pid}; fi", "keybound-oidc-server-watchdog")
            if self._wait_listening():
                self.port, self.issuer = port, issuer
                return
            last = open(self.log_path).read()[-3000:]
            self.stop()
            if "address" not in last.lower() or "in use" not in last.lower():
                break
        raise HarnessError(f"keybound serve did not start on {engine.name}; its log ends:\n{last}")

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with open(self.log_path) as log:
                if '"msg":"listening"' in log.read():
                    return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.process = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path) as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return ""

    def request_log(self) -> list[dict]:
        """The server's request log lines (JSON), for the figures and the 5xx check."""
        entries = []
        with open(self.log_path) as log:
            for line in log:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "request":
                    entries.append(entry)
        return entries

    def register_client(self, name: str, redirect_uris: list[str], **options) -> dict:
        """Registers an OAuth client on this server's database (`register_client`)."""
        return register_client(self.keybound, self.engine, name, redirect_uris, **options)


# --- the operator's side ------------------------------------------------------------------------


def register_client(keybound: str, engine: Engine, name: str, redirect_uris: list[str], *,
                    confidential: bool = False, jwks: dict | None = None, scopes: list[str] | None = None,
                    dpop_required: bool = False, ciba: bool = False,
                    notification_endpoint: str | None = None) -> dict:
    """Registers an OAuth client as the operator does, with `keybound client add … --json`, and
    returns {"client_id", "secret"?, "ciba"?}. `dpop_required`: `--dpop-required`, the client's
    token requests must carry a DPoP proof. `ciba`: `--ciba`, a CIBA client (no redirect URI
    needed), in poll mode, or in ping mode with `notification_endpoint`
    (`--backchannel-notification-endpoint`); "ciba" in the answer is the mode the server chose."""
    arguments = [keybound, "client", "add", name, "--db", engine.url, "--json"]
    if ciba:
        arguments.append("--ciba")
    if notification_endpoint:
        arguments += ["--backchannel-notification-endpoint", notification_endpoint]
    for uri in redirect_uris:
        arguments += ["--redirect-uri", uri]
    for scope in scopes or []:
        arguments += ["--scope", scope]
    if confidential:
        arguments.append("--confidential")
    if dpop_required:
        arguments.append("--dpop-required")
    jwks_file = None
    if jwks is not None:
        jwks_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(jwks, jwks_file)
        jwks_file.close()
        arguments += ["--jwks", jwks_file.name]
    try:
        done = subprocess.run(arguments, capture_output=True, text=True, timeout=60,
                              env={**os.environ, **engine.environment})
    finally:
        if jwks_file:
            os.unlink(jwks_file.name)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = {}
    if done.returncode != 0 or not answer.get("ok"):
        raise HarnessError(f"keybound client add: {done.returncode} {done.stdout} {done.stderr}")
    # `keybound client add --json` names the secret client_secret, shown only for a confidential client.
    return {"ok": True, "client_id": answer["client_id"],
            **({"secret": answer["client_secret"]} if answer.get("client_secret") else {}),
            **({"ciba": answer["ciba"]} if "ciba" in answer else {})}
