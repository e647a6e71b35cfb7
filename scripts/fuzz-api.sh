#!/usr/bin/env bash
# Spec-driven API testing: schemathesis against a live `keybound serve` and the /openapi.yaml it
# serves, every operation, every check, authenticated (scripts/schemathesis/keybound_hooks.py logs
# a test account in) and stateful (the `links` of docs/openapi.yaml). docs/testing.md says what it
# proves and gives the figures of a bounded and a long run.
#
#   scripts/fuzz-api.sh            API_FUZZ_SECONDS (default 60) of generation; `make test` runs it
#   API_FUZZ_SECONDS=1800 scripts/fuzz-api.sh                    `make fuzz-api`
#
# Installs schemathesis (pinned) into .build/schemathesis, a Python virtual environment, the first
# time; needs python3 with venv (`make api-test-deps` installs it on Debian). The server runs on a
# free loopback port with a database in a temporary folder, and is stopped on exit. The exit
# status is schemathesis's: 0 only when no check failed. The JUnit and NDJSON reports and the
# server's log go to API_FUZZ_OUT (default .build/fuzz-api/); the last line printed gives the
# figures: operations, test cases, check results, failed checks.
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
seconds=${API_FUZZ_SECONDS:-60}
version=4.32.5
venv=.build/schemathesis
out=${API_FUZZ_OUT:-.build/fuzz-api}

if [ ! -x "$venv/bin/st" ] || [ "$("$venv/bin/st" --version 2>/dev/null)" != "st, version $version" ]; then
    echo "fuzz-api: installing schemathesis $version into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi

"$swift" build --product keybound -Xswiftc -warnings-as-errors >/dev/null
keybound="$("$swift" build --show-bin-path)/keybound"

mkdir -p "$out"
work=$(mktemp -d)
server=""
cleanup() {
    if [ -n "$server" ]; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# Sign-up and failed-login limits off (0): the run signs up and fails logins from one address by
# design, and throttling every case would hide the answers the spec promises. The per-device and
# per-passkey throttles stay on. The OAuth provider is on (--issuer names the port, so the port is
# chosen first: a free one below the ephemeral range, another if the bind fails), and so are the
# app association files (--app-id, --android-app), so that their operations answer 200 too.
port=""
for _ in 1 2 3 4 5; do
    candidate=$(PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=scripts/oidc "$venv/bin/python" -c 'import harness; print(harness.free_port(set()))')
    "$keybound" serve --listen "127.0.0.1:$candidate" --issuer "http://127.0.0.1:$candidate" \
        --db "sqlite:$work/keybound.sqlite" --signup-limit 0 --address-failure-limit 0 \
        --app-id ABCDE12345.dev.keybound.fuzz \
        --android-app "dev.keybound.fuzz:$(printf '%02X:' $(seq 1 32) | sed 's/:$//')" 2>"$out/server.log" &
    server=$!
    for _ in $(seq 1 100); do
        grep -qs '"msg":"listening"' "$out/server.log" && port=$candidate && break
        kill -0 "$server" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$port" ] && break
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
done
if [ -z "$port" ]; then
    echo "fuzz-api: the server did not start; its log:" >&2
    cat "$out/server.log" >&2
    exit 1
fi
url="http://127.0.0.1:$port"

echo "fuzz-api: schemathesis $version against $url for ${seconds}s"
root=$PWD
status=0
# Run from $out: schemathesis keeps a cache of its own in the working folder. `--checks all` turns
# on a 10 s response-time limit; 30 s here, as this machine's two cores are shared with compiler
# runs that can stall the client (the server's own logged durations stay under 2 s).
# The hooks register the OAuth clients they use on the server's database, as an operator would
# (scripts/oidc/harness.py: `keybound client add`, or its row where the CLI lacks the command).
(cd "$out" && KEYBOUND_URL="$url" KEYBOUND_DB="sqlite:$work/keybound.sqlite" KEYBOUND_BIN="$keybound" \
    PYTHONPATH="$root/scripts/schemathesis:$root/scripts/oidc" PYTHONDONTWRITEBYTECODE=1 \
    "$root/$venv/bin/st" --config-file "$root/scripts/schemathesis/schemathesis.toml" run \
    "$url/openapi.yaml" --checks all --max-time "$seconds" --request-timeout 30 --max-response-time 30 --no-color \
    --report junit,ndjson --report-junit-path junit.xml --report-ndjson-path events.ndjson) || status=$?
"$venv/bin/python" scripts/schemathesis/summary.py "$out/events.ndjson" || true
exit $status
