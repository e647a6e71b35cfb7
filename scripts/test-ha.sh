#!/usr/bin/env bash
# High availability on PostgreSQL: etcd and two PostgreSQL 15 nodes under Patroni (synchronous
# replication) on loopback, two `keybound serve` on a libpq multi-host URL, a mixed load whose
# clients retry with Idempotency-Keys, and a failover (SIGKILL), the old primary rejoining, a
# switchover and a lost synchronous standby. scripts/ha/run.py says what each scenario checks;
# docs/server.md ("High availability") what it measured.
#
#   scripts/test-ha.sh        `make test-ha` runs it
#
# Installs what it needs itself: Debian's etcd-server, and Patroni 4.1.5 with the load's
# libraries (scripts/ha/requirements.txt, pinned) into a virtual environment of Debian's
# /usr/bin/python3, which the postgres user can run (a root-only pyenv it cannot). PostgreSQL 15
# comes from `make deps`. Bounded (HA_DEADLINE, default 600 s, then everything is stopped), and
# it cleans up after itself: every process it started is stopped, the temporary folders deleted,
# no file left in the tree. Logs (etcd, Patroni, the servers) go to .build/ha-out/. Exit status 0
# only when every scenario passed; the last lines give the RTO and the acknowledged writes lost.
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

if ! command -v etcd >/dev/null 2>&1; then
    echo "test-ha: installing Debian's etcd-server"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
fi
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
    echo "test-ha: installing python3-venv"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi

# The postgres user runs Patroni from this environment: under a folder it cannot enter (a clone in
# /root), it goes to /var/tmp instead.
requirements=scripts/ha/requirements.txt
want=$(sha256sum "$requirements" | cut -d' ' -f1)
venv=.build/ha-venv
mkdir -p .build
if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$PWD/.build"; then
    venv=/var/tmp/keybound-ha-venv
fi
if [ ! -x "$venv/bin/patroni" ] || [ "$(cat "$venv/requirements.sha256" 2>/dev/null)" != "$want" ]; then
    echo "test-ha: installing Patroni and the load's libraries into $venv"
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
    "$venv/bin/pip" check --disable-pip-version-check >/dev/null
    echo "$want" >"$venv/requirements.sha256"
fi
venv=$(cd "$venv" && pwd)

"$swift" build --product keybound -Xswiftc -warnings-as-errors >/dev/null
keybound="$("$swift" build --show-bin-path)/keybound"

deadline=${HA_DEADLINE:-600}
# No bytecode next to the sources (the tree must stay clean). `timeout` is the last resort: the
# runner stops itself at its deadline and cleans up on SIGTERM.
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=scripts/ha:scripts/oidc timeout --kill-after=30 $((deadline + 60)) \
    "$venv/bin/python" scripts/ha/run.py "$keybound" --venv-bin "$venv/bin" --deadline "$deadline" \
    --out .build/ha-out
