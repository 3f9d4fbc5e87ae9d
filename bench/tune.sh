#!/usr/bin/env bash
# bench/tune.sh [BUDGET] [SECS]: `virtperf tune` against tuned's network-latency profile,
# with a goal set between the blocking and the spinning cross-CPU rr p50 measured just
# before (their geometric mean), as issue 44's acceptance asks. The profile comes from the
# installed tuned, else from the Debian package (apt-get download, unpacked here; nothing
# installed). Prints the two p50s, the goal, tune's table and how long it took. Needs root
# for the knobs (without it only spinning and pinning are tried). Not a test.
set -euo pipefail
BUDGET=${1:-5m}
SECS=${2:-2s}
VIRTPERF=${VIRTPERF:-target/release/virtperf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
profile=/usr/lib/tuned/network-latency/tuned.conf
if [[ ! -f $profile ]]; then
    (cd "$tmp" && apt-get download tuned >/dev/null 2>&1 && dpkg-deb -x tuned_*.deb x)
    profile=$tmp/x/usr/lib/tuned/network-latency/tuned.conf
fi
echo "# tune vs tuned network-latency, budget $BUDGET, trials of $SECS — $(date -u '+%Y-%m-%d %H:%M UTC') — commit $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
p50() {
    "$VIRTPERF" rr -l 3s -T 0,1 --wait "$1" --json --db "$tmp/r.db" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"]["latency"]["p50_us"])'
}
block=$(p50 block); spin=$(p50 spin)
goal=$(python3 -c "print(round(($block*$spin)**0.5, 1))")
echo "blocking p50 ${block} µs, spinning p50 ${spin} µs: goal p50 <= ${goal} µs"
start=$(date +%s)
set +e
"$VIRTPERF" tune --goal "p50<=${goal}us" --budget "$BUDGET" -l "$SECS" \
    --against "tuned:$profile" --db "$tmp/r.db" 2>/dev/null
rc=$?
set -e
echo "exit $rc after $(( $(date +%s) - start )) s (budget $BUDGET)"
