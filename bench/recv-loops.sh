#!/usr/bin/env bash
# bench/recv-loops.sh ROUNDS SECS SEND_SIZE: the two receive loops, side by side with the peers
# that use them. Each round runs, in an order that rotates every round, virtperf with its
# polling receiver (--recv-wait poll, iperf3's loop), virtperf --recv-wait block (netperf's
# loop, the default since 2026-11-26),
# netperf TCP_STREAM and iperf3, all sending SEND_SIZE bytes per call (a plain byte count:
# virtperf reads 128K as 128,000 bytes, netperf and iperf3 as 131,072). Prints medians and
# the geometric mean of per-round ratios with a 95% CI. Every tool sees the same machine
# state within a round, which pairwise runs (bench/peers.sh) cannot promise across rows.
#   bench/recv-loops.sh 16 3 131072
# Loopback only; the servers it starts are killed by PID on exit. A benchmark, not a test.
set -euo pipefail
ROUNDS=${1:?rounds}; SECS=${2:?seconds}; SIZE=${3:?send size in bytes}
[[ $SIZE =~ ^[0-9]+$ ]] || { echo "send size must be a plain byte count, got $SIZE" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
VIRTPERF=${VIRTPERF:-$here/../target/release/virtperf}
bash "$here/install-peers.sh" >&2
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
iperf3 -s -B 127.0.0.1 -p 5297 >/dev/null 2>&1 &
pids+=($!)
netserver -D -p 12897 -L 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
sleep 1
mbps() { python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"]["mbps"])'; }
run() {
    case $1 in
        0) "$VIRTPERF" stream -m "$SIZE" -l "${SECS}s" --recv-wait poll --json | mbps ;;
        1) "$VIRTPERF" stream -m "$SIZE" -l "${SECS}s" --recv-wait block --json | mbps ;;
        2) netperf -H 127.0.0.1 -p 12897 -l "$SECS" -P 0 -t TCP_STREAM -- -m "$SIZE" -o THROUGHPUT | tail -n1 ;;
        3) iperf3 -c 127.0.0.1 -p 5297 -t "$SECS" -l "$SIZE" -J |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6)' ;;
    esac
}
for r in $(seq "$ROUNDS"); do
    printf '\rround %d/%d' "$r" "$ROUNDS" >&2
    v=(0 0 0 0)
    for k in 0 1 2 3; do t=$(( (k + r) % 4 )); v[t]=$(run $t); done
    echo "${v[*]}"
done | python3 -c '
import sys, math, statistics
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
rows = [list(map(float, l.split())) for l in sys.stdin]
names = ["virtperf poll", "virtperf block", "netperf", "iperf3"]
df = len(rows) - 1
t = T95.get(df) or T95[min((k for k in T95 if k >= df), default=30)]
print("\nsend size %s B, %d rounds of %s s; median Mbit/s: %s" % (sys.argv[1], len(rows), sys.argv[2],
      ", ".join("%s %.0f" % (n, statistics.median(r[i] for r in rows)) for i, n in enumerate(names))))
for a, b in [(0, 1), (0, 3), (1, 2), (2, 3)]:
    logs = [math.log(r[a] / r[b]) for r in rows]
    g = statistics.mean(logs)
    h = t * statistics.stdev(logs) / math.sqrt(len(logs)) if df > 0 else float("nan")
    print("  %-14s / %-14s %.3f [%.3f, %.3f]" % (names[a], names[b], math.exp(g), math.exp(g - h), math.exp(g + h)))
' "$SIZE" "$SECS"
