#!/usr/bin/env bash
# bench/explain.sh [RUNS]: runs `virtperf explain --quick` RUNS times (default 3) into a
# temporary database and prints, per run, the measured cross-CPU round trip, the model's
# components, the prediction and the residual, and how long the battery took: the numbers
# docs/explain.md records. Changes (and restores) haltpoll.guest_halt_poll_ns when run as
# root on a KVM guest with cpuidle-haltpoll. Not a test: a benchmark for people.
set -euo pipefail
RUNS=${1:-3}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# virtperf explain --quick, $RUNS runs — $(date -u '+%Y-%m-%d %H:%M UTC') — commit $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for i in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    "$VIRTPERF" explain --quick --db "$tmp/r.db" --json > "$tmp/$i.json"
    t1=$(date +%s.%N)
    python3 - "$tmp/$i.json" "$t0" "$t1" <<'PY'
import json, sys, time
v = json.load(open(sys.argv[1]))
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
f = lambda x, fmt: "—" if x is None else fmt % x
parts = ", ".join("%s %.1f" % (c["name"], c["us"]) for c in v["components"] + v["cross_checks"])
print("run %d (%s UTC): %.1f s  measured %.1f µs  predicted %s µs  residual %s µs (%s %%)  [%s]" % (
    v["run_id"], time.strftime("%H:%M:%S", time.gmtime(t0)), t1 - t0, v["measured_us"],
    f(v["predicted_us"], "%.1f"), f(v["residual_us"], "%.1f"), f(v["residual_pct"], "%.1f"), parts))
for c in v["components"]:
    if c["name"] == "idle_exit":
        print("  idle_exit source: %s" % c["source"])
for m in v["missing"]:
    print("  not measured: %s: %s" % (m["name"], m["reason"]))
PY
done
