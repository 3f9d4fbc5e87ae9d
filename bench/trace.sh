#!/usr/bin/env bash
# bench/trace.sh [ROUNDS] [DURATION_S]: issue 28's numbers, outside the test suite (needs
# root). (1) What counting tracepoints costs: rr on one CPU and across two, plain, with
# --trace and with --trace-all, interleaved ROUNDS times (default 10) for DURATION_S each
# (default 3); prints each one's median rate and its ratio to plain (goal for --trace: at
# most a 3% drop). (2) What the
# --timeline trial adds up to: the sum of its stages' medians against its own measured
# p50, and what sampling costs the median, ROUNDS times. All traffic on 127.0.0.1.
set -euo pipefail
ROUNDS=${1:-10}
DUR=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
VIRTPERF=${VIRTPERF:-$root/target/release/virtperf}
tmp=$(mktemp -d /tmp/vp-trace.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
rate() { python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"]["rate_per_s"])'; }
for r in $(seq "$ROUNDS"); do
    for cpus in 0,0 0,1; do
        # Rotate which goes first, so drift over the run does not favour one.
        case $(( r % 3 )) in
            0) order="plain traced all" ;; 1) order="traced all plain" ;; *) order="all plain traced" ;;
        esac
        for mode in $order; do
            flag=""; [[ $mode == traced ]] && flag="--trace"; [[ $mode == all ]] && flag="--trace-all"
            $VIRTPERF rr --cpus "$cpus" -l "${DUR}s" $flag --json | rate >>"$tmp/$cpus.$mode"
        done
    done
    $VIRTPERF rr --cpus 0,1 -l 1s --timeline --json | python3 -c '
import json,sys
t=json.load(sys.stdin)["timeline"]
print(t["sum_p50_us"], t["rr_p50_us"], t["gap_pct"], t["headline_p50_us"], t["transactions"], t["lost_records"])' >>"$tmp/timeline"
done
med() { sort -g "$1" | awk '{a[NR]=$1} END{print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# Paired: each round's traced rate over the same round's plain one (measured next to each
# other), so a slow phase of the machine (this guest's rates jump between two levels)
# moves both sides of a ratio alike.
pair() { paste "$1" "$2" | awk '{print $2/$1}' >"$3"; }
echo "counting overhead, $ROUNDS interleaved rounds of ${DUR}s, median trans/s:"
printf '  %-6s %10s %10s %12s %16s %16s\n' cpus plain "--trace" "--trace-all" "paired --trace" "paired -all"
for cpus in 0,0 0,1; do
    p=$(med "$tmp/$cpus.plain"); t=$(med "$tmp/$cpus.traced"); a=$(med "$tmp/$cpus.all")
    pair "$tmp/$cpus.plain" "$tmp/$cpus.traced" "$tmp/$cpus.rt"; pair "$tmp/$cpus.plain" "$tmp/$cpus.all" "$tmp/$cpus.ra"
    printf '  %-6s %10.0f %10.0f %12.0f %16.3f %16.3f\n' "$cpus" "$p" "$t" "$a" "$(med "$tmp/$cpus.rt")" "$(med "$tmp/$cpus.ra")"
    echo "    per-round --trace/plain: $(tr '\n' ' ' <"$tmp/$cpus.rt" | xargs printf '%.3f ')"
done
echo "timeline (CPU 0 -> 1), per round: sum of stage p50s, trial rr p50, gap %, test's own p50, transactions, lost:"
awk '{printf "  %8.2f %8.2f %+6.1f%% %8.2f %7d %4d\n", $1, $2, $3, $4, $5, $6}' "$tmp/timeline"
