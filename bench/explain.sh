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
for i in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    "$VIRTPERF" explain --quick --db "$tmp/r.db" --json > "$tmp/$i.json"
    t1=$(date +%s.%N)
    python3 - "$tmp/$i.json" "$(echo "$t1 - $t0" | bc)" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
parts = ", ".join("%s %.1f" % (c["name"], c["us"]) for c in v["components"] + v["cross_checks"])
print("run %d: %.0f s  measured %.1f µs  predicted %.1f µs  residual %.1f µs (%.1f %%)  [%s]" % (
    v["run_id"], float(sys.argv[2]), v["measured_us"], v["predicted_us"], v["residual_us"],
    v["residual_pct"], parts))
for m in v["missing"]:
    print("  not measured: %s: %s" % (m["name"], m["reason"]))
PY
done
