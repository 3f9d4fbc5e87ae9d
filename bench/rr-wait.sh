#!/usr/bin/env bash
# bench/rr-wait.sh ROUNDS SECS: cross-CPU 1-byte request/response, blocking and spinning,
# virtperf (`rr --wait block|spin --cpus 0,1`) against the minimal C ping-pong in
# bench/pingpong.c, rotating the four within each round so drift hits them alike. Prints the
# median rate of each and the ratios virtperf / C, and the context switches per transaction
# virtperf counted. Builds pingpong with cc into a temporary directory (nothing is kept).
# Not a test: a benchmark for people (see bench/RESULTS.md).
set -euo pipefail
ROUNDS=${1:-5}; SECS=${2:-3}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/pingpong" "$here/pingpong.c"
vp() { # WAIT -> "rate sleeps_client sleeps_server"
    "$VIRTPERF" rr --cpus 0,1 --wait "$1" -l "${SECS}s" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
e = v["events"]
print(v["outcome"]["rate_per_s"], e["client"]["per_unit"]["thread_voluntary_switches"],
      e["server"]["per_unit"]["thread_voluntary_switches"])'
}
for r in $(seq "$ROUNDS"); do
    # Rotate the order each round.
    order=(cblock cspin vblock vspin)
    for i in $(seq 0 $(( r % 4 ))); do order=("${order[@]:1}" "${order[0]}"); done
    for t in "${order[@]}"; do
        case $t in
            cblock) echo "$r cblock $("$tmp/pingpong" block 0 1 "$SECS")" ;;
            cspin) echo "$r cspin $("$tmp/pingpong" spin 0 1 "$SECS")" ;;
            vblock) echo "$r vblock $(vp block)" ;;
            vspin) echo "$r vspin $(vp spin)" ;;
        esac
    done
done | python3 -c '
import sys, math, statistics
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
rows, sw, rounds = {}, {}, {}
for line in sys.stdin:
    f = line.split()
    r, k, v = int(f[0]), f[1], float(f[2])
    rows.setdefault(k, []).append(v)
    rounds.setdefault(r, {})[k] = v
    if len(f) > 3:
        sw.setdefault(k, []).append((float(f[3]), float(f[4])))
med = {k: statistics.median(v) for k, v in rows.items()}
for k in ["cblock", "cspin", "vblock", "vspin"]:
    extra = ""
    if k in sw:
        c = statistics.median(s[0] for s in sw[k]); s = statistics.median(s[1] for s in sw[k])
        extra = "  ctx sw/tr client %.3f server %.3f" % (c, s)
    print("%-7s median %10.1f tr/s over %d runs (min %.1f max %.1f)%s" % (
        k, med[k], len(rows[k]), min(rows[k]), max(rows[k]), extra))
def paired(a, b):
    logs = [math.log(x[a] / x[b]) for x in rounds.values()]
    g = statistics.mean(logs); df = len(logs) - 1
    t = T95.get(df) or T95[min((k for k in T95 if k >= df), default=30)]
    h = t * statistics.stdev(logs) / math.sqrt(len(logs)) if df > 0 else float("nan")
    return "%.3f [%.3f, %.3f]" % (math.exp(g), math.exp(g - h), math.exp(g + h))
print("virtperf block / C block  median ratio %.3f, per-round %s" % (med["vblock"] / med["cblock"], paired("vblock", "cblock")))
print("virtperf spin  / C spin   median ratio %.3f, per-round %s" % (med["vspin"] / med["cspin"], paired("vspin", "cspin")))
print("spin / block: C %.2fx, virtperf %.2fx" % (med["cspin"] / med["cblock"], med["vspin"] / med["vblock"]))
'
