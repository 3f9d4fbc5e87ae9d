#!/usr/bin/env bash
# bench/cpu-kind.sh [ROUNDS] [SECS]: the rows issue 30 §5 asks for on each CPU kind, in one
# run, for a machine of a kind bench/RESULTS.md has no rows for yet (an Intel guest, say):
#   1. bench/align.sh: what a buffer 16 or 64 bytes into a page costs the kernel's copies here;
#   2. bench/recv-why.sh at 16 KiB and 128 KiB sends: the two receive loops side by side;
#   3. bench/peers.sh, stream rows: virtperf's defaults against netperf and iperf3.
# Paste its output into bench/RESULTS.md with the machine it ran on.
#   bench/cpu-kind.sh 6 3
# Loopback only; installs netperf and iperf3 if missing (bench/install-peers.sh).
set -euo pipefail
ROUNDS=${1:-6}; SECS=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet -p virtperf)
    export VIRTPERF=$root/target/release/virtperf
fi
echo "# bench/cpu-kind.sh $ROUNDS $SECS — $(date -u '+%Y-%m-%d %H:%M UTC') — virtperf $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo; echo "## 1. buffer offset (bench/align.sh $ROUNDS $SECS 131072 \"0 16 64\")"
"$here/align.sh" "$ROUNDS" "$SECS" 131072 "0 16 64" 2>/dev/null
for size in 16384 131072; do
    echo; echo "## 2. receive loops at $size B sends (bench/recv-why.sh $ROUNDS $SECS $size)"
    "$here/recv-why.sh" "$ROUNDS" "$SECS" "$size" 2>/dev/null
done
echo; echo "## 3. stream rows against the peers (ONLY=stream bench/peers.sh $ROUNDS $SECS)"
ONLY=stream "$here/peers.sh" "$ROUNDS" "$SECS" 2>/dev/null | grep -v '^netperf: \|^iperf3: '
