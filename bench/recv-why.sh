#!/usr/bin/env bash
# bench/recv-why.sh ROUNDS SECS [SEND_SIZE]: what the two receive loops (issue 30 §5) do per
# megabyte, side by side: --recv-wait poll (poll-then-read, iperf3's loop) and
# --recv-wait block (netperf's, the default since 2026-11-26), alternating every round, client and server pinned to CPUs
# 0 and 1. Prints per loop the median throughput, the receiver's (server's) CPU service
# demand, and the median per-MB kernel events on the receiver's CPU: context switches, idle
# entries, call-function IPIs, NET_RX softirqs, timer interrupts, and the receiving
# thread's voluntary switches. Run it on each CPU kind to see where the loops part.
#   bench/recv-why.sh 6 3 131072
# Loopback only. A benchmark, not a test.
set -euo pipefail
ROUNDS=${1:?rounds}; SECS=${2:?seconds}; SIZE=${3:-131072}
here=$(cd "$(dirname "$0")" && pwd)
VIRTPERF=${VIRTPERF:-$here/../target/release/virtperf}
tmp=$(mktemp -d /tmp/vp-why.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
    order="poll block"; [ $((r % 2)) = 0 ] && order="block poll"
    for w in $order; do
        "$VIRTPERF" stream -m "$SIZE" -l "${SECS}s" --cpus 0,1 --recv-wait "$w" --json >"$tmp/$w.$r"
    done
done
python3 - "$tmp" <<'PY'
import json, statistics as st, sys, pathlib
keys = ["context_switches", "idle_entries", "ipi_call", "net_rx_softirqs", "timer_irqs",
        "thread_voluntary_switches"]
print(f"{'loop':6} {'Mbit/s':>9} {'rx µs/KB':>9} " + " ".join(f"{k[:14]:>14}" for k in keys))
for w in ["poll", "block"]:
    rs = [json.loads(p.read_text()) for p in pathlib.Path(sys.argv[1]).glob(w + ".*")]
    med = lambda xs: st.median(xs) if xs else float("nan")
    mbps = med([r["outcome"]["mbps"] for r in rs])
    sd = med([r["cpu"]["server"]["service_demand_us"] for r in rs])
    ev = [med([r["events"]["server"]["per_unit"].get(k, float("nan")) for r in rs]) for k in keys]
    print(f"{w:6} {mbps:9.0f} {sd:9.3f} " + " ".join(f"{v:14.2f}" for v in ev))
print("events: per MB received, on the receiver's side (docs/json.md, `events`)")
PY
