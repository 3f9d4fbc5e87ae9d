#!/usr/bin/env bash
# bench/before_after.sh OLD_BINARY NEW_BINARY [ROUNDS] [DURATION_S]: the same workloads with
# two virtperf builds, interleaved (A B, then B A, … so neither always runs first), for a
# refactoring that must not change what users measure (issue 29). Prints each one's median
# and the ratio new/old per workload. Traffic on 127.0.0.1 only.
set -euo pipefail
OLD=$1
NEW=$2
ROUNDS=${3:-5}
DUR=${4:-3}
tmp=$(mktemp -d /tmp/vp-ba.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
metric() { python3 -c 'import json,sys; v=json.load(sys.stdin); o=v["outcome"]; print(o.get("rate_per_s") or o.get("mbps") or o["throughput_mbps"])'; }
run() { # BIN NAME ARGS…
    local bin=$1 name=$2; shift 2
    "$bin" "$@" -l "${DUR}s" --json | metric >>"$tmp/$name"
}
names=("rr-cross" "rr-same" "crr" "stream")
args=("rr --cpus 0,1" "rr --cpus 0,0" "crr --cpus 0,1" "stream --cpus 0,1")
# CASES="NAME=ARGS;NAME=ARGS" replaces them, e.g. CASES="p64=rr -P 64 --threads 2".
if [[ -n ${CASES:-} ]]; then
    names=(); args=()
    IFS=';' read -ra cases <<<"$CASES"
    for c in "${cases[@]}"; do names+=("${c%%=*}"); args+=("${c#*=}"); done
fi
for r in $(seq "$ROUNDS"); do
    for i in "${!names[@]}"; do
        if (( r % 2 )); then order="old new"; else order="new old"; fi
        for which in $order; do
            bin=$OLD; [[ $which == new ]] && bin=$NEW
            # shellcheck disable=SC2086
            run "$bin" "${names[$i]}.$which" ${args[$i]}
        done
    done
done
med() { sort -g "$1" | awk '{a[NR]=$1} END{print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "before/after, $ROUNDS interleaved rounds of ${DUR}s (rates /s; stream Mbit/s):"
printf '  %-9s %12s %12s %8s\n' workload old new new/old
for n in "${names[@]}"; do
    o=$(med "$tmp/$n.old"); w=$(med "$tmp/$n.new")
    printf '  %-9s %12.1f %12.1f %8.3f\n' "$n" "$o" "$w" "$(python3 -c "print($w/$o)")"
done
