#!/usr/bin/env bash
# Zero-copy senders side by side (issue 30 §1): virtperf's copying sender, its sendfile
# sender (`-Z`, iperf3's method), its MSG_ZEROCOPY sender (`-Z msg`) and iperf3 -Z, at
# 16 KiB, 64 KiB and 1 MiB sends; throughput and the sender's CPU per GB sent.
#
#   bench/zerocopy.sh [ROUNDS] [DURATION_S]        (defaults: 3 rounds, 3 s)
#
# Client on CPU 0, server on CPU 1 for every tool. The four run in turn, the order rotated
# every round. Traffic on 127.0.0.1 only; the servers this starts are killed by PID on exit.
set -euo pipefail
ROUNDS=${1:-3}
DUR=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bash "$here/install-peers.sh" >/dev/null
VIRTPERF=${VIRTPERF:-$root/target/release/virtperf}
[[ -x $VIRTPERF ]] || (cd "$root" && cargo build --release --quiet)
tmp=$(mktemp -d /tmp/vp-zc.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
IPERF_PORT=5299
iperf3 -s -B 127.0.0.1 -p "$IPERF_PORT" -A 1 >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
out=$tmp/rows.tsv
: >"$out"
vp() { # NAME SIZE ARGS...: Mbit/s and client CPU s per GB sent
    local name=$1 size=$2; shift 2
    "$VIRTPERF" stream -m "$size" -l "${DUR}s" --cpus 0,1 --json "$@" | python3 -c '
import json,sys
d=json.load(sys.stdin); o=d["outcome"]; c=d["cpu"]["client"]
cpu=c["process_user_s"]+c["process_system_s"]
print("%s\t%s\t%.1f\t%.3f" % (sys.argv[1], sys.argv[2], o["mbps"], cpu/(o["sender_bytes"]/1e9)))' "$name" "$size" >>"$out"
}
ip3() { # SIZE
    iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -t "$DUR" -A 0,1 -Z -l "$1" -J | python3 -c '
import json,sys
d=json.load(sys.stdin); e=d["end"]; dur=e["sum_sent"]["seconds"]
cpu=e["cpu_utilization_percent"]["host_total"]/100*dur
print("iperf3 -Z\t%s\t%.1f\t%.3f" % (sys.argv[1], e["sum_received"]["bits_per_second"]/1e6, cpu/(e["sum_sent"]["bytes"]/1e9)))' "$1" >>"$out"
}
for r in $(seq "$ROUNDS"); do
    for size in 16K 64K 1M; do
        runs=("vp copy $size" "vp sendfile $size -Z" "vp msg $size -Z msg" "ip3 $size")
        for k in 0 1 2 3; do
            i=$(( (k + r) % 4 ))
            set -- ${runs[$i]}
            printf '\rround %d/%d %-28s' "$r" "$ROUNDS" "${runs[$i]}" >&2
            case $1 in
                vp) name=$2 s=$3; shift 3; vp "$name" "$s" "$@" ;;
                ip3) ip3 "$2" ;;
            esac
        done
    done
done
printf '\r%-50s\r' '' >&2
python3 - "$out" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    name, size, mbps, cpu = line.rstrip("\n").split("\t")
    rows[(size, name)][0].append(float(mbps)); rows[(size, name)][1].append(float(cpu))
print("%-6s %-10s %12s %16s  (medians)" % ("send", "sender", "Mbit/s", "CPU s per GB"))
for size in ["16K", "64K", "1M"]:
    for name in ["copy", "sendfile", "msg", "iperf3 -Z"]:
        m, c = rows[(size, name)]
        if m:
            print("%-6s %-10s %12.0f %16.3f" % (size, name, statistics.median(m), statistics.median(c)))
PY
