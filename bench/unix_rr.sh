#!/usr/bin/env bash
# bench/unix_rr.sh [ROUNDS] [SECS]: one round trip, three ways of passing the message, on
# the same CPU pair, interleaved round by round (default 5 rounds of 2 s each):
#   TCP rr over loopback (virtperf rr), AF_UNIX rr (virtperf unix-rr, stream and
#   --seqpacket) and a futex ping-pong between two threads (virtperf wake --mech futex).
# TCP rr minus unix-rr is the TCP/IP stack's share of a round trip; unix-rr minus the futex
# ping-pong is the socket layer's. Pairs: cross (CPUs 0,1) and same (CPU 0). Prints the
# median round-trip p50 and rate per way and the ratios against TCP rr. Not a test.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-2}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# rr vs unix-rr vs futex, $ROUNDS rounds of ${SECS}s — $(date -u '+%Y-%m-%d %H:%M UTC') — commit $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for i in $(seq "$ROUNDS"); do
    for pair in cross same; do
        cpus=0,1; [ "$pair" = same ] && cpus=0,0
        "$VIRTPERF" rr --cpus "$cpus" -l "${SECS}s" --json > "$tmp/$pair-tcp-$i.json"
        "$VIRTPERF" unix-rr --cpus "$cpus" -l "${SECS}s" --json > "$tmp/$pair-unix-$i.json"
        "$VIRTPERF" unix-rr --seqpacket --cpus "$cpus" -l "${SECS}s" --json > "$tmp/$pair-seqpacket-$i.json"
        "$VIRTPERF" wake --mech futex --placement "$pair" --cpus 0,1 -l "${SECS}s" --json > "$tmp/$pair-futex-$i.json"
    done
done
python3 - "$tmp" "$ROUNDS" <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
def one(pair, way, i):
    v = json.load(open("%s/%s-%s-%d.json" % (d, pair, way, i)))
    if way == "futex":
        v = v["runs"][0]
        return v["round_trip"]["p50_us"], v["round_trips_per_s"]
    return v["outcome"]["latency"]["p50_us"], v["outcome"]["rate_per_s"]
for pair in ("cross", "same"):
    print("%s CPUs:" % pair)
    tcp = None
    for way in ("tcp", "unix", "seqpacket", "futex"):
        p50s, rates = zip(*(one(pair, way, i) for i in range(1, n + 1)))
        p50, rate = statistics.median(p50s), statistics.median(rates)
        if tcp is None:
            tcp = (p50, rate)
        print("  %-10s p50 %7.2f µs  rate %9.0f /s   p50 vs TCP rr %.2f  rate vs TCP rr %.2f  (p50 range %.2f–%.2f)" % (
            way, p50, rate, p50 / tcp[0], rate / tcp[1], min(p50s), max(p50s)))
PY
