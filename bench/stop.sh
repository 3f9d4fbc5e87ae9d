#!/usr/bin/env bash
# bench/stop.sh [ROUNDS] [DURATION_S]: issue 26's acceptance, outside the test suite: every
# engine with many flows and more threads than cores, on a machine kept busy by one spinning
# shell per CPU, ROUNDS times in a row (default 30) for DURATION_S each (default 3). Prints
# one line per configuration: runs that failed, the measured interval (min/max of
# elapsed_s) and the time from the end of the interval to both sides' reports (stop_s,
# max), and the wall time of the whole command (max). All traffic on 127.0.0.1; the
# spinners are killed by PID on exit.
set -euo pipefail
ROUNDS=${1:-30}
DUR=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
VIRTPERF=${VIRTPERF:-$root/target/release/virtperf}
tmp=$(mktemp -d /tmp/vp-stop.XXXXXX)
spin=()
cleanup() { for p in "${spin[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq "$(nproc)"); do (while :; do :; done) & spin+=($!); done
configs=(
    "stream -P 8 --threads 8" "stream -P 8 --threads 4" "stream -P 16 --threads 8"
    "stream -P 64 --threads 8" "stream -P 8 --threads 2" "stream -P 64 --threads 2"
    "stream -P 64 --threads 8 -R" "stream -P 8" "stream -P 8 -R"
    "rr -P 64 --threads 8" "rr -P 8" "crr -P 64 --threads 8"
    "rr --protocol udp -P 8" "stream --protocol udp -P 8 --rate 200mbit"
)
for r in $(seq "$ROUNDS"); do
    for i in "${!configs[@]}"; do
        t0=$(date +%s.%N)
        if $VIRTPERF ${configs[$i]} -l "${DUR}s" --allow-concurrent --json >"$tmp/out.json" 2>"$tmp/err"; then
            t1=$(date +%s.%N)
            python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(v["outcome"]["elapsed_s"], v.get("stop_s"), float(sys.argv[3]) - float(sys.argv[2]))' \
                "$tmp/out.json" "$t0" "$t1" >>"$tmp/$i.ok"
        else
            echo "round $r: ${configs[$i]}: $(head -c 300 "$tmp/err")" >>"$tmp/$i.fail"
        fi
    done
done
printf '%-44s %5s %6s %17s %10s %9s\n' configuration ok failed "elapsed_s min-max" "stop_s max" "wall max"
for i in "${!configs[@]}"; do
    ok=$( [[ -f $tmp/$i.ok ]] && wc -l <"$tmp/$i.ok" || echo 0)
    failed=$( [[ -f $tmp/$i.fail ]] && wc -l <"$tmp/$i.fail" || echo 0)
    stats=$( [[ -f $tmp/$i.ok ]] && awk 'NR==1{mn=$1;mx=$1;s=$2;w=$3} {if($1<mn)mn=$1; if($1>mx)mx=$1; if($2>s)s=$2; if($3>w)w=$3} END{printf "%8.4f-%-8.4f %10.3f %9.2f", mn, mx, s, w}' "$tmp/$i.ok" || echo "-")
    printf '%-44s %5s %6s %s\n' "${configs[$i]}" "$ok" "$failed" "$stats"
    if [[ -f $tmp/$i.fail ]]; then head -3 "$tmp/$i.fail"; fi
done
