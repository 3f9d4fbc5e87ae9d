#!/usr/bin/env bash
# bench/align.sh ROUNDS SECS [SEND_SIZE] [OFFSETS]: what a buffer's start within its page costs
# the kernel's copies on this CPU. Runs `virtperf stream --buf-offset O` for each offset in
# OFFSETS (default "0 16 64 1024 2048 3000"), rotating the order every round, and prints per
# offset the median throughput and the receiver's and sender's CPU per KB (service demand).
# Some AMD cores copy slowly when destination and source are a few bytes apart within a page
# (bench/RESULTS.md, "buffer alignment"); loopback data sits page-aligned in the sender's
# page fragments, so a receive buffer at 16 shows it. The environment's `cpu_id` says which
# CPU answered.
#   bench/align.sh 5 3 131072
# Loopback only. A benchmark, not a test.
set -euo pipefail
ROUNDS=${1:?rounds}; SECS=${2:?seconds}; SIZE=${3:-131072}
OFFSETS=${4:-0 16 64 1024 2048 3000}
here=$(cd "$(dirname "$0")" && pwd)
VIRTPERF=${VIRTPERF:-$here/../target/release/virtperf}
tmp=$(mktemp -d /tmp/vp-align.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
read -r -a offs <<<"$OFFSETS"
n=${#offs[@]}
for r in $(seq "$ROUNDS"); do
    printf '\rround %d/%d' "$r" "$ROUNDS" >&2
    for k in $(seq 0 $((n - 1))); do
        o=${offs[$(((k + r) % n))]}
        "$VIRTPERF" stream -m "$SIZE" -l "${SECS}s" --buf-offset "$o" --json >"$tmp/$o.$r"
    done
done
printf '\r%20s\r' '' >&2
python3 - "$tmp" "$OFFSETS" <<'PY'
import json, statistics as st, sys, pathlib
d = pathlib.Path(sys.argv[1])
first = json.loads(next(d.glob("*.*")).read_text())
cpu = (first.get("env", {}).get("client") or {}).get("cpu_id") or {}
print("cpu:", cpu.get("vendor", "?"), "family", cpu.get("family"), "model", cpu.get("model"),
      "copy flags:", " ".join(cpu.get("copy_flags", [])) or "none")
print(f"{'offset':>6} {'Mbit/s':>9} {'rx µs/KB':>9} {'tx µs/KB':>9}")
for o in sys.argv[2].split():
    rs = [json.loads(p.read_text()) for p in d.glob(o + ".*")]
    med = lambda xs: st.median(xs) if xs else float("nan")
    sd = lambda side: med([r["cpu"][side]["service_demand_us"] for r in rs])
    print(f"{o:>6} {med([r['outcome']['mbps'] for r in rs]):9.0f} {sd('server'):9.3f} {sd('client'):9.3f}")
PY
