#!/usr/bin/env bash
# Builds the libFuzzer harnesses (Fuzz/Harnesses) and runs each for FUZZ_SECONDS (default 600),
# then prints one line per harness: executions, coverage, and whether it crashed. docs/fuzzing.md
# says what each harness covers and how to replay a crash.
#
#   scripts/fuzz.sh                 every harness (`make fuzz`; `make fuzz-smoke` runs 20 s each)
#   scripts/fuzz.sh cbor json       only these
#
# The build is a debug build of its own (--scratch-path .build/fuzz) with -sanitize=fuzzer,address
# and, like every build here, warnings as errors; it never touches the normal build's objects. Each harness starts from its committed seeds
# (Fuzz/Corpus/<name>/, never written to) plus what earlier runs found (.build/fuzz/corpus/<name>/,
# where new inputs go). Crashing inputs go to .build/fuzz/crashes/<name>/; the exit status is 1
# when any harness crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
seconds=${FUZZ_SECONDS:-600}
build=.build/fuzz
binary=$build/debug/keybound-fuzz

mkdir -p "$build/logs"
echo "fuzz: building $binary (log: $build/build.log)"
if ! KEYBOUND_FUZZ=1 "$swift" build --scratch-path "$build" --product keybound-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -warnings-as-errors >"$build/build.log" 2>&1; then
    # The linker's "Cannot export local symbol '__asan_…'" warnings are harmless noise.
    grep -v "Cannot export local symbol" "$build/build.log" >&2
    exit 1
fi

if [ $# -gt 0 ]; then
    harnesses=("$@")
else
    mapfile -t harnesses < <("$binary" --list | cut -f1)
fi

summary=()
failed=0
for harness in "${harnesses[@]}"; do
    corpus=$build/corpus/$harness
    crashes=$build/crashes/$harness
    log=$build/logs/$harness.log
    mkdir -p "$corpus" "$crashes"
    # The committed seeds, and the inputs that once crashed: each run checks them again first.
    seeds=()
    for dir in "Fuzz/Corpus/$harness" "Fuzz/Crashes/$harness"; do
        if [ -d "$dir" ]; then seeds+=("$dir"); fi
    done
    echo "fuzz: $harness for ${seconds}s (log: $log)"
    status=0
    # -timeout: an input that takes 10 s is a hang; -rss_limit_mb (also the largest single
    # allocation): an input that needs 2 GiB is a memory exhaustion. Both are reported as crashes.
    # LeakSanitizer is off: it reports the Data held by Swift's lazily initialised globals (their
    # pointers are stored with tag bits it does not recognise), so every run would "leak".
    ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS-} KEYBOUND_FUZZ_HARNESS=$harness \
        "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "${seeds[@]}" >"$log" 2>&1 || status=$?
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    coverage=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 | awk '{print $2 "/" $4}')
    if [ "$status" = 0 ]; then
        result=ok
    else
        failed=1
        result="CRASH (exit $status): $(grep -o "Test unit written to .*" "$log" | tail -1 | cut -d' ' -f5)"
        grep -E "^==[0-9]+==ERROR|Fatal error|fuzz property violated|SUMMARY" "$log" | head -5 >&2 || true
    fi
    summary+=("$(printf '%-24s %12s %14s  %s' "$harness" "${executions:-?}" "${coverage:-?}" "$result")")
done

printf '\n%-24s %12s %14s  %s\n' harness executions "cov/ft" result
printf '%s\n' "${summary[@]}"
exit $failed
