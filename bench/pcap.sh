#!/usr/bin/env bash
# Capture-analysis speed: virtperf pcap vs tcptrace -l vs tshark -z conv,tcp on one file.
#
#   bench/pcap.sh [RUNS]      (default 3 runs of each tool, interleaved)
#
# Makes its own capture: tcpdump (snaplen 96) records a 4-second loopback rr test through
# `virtperf rr --capture`, which gives well over 300k packets. Targets (issue 4): virtperf's
# packets/s ≥ 2× tcptrace's and ≥ 30× tshark's. Installs tcpdump, tcptrace and tshark when
# missing. All traffic stays on 127.0.0.1.
set -euo pipefail
RUNS=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
need=()
for t in tcpdump tcptrace tshark; do command -v "$t" >/dev/null || need+=("$t"); done
if ((${#need[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet)
    VIRTPERF=$root/target/release/virtperf
fi
tmp=$(mktemp -d /tmp/vp-pcap-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cap=$tmp/rr.pcap
"$VIRTPERF" rr -l 4 --cpus 0,0 --capture "$cap" >/dev/null
packets=$("$VIRTPERF" pcap "$cap" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["packets"])')
echo "# capture: $packets packets, $(du -h "$cap" | cut -f1), made by virtperf rr --capture (tcpdump)"

time_of() { # prints seconds of wall time for one run of the command
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s.%N)
    python3 -c "print($t1 - $t0)"
}
: >"$tmp/times"
for i in $(seq "$RUNS"); do
    echo "virtperf $(time_of "$VIRTPERF" pcap "$cap")" >>"$tmp/times"
    echo "tcptrace $(time_of tcptrace -l "$cap")" >>"$tmp/times"
    echo "tshark $(time_of tshark -q -z conv,tcp -r "$cap")" >>"$tmp/times"
done
echo "# $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs; median of $RUNS interleaved runs each"
python3 - "$tmp/times" "$packets" <<'PY'
import sys, statistics, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tool, secs = line.split()
    t[tool].append(float(secs))
n = int(sys.argv[2])
med = {k: statistics.median(v) for k, v in t.items()}
print("| tool | median s | packets/s | virtperf speed-up | target |")
print("|---|---:|---:|---:|---|")
for tool, target in [("virtperf", ""), ("tcptrace", "≥ 2×"), ("tshark", "≥ 30×")]:
    s = med[tool]
    up = med[tool] / med["virtperf"]
    ok = "" if not target else ("met" if up >= float(target.strip("≥ ×")) else "MISSED")
    print(f"| {tool} | {s:.3f} | {n / s / 1e6:.2f} M | {up:.1f}× | {target} {ok} |")
PY
