#!/usr/bin/env bash
# Builds the package and its tests with a sanitizer and runs the whole suite under it: first
# AddressSanitizer (with LeakSanitizer), then ThreadSanitizer. Each has a build of its own
# (--scratch-path .build/asan, .build/tsan) and never touches the normal build's objects. Tests that
# start the `keybound` binary get the sanitized one built beside them, and the same options.
#
#   scripts/test-sanitizers.sh              both (`make test-sanitizers`)
#   scripts/test-sanitizers.sh thread       only these (address, thread)
#
# Any sanitizer report fails the run: ASan stops at the first error, LeakSanitizer and TSan make the
# process exit non-zero. The leak suppressions, each with its reason, are in
# scripts/lsan-suppressions.txt; they cover only code Keybound does not own. Prints how long each
# build and each test run took.
set -euo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
here=$(pwd)

# print_suppressions=0: the summary would land on the children's standard error, which tests read.
export LSAN_OPTIONS="suppressions=$here/scripts/lsan-suppressions.txt:print_suppressions=0"

if [ $# -gt 0 ]; then sanitizers=("$@"); else sanitizers=(address thread); fi

summary=()
for sanitizer in "${sanitizers[@]}"; do
    case $sanitizer in
    address) build=.build/asan ;;
    thread) build=.build/tsan ;;
    *)
        echo "test-sanitizers: unknown sanitizer '$sanitizer' (address, thread)" >&2
        exit 2
        ;;
    esac
    mkdir -p "$build"
    echo "test-sanitizers: building with -sanitize=$sanitizer (log: $build/build.log)"
    start=$SECONDS
    if ! "$swift" build --build-tests --scratch-path "$build" -Xswiftc "-sanitize=$sanitizer" \
        >"$build/build.log" 2>&1; then
        # The linker's "Cannot export local symbol '__asan_…'" warnings are harmless noise.
        grep -v "Cannot export local symbol" "$build/build.log" >&2
        exit 1
    fi
    built=$((SECONDS - start))
    echo "test-sanitizers: testing under -sanitize=$sanitizer"
    start=$SECONDS
    # Tests that steer a child with strace and prlimit skip themselves under a sanitizer.
    KEYBOUND_SANITIZER=$sanitizer "$swift" test --skip-build --scratch-path "$build"
    tested=$((SECONDS - start))
    summary+=("$(printf '%-8s build %4d s, tests %4d s' "$sanitizer" "$built" "$tested")")
done
printf 'test-sanitizers: %s\n' "${summary[@]}"
