#!/bin/bash
# Compares the simulator's speed of two builds on a machine whose speed drifts (a shared VM):
# runs the speed benchmark of binary A and binary B back to back, N rounds, order
# alternating, and prints the median and quartiles of the per-round ratio B/A, with each
# one's best and median datagrams per CPU second.
#
#   cargo test --release -p ctp-sim --test speed --no-run   # prints the binary's path
#   cp target/release/deps/speed-<hash> /tmp/speed-old      # before the change; again after
#   CTP_SIM_SPEED_DURATION=4s tools/sim-speed/pair.sh 8 /tmp/speed-old /tmp/speed-new
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 ROUNDS BINARY_A BINARY_B (speed benchmark test binaries)" >&2
  exit 2
fi
n=$1 a=$2 b=$3
run() {
  local out
  out=$("$1" --ignored --nocapture 2>&1 | grep -o '[0-9]* datagrams/CPU s' | cut -d' ' -f1 || true)
  if [ -z "$out" ]; then
    echo "$1 printed no speed figure (run it alone to see why)" >&2
    exit 1
  fi
  echo "$out"
}
ratios=() as=() bs=()
for i in $(seq "$n"); do
  if (( i % 2 )); then x=$(run "$a"); y=$(run "$b"); else y=$(run "$b"); x=$(run "$a"); fi
  as+=("$x") bs+=("$y")
  ratios+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.4f", y / x }')")
done
# shellcheck source=stats.sh
. "$(dirname "$0")/stats.sh"
echo "ratio B/A median $(median "${ratios[@]}") (q1 $(quart 0.25 "${ratios[@]}"), q3 $(quart 0.75 "${ratios[@]}"))"
echo "A: best $(best "${as[@]}") median $(median "${as[@]}") datagrams/CPU s"
echo "B: best $(best "${bs[@]}") median $(median "${bs[@]}") datagrams/CPU s"
