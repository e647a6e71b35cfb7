"""Runs the interop flows (flows.py) against a live `keybound serve --issuer`, on SQLite and on a
throwaway PostgreSQL cluster, and prints one line per flow and a one-line summary.

    run.py KEYBOUND [--engines sqlite,postgresql] [--deadline SEC] [--out DIR]

Exit status 0 only when every flow passed on every engine. PostgreSQL that cannot start fails the
run (loudly), as does a run that outlives its deadline. Everything started is stopped on exit.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback

# authlib refuses plain http unless told this is development; the issuer here is http://127.0.0.1.
os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"

import flows  # noqa: E402
import harness  # noqa: E402


class Deadline(Exception):
    pass


def _on_alarm(signum, frame):
    raise Deadline("the run passed its deadline")


def _on_signal(signum, frame):
    print(f"oidc-interop: FAILED: stopped by signal {signum}; cleaning up", flush=True)
    raise SystemExit(128 + signum)


def run_engine(name: str, keybound: str, out: str, resources: harness.Resources, ports: set[int]):
    """Starts the engine and the server, runs every flow; returns (passed, failed, notes)."""
    folder = tempfile.mkdtemp(prefix=f"keybound-oidc-{name}-")
    resources.add(lambda: shutil.rmtree(folder, ignore_errors=True))
    harness.watchdog(f"rm -rf {shlex.quote(folder)}", "keybound-oidc-folder-watchdog")
    if name == "sqlite":
        engine = harness.SQLiteEngine(os.path.join(folder, "keybound.sqlite"))
        detail = "SQLite"
    else:
        cluster = harness.PostgresCluster(resources, ports)
        engine = harness.PostgresEngine(cluster)
        detail = f"PostgreSQL {cluster.version} on 127.0.0.1:{cluster.port}"
    server = harness.Server(keybound, engine, out, resources, ports)
    print(f"oidc-interop: {name}: keybound serve --issuer {server.issuer} on {detail}; clients registered "
          "with keybound client add", flush=True)
    flows.OBSERVER.__init__()
    context = flows.Context(server)
    resources.add(context.close)
    passed, failed, defects = [], [], []
    for label, function in flows.FLOWS:
        known = flows.KNOWN_DEFECTS.get(label)
        started = time.monotonic()
        try:
            function(context)
        except Deadline:
            raise
        except Exception as failure:  # noqa: BLE001 - a failing flow is reported, the run goes on
            where = traceback.extract_tb(failure.__traceback__)
            line = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(where)
                         if f.filename.endswith(("flows.py", "harness.py")) and not f.name.startswith("expect")),
                        "?")
            message = str(failure).strip() or type(failure).__name__
            if known and known[0] in message:
                defects.append(label)
                print(f"  KNOWN SERVER DEFECT {label}: {known[1]}", flush=True)
                continue
            failed.append(label)
            print(f"  FAIL {label} [{line}]: {type(failure).__name__}: {message}", flush=True)
            if not server.alive():
                print(f"  the server died; its log ends:\n{server.log_tail()}", flush=True)
                break
            continue
        if known:
            failed.append(label)
            print(f"  FAIL {label}: passes now that the server is fixed: delete its entry in KNOWN_DEFECTS "
                  f"(scripts/oidc/flows.py)", flush=True)
            continue
        passed.append(label)
        print(f"  ok   {label} ({time.monotonic() - started:.1f} s)", flush=True)
    for claim, value in flows.DESIGN_DEVIATIONS.items():
        print(f"  note: {claim} lacks {value}, which OIDC Discovery 1.0 section 3 requires (DESIGN.md: ES256 "
              f"only); not counted as a failure", flush=True)
    requests_logged = len(server.request_log())
    counters = ", ".join(f"{v} {k}" for k, v in sorted(context.counters.items()))
    print(f"oidc-interop: {name}: {len(passed)}/{len(flows.FLOWS)} flows passed, {len(defects)} known server "
          f"defects, {len(failed)} failed; {flows.OBSERVER.responses} "
          f"responses ({flows.OBSERVER.oauth_errors} OAuth errors checked), {requests_logged} requests in the "
          f"server's log; {counters}", flush=True)
    server.stop()
    return passed, failed, defects


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("keybound")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--deadline", type=int, default=900)
    parser.add_argument("--out", default=".build/oidc-interop-out")
    arguments = parser.parse_args()
    os.makedirs(arguments.out, exist_ok=True)
    resources = harness.Resources()
    ports: set[int] = set()
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(arguments.deadline)
    results: dict[str, tuple[int, int] | str] = {}
    try:
        for name in arguments.engines.split(","):
            try:
                passed, failed, defects = run_engine(name, arguments.keybound, arguments.out, resources, ports)
                results[name] = (len(passed), len(defects), len(failed))
            except harness.HarnessError as error:
                banner = "=" * 78
                print(f"{banner}\noidc-interop: {name} COULD NOT RUN: {error}\n{banner}", flush=True)
                results[name] = "could not start"
            finally:
                resources.close()
    except Deadline:
        print(f"oidc-interop: FAILED: the run passed its deadline of {arguments.deadline} s", flush=True)
        results["deadline"] = "passed"
    finally:
        signal.alarm(0)
        resources.close()
    parts = []
    ok = bool(results)
    for name, result in results.items():
        if isinstance(result, tuple):
            passed, defects, failed = result
            parts.append(f"{name} {passed}/{len(flows.FLOWS)}" + (f" (+{defects} known server defects)" if defects else "")
                         + (f" ({failed} FAILED)" if failed else ""))
            ok = ok and failed == 0
        else:
            parts.append(f"{name} {result}")
            ok = False
    print(f"oidc-interop: {'passed' if ok else 'FAILED'}: flows passed per engine: {', '.join(parts)}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
