#!/bin/sh
# Captures the golden vectors in crates/ctp-proto/tests/data/udt4/ from two udtperf programs
# on loopback. Needs root (tcpdump, iptables), g++ and libudt-dev. Usage: capture.sh OUTDIR
set -eu
out=${1:?usage: capture.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
bin=/tmp/udtperf.capture
g++ -O2 -o "$bin" "$here/udtperf.cpp" -ludt -lpthread
mkdir -p "$out"
# capture NAME PORT LOSS RECV-ARGS -- SEND-ARGS
capture() {
    name=$1; port=$2; loss=$3; shift 3
    recv_args=""; while [ "$1" != "--" ]; do recv_args="$recv_args $1"; shift; done; shift
    tcpdump -i lo -U -w "/tmp/$name.pcap" udp port "$port" >/dev/null 2>&1 &
    tpid=$!
    if [ "$loss" != 0 ]; then
        iptables -I INPUT -i lo -p udp --dport "$port" -m statistic --mode random \
            --probability "$loss" -j DROP
    fi
    sleep 1
    timeout 30 "$bin" $recv_args >/dev/null &
    rpid=$!
    sleep 0.3
    timeout 30 "$bin" "$@" >/dev/null || echo "capture $name: sender failed" >&2
    wait $rpid || true
    if [ "$loss" != 0 ]; then
        iptables -D INPUT -i lo -p udp --dport "$port" -m statistic --mode random \
            --probability "$loss" -j DROP
    fi
    sleep 1
    kill -INT $tpid; wait $tpid || true
    # Every control packet; of the data packets the first 12 and then every 97th (the
    # vectors stay small; data packets all share one layout).
    python3 "$here/pcap2hex.py" "/tmp/$name.pcap" | awk '
        substr($2, 1, 1) ~ /[89a-f]/ { print; next }
        { d++; if (d <= 12 || d % 97 == 0) print }' > "$out/$name.hex"
}
capture stream 19350 0 recv 19350 -- send 127.0.0.1 19350 300000
capture stream_loss 19351 0.02 recv 19351 -- send 127.0.0.1 19351 3000000
capture dgram 19352 0 -d recv 19352 -- -d -m 700 send 127.0.0.1 19352 20000
capture rendezvous 19353 0 -z 19363 recv 19353 -- -z 19363 send 127.0.0.1 19353 50000
