#!/usr/bin/env bash
# bench/trace_toggle.sh [SECONDS] [HALF_MS] [CPUS] [all]: what --trace's counting costs an rr,
# measured against the machine's own swings (issue 28). One rr runs SECONDS with 100 ms
# intervals while `trace_toggle` (crates/measure/examples) opens --trace's counters on its
# CPUs for HALF_MS, closes them for HALF_MS, and so on. Each counted half's rate is compared
# with the mean of the uncounted halves on either side (intervals within 100 ms of an edge
# dropped): a slow phase of the host, seconds long, moves both alike. Prints the median
# ratio with a bootstrap 95% CI. Needs root. Traffic on 127.0.0.1 only.
set -euo pipefail
SECS=${1:-60}
HALF=${2:-1000}
CPUS=${3:-0,1}
ALL=${4:-}
root=$(cd "$(dirname "$0")/.." && pwd)
VIRTPERF=${VIRTPERF:-$root/target/release/virtperf}
(cd "$root" && cargo build -q --release -p virtperf-measure --example trace_toggle)
TOGGLE=$root/target/release/examples/trace_toggle
python3 - "$VIRTPERF" "$TOGGLE" "$SECS" "$HALF" "$CPUS" "$ALL" <<'PY'
import random, re, statistics, subprocess, sys, threading, time
vp, toggle, secs, half, cpus, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
rr = subprocess.Popen([vp, "rr", "--cpus", cpus, "-l", f"{secs + 2}s", "-i", "100ms"],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
lines = []  # (arrival monotonic s, start s, end s, rate)
pat = re.compile(r"^\[\s*([\d.]+)-\s*([\d.]+) s\]\s+(\d+) tr/s")
def read():
    for line in rr.stdout:
        m = pat.match(line)
        if m:
            lines.append((time.monotonic(), float(m[1]), float(m[2]), float(m[3])))
reader = threading.Thread(target=read)
reader.start()
time.sleep(1.0)
tg = subprocess.run([toggle, cpus, str(half), str(secs)] + (["all"] if mode == "all" else []),
                    capture_output=True, text=True, check=True)
reader.join()
rr.wait()
if tg.stderr.strip():
    print("trace_toggle:", tg.stderr.strip())
# The rr's start on the monotonic clock: each interval line arrives just after its end.
t0 = statistics.median(a - end for a, _, end, _ in lines)
edges = [(w, int(ns) / 1e9 - t0) for w, ns in (l.split() for l in tg.stdout.split("\n") if l)]
phases = []  # (on?, from, to)
for (w, a), (_, b) in zip(edges, edges[1:]):
    phases.append((w == "on", a, b))
margin = 0.1
def rate(a, b):
    r = [x for _, s, e, x in lines if s >= a + margin and e <= b - margin]
    return statistics.mean(r) if r else None
ratios = []
for i, (on, a, b) in enumerate(phases):
    if not on or i == 0 or i + 1 >= len(phases):
        continue
    r_on, r_before, r_after = rate(a, b), rate(*phases[i - 1][1:]), rate(*phases[i + 1][1:])
    if None not in (r_on, r_before, r_after):
        ratios.append(r_on / ((r_before + r_after) / 2))
if not ratios:
    sys.exit("no complete on/off/on phases: give more SECONDS")
random.seed(1)
boot = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
plain = statistics.mean(x for _, _, _, x in lines)
print(f"rr --cpus {cpus}, {secs} s, counters {'--trace-all' if mode == 'all' else '--trace'} on/off every {half} ms, "
      f"{len(ratios)} counted halves, mean rate {plain:.0f}/s")
print(f"  counted / uncounted neighbours: median {statistics.median(ratios):.3f} "
      f"[95% CI {boot[50]:.3f}, {boot[1949]:.3f}], mean {statistics.mean(ratios):.3f}, "
      f"range {min(ratios):.3f}-{max(ratios):.3f}")
PY
