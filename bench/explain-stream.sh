#!/usr/bin/env bash
# bench/explain-stream.sh [SIZES]: `virtperf explain --workload stream --quick` for each send
# size (default "64 16K 128K"), printing the verdict, each side's CPU µs per MB by kind, the
# model's prediction and residual, and the remedies; then, per size, one stream checked
# against independent tools on the same run:
#   - `perf stat` (root, linux-perf): system calls (raw_syscalls:sys_enter) and NET_RX/TX
#     softirqs (irq:softirq_entry) on the two pinned CPUs, per MB received, beside the sends
#     and receives virtperf's loops counted — perf counts every call on those CPUs, both
#     ends', the control connection's and the result's too;
#   - /proc/stat read by this script around the run: each pinned CPU's busy share by kind,
#     beside the one virtperf's result gives (`cpu.*.system.per_cpu`).
# Not a test: a benchmark for people; docs/explain.md and bench/RESULTS.md record its output.
set -euo pipefail
SIZES=${1:-"64 16K 128K"}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# virtperf explain --workload stream --quick — $(date -u '+%Y-%m-%d %H:%M UTC') — commit $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
for size in $SIZES; do
    t0=$(date +%s.%N)
    "$VIRTPERF" explain --workload stream --quick -r "$size" --db "$tmp/r.db" --json > "$tmp/e.json"
    t1=$(date +%s.%N)
    python3 - "$tmp/e.json" "$t0" "$t1" "$size" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
print("\n## -r %s (%.1f s): %s" % (sys.argv[4], float(sys.argv[3]) - float(sys.argv[2]), v["verdict"]))
for s in v["sides"]:
    m = s["us_per_mb"]
    p = s["paced_us_per_mb"]
    print("  %-8s CPU %d busy %5.1f%%  µs/MB %7.1f (user %.1f sys %.1f softirq %.1f)  paced %s" % (
        s["role"], s["cpu"], s["busy_pct"]["mean"], m["total"], m["user"], m["sys"], m["softirq"],
        "—" if p is None else "%.1f" % p["mean"]))
    n = lambda x: "—" if x is None else "%.0f" % x
    print("           calls/MB %s, TCP data segments/MB %s" % (n(s["calls_per_mb"]), n(s["segments_per_mb"])))
mo = v["model"]
print("  model: %s predicts %s Mbit/s, measured %.0f, residual %s" % (
    mo["side"], "—" if mo["predicted_mbps"] is None else "%.0f" % mo["predicted_mbps"],
    v["mbps"]["mean"], "—" if mo["residual_pct"] is None else "%+.1f%%" % mo["residual_pct"]))
for r in v["remedies"]:
    print("  remedy %-28s %-22s %s" % (r["label"], r["effect"], "" if r["ratio"] is None else "×%.3f" % r["ratio"]))
PY
    # The cross-check: one 3 s stream, perf and /proc/stat around it.
    grep -E '^cpu[01] ' /proc/stat > "$tmp/stat0"
    if command -v perf >/dev/null && [ "$(id -u)" = 0 ]; then
        perf stat -x, -C 0,1 -e raw_syscalls:sys_enter,irq:softirq_entry -o "$tmp/perf" -- \
            "$VIRTPERF" stream -m "$size" -T 0,1 -l 3s --json > "$tmp/s.json"
    else
        "$VIRTPERF" stream -m "$size" -T 0,1 -l 3s --json > "$tmp/s.json"
        : > "$tmp/perf"
    fi
    grep -E '^cpu[01] ' /proc/stat > "$tmp/stat1"
    python3 - "$tmp/s.json" "$tmp/perf" "$tmp/stat0" "$tmp/stat1" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
mb = v["outcome"]["receiver_bytes"] / 1e6
send = v["workload"]["send_size"]
counts = {}
for line in open(sys.argv[2]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        counts[f[2]] = float(f[0])
calls = counts.get("raw_syscalls:sys_enter")
soft = counts.get("irq:softirq_entry")
flows = v["outcome"]["flows"]
sends = sum(f.get("sender_calls") or 0 for f in flows) / mb
recvs = sum(f.get("receiver_calls") or 0 for f in flows) / mb
print("  cross-check (one 3 s stream, %.0f MB): perf: %s system calls per MB on CPUs 0,1; virtperf counted %.0f sends + %.0f receives per MB (one send per %d bytes: %.0f)" % (
    mb, "—" if calls is None else "%.0f" % (calls / mb), sends, recvs, send, 1e6 / send))
print("    perf: %s softirqs per MB" % ("—" if soft is None else "%.0f" % (soft / mb)))
def rows(p):
    return {l.split()[0]: [int(x) for x in l.split()[1:]] for l in open(p)}
a, b = rows(sys.argv[3]), rows(sys.argv[4])
for cpu in ("cpu0", "cpu1"):
    d = [y - x for x, y in zip(a[cpu], b[cpu])]
    tot = sum(d[:8]) or 1
    busy = 100.0 * (d[0] + d[1] + d[2] + d[5] + d[6]) / tot
    i = int(cpu[3:])
    side = v["cpu"]["client"]["system"]["per_cpu"][i]
    vb = 100.0 - side["idle_pct"] - side["steal_pct"]
    print("    %s /proc/stat around the command: busy %.1f%% (sys %.1f, softirq %.1f); virtperf over the measured interval: busy %.1f%% (sys %.1f, softirq %.1f)" % (
        cpu, busy, 100.0 * d[2] / tot, 100.0 * d[6] / tot, vb, side["system_pct"], side["softirq_pct"]))
PY
done
