#!/bin/bash
# The simulator's speed against the peer packet-level simulator, ns-3, on the same scenario:
# ctp-sim's speed benchmark (crates/ctp-sim/tests/speed.rs) and tools/ns3/dumbbell.cc (its
# dumbbell in ns-3: TCP NewReno, and constant-rate UDP with no transport at all) run in
# turn, ROUNDS rounds, the order rotating, so that the machine's drift hits all three alike.
# Prints, per round and as medians, link transmissions per CPU second of each and the
# per-round ratios ctp-sim / ns-3.
#
#   apt-get install libns3-dev             # Debian's ns-3 (release build, logging compiled in)
#   tools/sim-speed/vs-ns3.sh 5            # 10 virtual seconds per run
#   tools/sim-speed/vs-ns3.sh 5 4          # 4 virtual seconds per run
#   NS3_PREFIX=/opt/ns-3.37/build tools/sim-speed/vs-ns3.sh 5   # another ns-3 build
#
# NS3_PREFIX names a directory with include/ and lib/ of an ns-3 build (for example one
# configured with `./ns3 configure --build-profile=optimized --disable-logs`).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 ROUNDS [VIRTUAL_SECONDS] (ROUNDS a positive whole number; 10 s by default)" >&2
  exit 2
fi
rounds=$1 secs=${2:-10}
if ! [[ $secs =~ ^[0-9]+$ ]] || (( secs < 2 )); then
  echo "$0: VIRTUAL_SECONDS must be a whole number of seconds, at least 2 (got $secs)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/target/ns3
mkdir -p "$out"

# ns-3: Debian's libns3-dev, or the build NS3_PREFIX names.
modules=(core network internet point-to-point applications traffic-control)
if [ -n "${NS3_PREFIX:-}" ]; then
  lib=$(find "$NS3_PREFIX" -name 'libns3*-core*.so' -print -quit)
  if [ -z "$lib" ]; then
    echo "$0: NS3_PREFIX=$NS3_PREFIX holds no libns3…-core….so (point it at an ns-3 build)" >&2
    exit 2
  fi
  libdir=$(dirname "$lib")
  # The library names carry the version and the build profile: libns3.37-core-optimized.so.
  suffix=$(basename "$lib" | sed -E 's/^libns3(\.[0-9.]+)?-core(.*)\.so$/\2/')
  version=$(basename "$lib" | sed -E 's/^libns3((\.[0-9.]+)?)-core.*$/\1/')
  include=$(dirname "$(find "$NS3_PREFIX" -name core-module.h -print -quit)")/..
  flags=(-I"$include" -L"$libdir" -Wl,-rpath,"$libdir")
  for m in "${modules[@]}"; do flags+=("-lns3$version-$m$suffix"); done
  peer=$out/dumbbell-prefix
else
  if [ ! -e /usr/include/ns3/core-module.h ]; then
    echo "$0: ns-3 is not installed: apt-get install libns3-dev (or set NS3_PREFIX)" >&2
    exit 2
  fi
  flags=()
  for m in "${modules[@]}"; do flags+=("-lns3-$m"); done
  peer=$out/dumbbell-debian
fi
g++ -O2 -std=c++17 "$root/tools/ns3/dumbbell.cc" -o "$peer" "${flags[@]}"

# ctp-sim: the speed benchmark's test binary, built once.
ctp=$(cd "$root" && cargo test --release -p ctp-sim --test speed --no-run 2>&1 |
  grep -o 'target/release/deps/speed-[0-9a-f]*' | tail -1)
if [ -z "$ctp" ]; then
  echo "$0: could not build the speed benchmark (cargo test --release -p ctp-sim --test speed --no-run)" >&2
  exit 1
fi
ctp=$root/$ctp

run_ctp() {
  local line
  line=$(CTP_SIM_SPEED_DURATION=${secs}s "$ctp" --ignored --nocapture 2>&1 | grep 'transmissions/CPU s' || true)
  if [ -z "$line" ]; then
    echo "$0: the speed benchmark printed no figure (run $ctp --ignored --nocapture)" >&2
    exit 1
  fi
  echo "$line" | grep -o '[0-9]* transmissions/CPU s' | cut -d' ' -f1
}
run_ns3() {
  local line
  line=$("$peer" "$secs" "$1")
  echo "$line" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    printf "%.0f\n", v["transmissions"] / v["cpu_s"] }'
  echo "  ns-3 $1: $line" >&2
}

cs=() ts=() us=() rt=() ru=()
for i in $(seq "$rounds"); do
  case $(( i % 3 )) in
    1) c=$(run_ctp); t=$(run_ns3 tcp); u=$(run_ns3 udp) ;;
    2) t=$(run_ns3 tcp); u=$(run_ns3 udp); c=$(run_ctp) ;;
    0) u=$(run_ns3 udp); c=$(run_ctp); t=$(run_ns3 tcp) ;;
  esac
  cs+=("$c") ts+=("$t") us+=("$u")
  rt+=("$(awk -v c="$c" -v p="$t" 'BEGIN { printf "%.2f", c / p }')")
  ru+=("$(awk -v c="$c" -v p="$u" 'BEGIN { printf "%.2f", c / p }')")
  echo "round $i: transmissions/CPU s: ctp-sim $c, ns-3 TCP $t, ns-3 UDP $u" >&2
done
# shellcheck source=stats.sh
. "$(dirname "$0")/stats.sh"
echo "ctp-sim (real ctp endpoints, reliable profile): median $(median "${cs[@]}") transmissions/CPU s"
echo "ns-3 $(basename "$peer") TCP NewReno: median $(median "${ts[@]}"); ratio ctp-sim/ns-3 median $(median "${rt[@]}")"
echo "ns-3 $(basename "$peer") UDP constant rate: median $(median "${us[@]}"); ratio ctp-sim/ns-3 median $(median "${ru[@]}")"
