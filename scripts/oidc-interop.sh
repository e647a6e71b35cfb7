#!/usr/bin/env bash
# OpenID Connect interoperability: independent client libraries from PyPI (requests-oauth2client,
# authlib, joserfc) sign in through a live `keybound serve --issuer`, on SQLite and then on a
# throwaway PostgreSQL 15 cluster, and the attacks of docs/testing.md ("OIDC interoperability")
# are refused. scripts/oidc/ holds the flows; docs/testing.md says what they prove.
#
#   scripts/oidc-interop.sh                       both engines; `make test` runs it
#   OIDC_ENGINES=sqlite scripts/oidc-interop.sh   one engine
#
# Installs the pinned libraries (scripts/oidc/requirements.txt) into .build/oidc-interop, a Python
# virtual environment, the first time; needs python3 with venv (`make api-test-deps`) and, for the
# second engine, PostgreSQL's initdb and pg_ctl (`make deps`): without them the run fails and says
# so. Bounded (OIDC_DEADLINE, default 900 s, then everything is stopped), and it cleans up after
# itself: servers stopped, cluster stopped and deleted, no file left in the tree. The servers'
# logs go to .build/oidc-interop-out/. Exit status 0 only when every flow passed on every engine;
# the last line gives the flows passed per engine.
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
venv=.build/oidc-interop
requirements=scripts/oidc/requirements.txt
stamp="$venv/requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "oidc-interop: installing the pinned client libraries into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
    "$venv/bin/pip" check --disable-pip-version-check >/dev/null
    echo "$want" >"$stamp"
fi

"$swift" build --product keybound -Xswiftc -warnings-as-errors >/dev/null
keybound="$("$swift" build --show-bin-path)/keybound"

deadline=${OIDC_DEADLINE:-900}
# No bytecode next to the sources (the tree must stay clean). `timeout` is the last resort: the
# runner stops itself at its deadline and cleans up on SIGTERM.
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=scripts/oidc timeout --kill-after=30 $((deadline + 60)) \
    "$venv/bin/python" scripts/oidc/run.py "$keybound" --engines "${OIDC_ENGINES:-sqlite,postgresql}" \
    --deadline "$deadline" --out .build/oidc-interop-out
