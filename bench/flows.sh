#!/usr/bin/env bash
# Many flows on few threads (issue 17): virtperf rr with 1, 100, 1000 and 10,000 flows on 2
# threads a side, against virtperf's own 1-flow rate (a thread per flow, the classic
# engine) and against 100 parallel netperf TCP_RR processes (the most netperf flows this
# 2-CPU machine can run: netperf has no multiplexing, each flow is a netperf process and a
# netserver child). Also the peak RSS of both sides at 10,000 flows (goal < 64 MB each).
#
#   bench/flows.sh [DURATION_S] [REPEATS]          (defaults: 3 s, 1 repeat)
#
# Installs netperf when missing (bench/install-peers.sh). All traffic stays on 127.0.0.1;
# every process this script starts is killed by its PID on exit. Needs 10,064 open files
# (virtperf raises its soft limit to the hard one itself; the hard limit must allow it).
set -euo pipefail

DUR=${1:-3}
REPEATS=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

if ! command -v netperf >/dev/null || ! command -v netserver >/dev/null; then
    bash "$here/install-peers.sh"
fi
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet)
    VIRTPERF=$root/target/release/virtperf
fi

tmp=$(mktemp -d /tmp/vp-flows.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# A port of its own, so another netserver on the default port is left alone.
NETPERF_PORT=${NETPERF_PORT:-12867}
netserver -D -p "$NETPERF_PORT" -L 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
# The agent serves every virtperf row; its peak RSS (VmHWM) after the 10,000-flow row is
# the server side's.
"$VIRTPERF" serve --bind 127.0.0.1 --port 0 --announce --quiet >"$tmp/agent.out" 2>&1 &
agent=$!
pids+=("$agent")
for _ in $(seq 50); do
    grep -q '^listening on' "$tmp/agent.out" 2>/dev/null && break
    sleep 0.1
done
VP_PORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/agent.out")
[[ -n $VP_PORT ]] || { echo "virtperf agent did not start" >&2; exit 1; }
sleep 0.5

# rr on the agent; prints "rate p99_us jain setup_s client_max_rss_kb".
vp_rr() {
    /usr/bin/time -f '%M' -o "$tmp/rss" \
        "$VIRTPERF" rr --host 127.0.0.1 --port "$VP_PORT" -l "$DUR" --json "$@" >"$tmp/out.json"
    python3 - "$tmp/out.json" "$(cat "$tmp/rss")" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
o = r["outcome"]
s = o.get("flow_spread") or {}
print(f'{o["rate_per_s"]:.0f} {o["latency"]["p99_us"]:.0f} {s.get("jain", 1.0):.3f} '
      f'{s.get("setup_s", 0.0):.3f} {sys.argv[2]}')
EOF
}

# N parallel netperf TCP_RR processes, 1-byte; prints their summed rate.
netperf_rr() {
    local n=$1
    local np=()
    for i in $(seq "$n"); do
        netperf -H 127.0.0.1 -p "$NETPERF_PORT" -t TCP_RR -l "$DUR" -P 0 -- -r 1,1 \
            -o THROUGHPUT >"$tmp/np.$i" 2>/dev/null &
        np+=($!)
    done
    for p in "${np[@]}"; do wait "$p" || true; done
    cat "$tmp"/np.* | awk '{ s += $1 } END { printf "%.0f\n", s }'
    rm -f "$tmp"/np.*
}

printf 'date: %s\nmachine: %s, %s CPUs, kernel %s\ncommit: %s\n\n' \
    "$(date -u +%FT%TZ)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
    "$(nproc)" "$(uname -r)" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "| test | flows | threads/side | trans/s | p99 µs | Jain | set-up s | client max RSS MB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for rep in $(seq "$REPEATS"); do
    read -r rate p99 jain setup rss <<<"$(vp_rr --flows 1)"
    echo "| virtperf rr (thread per flow) | 1 | 1 | $rate | $p99 | | | $((rss / 1024)) |"
    for n in 1 100 1000 10000; do
        read -r rate p99 jain setup rss <<<"$(vp_rr --flows "$n" --threads 2)"
        echo "| virtperf rr --threads 2 | $n | $((n < 2 ? n : 2)) | $rate | $p99 | $jain | $setup | $((rss / 1024)) |"
    done
    rate=$(netperf_rr 100)
    echo "| 100 × netperf TCP_RR | 100 | 100 processes | $rate | | | | |"
    rate=$(netperf_rr 1)
    echo "| netperf TCP_RR | 1 | 1 process | $rate | | | | |"
done
echo
echo "agent peak RSS (VmHWM, over every row): $(awk '/VmHWM/ { printf "%.1f MB", $2 / 1024 }' "/proc/$agent/status")"
