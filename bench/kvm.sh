#!/usr/bin/env bash
# KVM micro-benchmarks, 3 runs each, for bench/RESULTS.md (issue 5):
#   bench/kvm.sh [RUNS]
# Prints `virtperf kvm exits` and `virtperf kvm halt` (halt-poll 0/10/50/200 µs, short and
# long idle gaps, vCPU on CPU 1, injector on CPU 0) as markdown tables, one row per run.
set -euo pipefail
RUNS=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet)
    VIRTPERF=$root/target/release/virtperf
fi
"$VIRTPERF" kvm info
echo
echo "## exits (2000 iterations, vCPU on CPU 1): p50 / p99 µs per run"
echo
echo "| case | run 1 | run 2 | run 3 |"
echo "|---|---|---|---|"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$RUNS"); do "$VIRTPERF" kvm exits --iterations 2000 --cpu 1 --json >"$tmp/exits$i.json"; done
python3 - "$tmp" "$RUNS" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{d}/exits{i}.json")) for i in range(1, n + 1)]
for case in [c["name"] for c in runs[0]["cases"]]:
    cells = []
    for r in runs:
        c = next(c for c in r["cases"] if c["name"] == case)
        cells.append("not measured" if c["ns"] is None else f'{c["ns"]["p50"]/1e3:.2f} / {c["ns"]["p99"]/1e3:.2f}')
    print(f"| {case} | " + " | ".join(cells) + " |")
PY
for delay in 5us..40us 50us..500us; do
    echo
    echo "## halt, wake-ups after $delay idle (2000 wake-ups per setting): p50 / p99 µs, vCPU CPU µs per wake-up, successful polls per wake-up"
    echo
    echo "| halt-poll | run | p50 µs | p99 µs | vCPU µs/wake | busy % | exits/wake | polls ok/wake |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for i in $(seq "$RUNS"); do
        "$VIRTPERF" kvm halt --wakeups 2000 --delay "$delay" --halt-poll 0,10us,50us,200us --json >"$tmp/halt$i.json"
    done
    python3 - "$tmp" "$RUNS" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{d}/halt{i}.json"))["runs"] for i in range(1, n + 1)]
for k in range(len(runs[0])):
    for i, r in enumerate(runs, 1):
        x = r[k]
        ok = x["stats"].get("halt_successful_poll", 0) / max(x["wakeups"], 1)
        print(f'| {x["halt_poll_ns"]//1000} µs | {i} | {x["latency_ns"]["p50"]/1e3:.1f} | {x["latency_ns"]["p99"]/1e3:.1f} | '
              f'{x["vcpu_cpu_ns_per_wakeup"]/1e3:.1f} | {x["vcpu_busy_pct"]:.0f} | {x["exits_per_wakeup"]:.2f} | {ok:.2f} |')
PY
done
