#!/usr/bin/env bash
# bench/guest_net.sh [RUNS] [SECS]: user networking's tax against a tap, the same booted
# guest otherwise: `vm compare --native guest --guest-net user` (rr, stream both ways,
# interleaved tap, user, tap, user, …; default 5 runs of 3 s). Prints vm compare's table
# (native = the guest on a tap, guest = the guest on SLIRP). On this project's machines
# guests run under TCG (flagged): the tax then includes QEMU's emulation of each side's
# guest kernel, which is the same on both sides, plus SLIRP's user-space TCP/IP. Not a test.
# NET=passt prices passt instead of SLIRP (where passt is installed).
set -euo pipefail
RUNS=${1:-5}
SECS=${2:-3}
NET=${NET:-user}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# tap vs --guest-net $NET, $RUNS runs of ${SECS}s — $(date -u '+%Y-%m-%d %H:%M UTC') — commit $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$VIRTPERF" vm compare --native guest --guest-net "$NET" --workloads rr,stream,stream-reverse \
    --runs "$RUNS" -l "${SECS}s" --db "$tmp/r.db" 2>&1 | grep -v '^\[' 
