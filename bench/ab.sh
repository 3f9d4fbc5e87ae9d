#!/usr/bin/env bash
# bench/ab.sh PAIRS SECS "ARGS A" "ARGS B": two virtperf stream variants on loopback, run
# back to back in interleaved pairs (A B, B A, …), each against its own local agent; prints
# the geometric mean of the per-pair Mbit/s ratios A/B with its 95% CI (Student t on the
# log ratios), so a change can be judged against the machine's drift.
#   bench/ab.sh 8 3 "-m 16384 --recv-size 64KiB" "-m 16384"
# VIRTPERF_A / VIRTPERF_B (default: VIRTPERF, else target/release/virtperf) pick a binary per
# side, to compare two builds with the same arguments:
#   VIRTPERF_B=/tmp/virtperf-before bench/ab.sh 16 3 "-m 128KiB" "-m 128KiB"
# WORKLOAD (default stream) and METRIC (a dotted path into the JSON result, default
# outcome.mbps) compare other workloads; http takes no duration (SECS is ignored):
#   WORKLOAD=crr METRIC=outcome.rate_per_s VIRTPERF_B=/tmp/old bench/ab.sh 10 3 "" ""
#   WORKLOAD=http METRIC=outcome.mb_per_s bench/ab.sh 10 0 "--bytes 100MB --count 5" "…"
# Not a test: a benchmark for people (see bench/RESULTS.md).
set -euo pipefail
PAIRS=${1:?pairs}; SECS=${2:?seconds}; A=${3?args A}; B=${4?args B}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
VIRTPERF_A=${VIRTPERF_A:-$VIRTPERF}
VIRTPERF_B=${VIRTPERF_B:-$VIRTPERF}
WORKLOAD=${WORKLOAD:-stream}
METRIC=${METRIC:-outcome.mbps}
# http and bulk are sized by bytes, not time: SECS is not passed to them.
if [[ $WORKLOAD == http || $WORKLOAD == bulk ]]; then LEN=(); else LEN=(-l "${SECS}s"); fi
mbps() { # BINARY ARGS
    # shellcheck disable=SC2086 # word splitting of ARGS is intended
    "$1" "$WORKLOAD" $2 "${LEN[@]}" --json |
        python3 -c 'import json,sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."): v = v[k]
print(v)' "$METRIC"
}
for i in $(seq "$PAIRS"); do
    if (( i % 2 )); then
        a=$(mbps "$VIRTPERF_A" "$A"); b=$(mbps "$VIRTPERF_B" "$B")
    else
        b=$(mbps "$VIRTPERF_B" "$B"); a=$(mbps "$VIRTPERF_A" "$A")
    fi
    echo "$a $b"
done | python3 -c '
import sys, math, statistics
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
pairs = [tuple(map(float, l.split())) for l in sys.stdin]
logs = [math.log(a / b) for a, b in pairs]
df = len(logs) - 1
t = T95.get(df) or T95[min((k for k in T95 if k >= df), default=30)]
g = statistics.mean(logs)
h = t * statistics.stdev(logs) / math.sqrt(len(logs)) if df > 0 else float("nan")
print("A: %s\nB: %s" % (sys.argv[1], sys.argv[2]))
print("median %s A %.1f B %.1f; ratio A/B %.3f [%.3f, %.3f] over %d pairs" % (sys.argv[3],
    statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
    math.exp(g), math.exp(g - h), math.exp(g + h), len(logs)))
' "$VIRTPERF_A $WORKLOAD $A" "$VIRTPERF_B $WORKLOAD $B" "$METRIC"
