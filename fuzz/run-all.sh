#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 60), one after another, then
# prints a table: executions, executions per second, coverage (libFuzzer's `cov:`
# counters), corpus size and crashes. Exits non-zero if any target crashed; the crashing
# input is in fuzz/artifacts/<target>/.
#
# New inputs go to fuzz/work/<target>/ (ignored by git), not to the committed corpus:
# minimise and copy by hand what should be kept (see docs/fuzzing.md).
#
# Usage: fuzz/run-all.sh [SECONDS] [TARGET...]
# Targets are built with debug assertions (overflow checks and the engine's consistency
# checks). FUZZ_SANITIZER=address (or memory, thread) adds a sanitizer; the default is none:
# ctp-proto forbids unsafe code, and without AddressSanitizer the stateful targets run about
# three times faster.
set -euo pipefail

secs="${1:-60}"
shift || true
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz not found: installing it" >&2
    cargo install cargo-fuzz --locked
fi

san="${FUZZ_SANITIZER:-none}"
cargo +nightly fuzz build --debug-assertions --sanitizer "$san"
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

mkdir -p fuzz/logs
rows=()
failed=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t" "fuzz/regressions/$t"
    log="fuzz/logs/$t.log"
    echo "== $t: ${secs}s" >&2
    status=0
    cargo +nightly fuzz run --debug-assertions --sanitizer "$san" "$t" "fuzz/work/$t" "fuzz/corpus/$t" "fuzz/regressions/$t" -- \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    # The last status line: "#N  DONE  cov: C ft: F corp: K/S ... exec/s: E ...".
    last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
    runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)"
    [ -n "$runs" ] || runs="$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")"
    rate="$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)"
    [ -n "$rate" ] || rate="$(sed -nE 's/.*exec\/s: ([0-9]+).*/\1/p' <<<"$last")"
    cov="$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")"
    ft="$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")"
    corp="$(sed -nE 's/.*corp: ([0-9]+)\/.*/\1/p' <<<"$last")"
    crashes=0
    if [ "$status" -ne 0 ]; then
        crashes=1
        failed=1
        echo "!! $t failed (exit $status); see $log and fuzz/artifacts/$t/" >&2
        grep -E "panicked at|ERROR: libFuzzer|SUMMARY|Test unit written" "$log" >&2 || true
    fi
    rows+=("| \`$t\` | ${secs} | ${runs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes |")
done

echo
echo "| target | seconds | executions | exec/s | cov | ft | corpus | crashes |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
exit "$failed"
