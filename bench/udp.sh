#!/usr/bin/env bash
# Side-by-side UDP benchmark of virtperf against netperf, sockperf and iperf3 on loopback.
#
#   bench/udp.sh [PAIRS] [DURATION_S]      (defaults: 3 pairs, 3 s per run)
#   ONLY=regex bench/udp.sh …              (only the rows whose name matches)
#
# Rows (issue 17): UDP_RR 1 byte same-CPU (0,0) and cross-CPU (0,1) vs `netperf -t UDP_RR`;
# the same vs `sockperf ping-pong`, at 14 bytes (sockperf's smallest message: its header);
# UDP_STREAM at 64 and 1472 bytes, unpaced, vs `netperf -t UDP_STREAM` and `iperf3 -u -b 0`.
# Each row alternates virtperf and the peer (A B A B …, the order flipping every pair), then
# prints medians, the ratio virtperf/peer with the 95% CI of the pair ratios, rr's p99, and
# the streams' loss as each tool reports it. Throughput is the receiver's count on all sides.
#
# Installs netperf and iperf3 (bench/install-peers.sh) and sockperf (apt) when missing, as
# root. All traffic stays on 127.0.0.1; every server this script starts is killed by its PID.
set -euo pipefail

PAIRS=${1:-3}
DUR=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

bash "$here/install-peers.sh"
command -v sockperf >/dev/null || apt-get install -y sockperf >/dev/null
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet -p virtperf)
    VIRTPERF=$root/target/release/virtperf
fi

tmp=$(mktemp -d /tmp/vp-udp.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [[ -n ${KEEP:-} ]] && cp "$tmp/results.tsv" "$KEEP"
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

NETPERF_PORT=12866
IPERF_PORT=5301
SOCKPERF_PORT=11111
netserver -D -p "$NETPERF_PORT" -L 127.0.0.1 >/dev/null 2>&1 &
pids+=($!)
iperf3 -s -B 127.0.0.1 -p "$IPERF_PORT" >/dev/null 2>&1 &
pids+=($!)
"$VIRTPERF" serve --bind 127.0.0.1 --port 0 --announce --quiet >"$tmp/agent.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
    grep -q '^listening on' "$tmp/agent.out" 2>/dev/null && break
    sleep 0.1
done
VP_PORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/agent.out")
[[ -n $VP_PORT ]] || { echo "virtperf agent did not start" >&2; exit 1; }

# sockperf's server is single-threaded and pinned per row: (re)started for each CPU layout.
SP_PID=
sockperf_server() { # CPU
    [[ -n $SP_PID ]] && { kill "$SP_PID" 2>/dev/null || true; wait "$SP_PID" 2>/dev/null || true; }
    taskset -c "$1" sockperf server -i 127.0.0.1 -p "$SOCKPERF_PORT" >/dev/null 2>&1 &
    SP_PID=$!
    pids+=($SP_PID)
    sleep 0.5
}
sleep 0.5

results=$tmp/results.tsv
: >"$results"

# Peers take virtperf's machine lock too (an flock on the same file), so on a shared machine
# they wait out other measurements exactly as virtperf does instead of running beside them.
peerlock() {
    if [[ -e /run/virtperf/lock ]]; then flock /run/virtperf/lock "$@"; else "$@"; fi
}

# record TEST TOOL METRIC VALUE
record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$results"; }
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {"d": d}))' "$1"; }

run_vp() { # TEST ARGS...
    local test=$1; shift
    local out; out=$("$VIRTPERF" "$@" --host 127.0.0.1 --port "$VP_PORT" --json)
    case $1 in
        rr)
            record "$test" virtperf rate "$(field 'd["outcome"]["rate_per_s"]' <<<"$out")"
            record "$test" virtperf p99_us "$(field 'd["outcome"]["latency"]["p99_us"]' <<<"$out")"
            record "$test" virtperf loss_pct "$(field 'd["outcome"]["udp"]["lost_pct"]' <<<"$out")" ;;
        stream)
            record "$test" virtperf rate "$(field 'd["outcome"]["mbps"]' <<<"$out")"
            record "$test" virtperf loss_pct "$(field 'd["outcome"]["udp"]["lost_pct"]' <<<"$out")" ;;
    esac
}

run_netperf() { # TEST KIND TESTOPTS...
    local test=$1 kind=$2; shift 2
    local out
    case $kind in
        rr)
            out=$(peerlock netperf -H 127.0.0.1 -p "$NETPERF_PORT" -l "$DUR" -P 0 "$@" -o THROUGHPUT,P99_LATENCY)
            IFS=, read -r thr p99 <<<"$(tail -n1 <<<"$out")"
            record "$test" peer rate "$thr"; record "$test" peer p99_us "$p99" ;;
        stream)
            # THROUGHPUT is the receiver's for UDP_STREAM; loss from the send and receive calls.
            out=$(peerlock netperf -H 127.0.0.1 -p "$NETPERF_PORT" -l "$DUR" -P 0 "$@" -o THROUGHPUT,LOCAL_SEND_CALLS,REMOTE_RECV_CALLS)
            IFS=, read -r thr sent got <<<"$(tail -n1 <<<"$out")"
            record "$test" peer rate "$thr"
            record "$test" peer loss_pct "$(python3 -c "print(100*(1-$got/$sent))")" ;;
    esac
}

run_iperf3() { # TEST LEN
    local out; out=$(peerlock iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -u -b 0 -l "$2" -t "$DUR" -J)
    record "$1" peer rate "$(field 'd["end"]["sum_received"]["bits_per_second"]/1e6' <<<"$out")"
    record "$1" peer loss_pct "$(field 'd["end"]["sum_received"]["lost_percent"]' <<<"$out")"
}

run_sockperf() { # TEST CLIENT_CPU SIZE
    local out; out=$(peerlock taskset -c "$2" sockperf ping-pong -i 127.0.0.1 -p "$SOCKPERF_PORT" -t "$DUR" -m "$3" --full-rtt 2>&1)
    # Rate over the valid duration (sockperf drops its warm-up); p99 round trip in µs.
    record "$1" peer rate "$(sed -n 's/.*\[Valid Duration\] RunTime=\([0-9.]*\) sec.*ReceivedMessages=\([0-9]*\).*/\2 \1/p' <<<"$out" | awk '{print $1/$2}')"
    record "$1" peer p99_us "$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' <<<"$out")"
}

pair() { # TEST "A command" "B command": alternate order every pair
    local test=$1 a=$2 b=$3
    [[ -z ${ONLY:-} || $test =~ $ONLY ]] || return 0
    for i in $(seq "$PAIRS"); do
        printf '\r%-40s pair %d/%d' "$test" "$i" "$PAIRS" >&2
        if (( i % 2 )); then eval "$a"; eval "$b"; else eval "$b"; eval "$a"; fi
    done
    printf '\r%-56s\r' '' >&2
}

D="${DUR}s"
pair "UDP_RR 1B same-CPU (0,0) vs netperf" \
    "run_vp 'UDP_RR 1B same-CPU (0,0) vs netperf' rr --protocol udp -l $D --cpus 0,0" \
    "run_netperf 'UDP_RR 1B same-CPU (0,0) vs netperf' rr -t UDP_RR -T 0,0 -- -r 1,1"
pair "UDP_RR 1B cross-CPU (0,1) vs netperf" \
    "run_vp 'UDP_RR 1B cross-CPU (0,1) vs netperf' rr --protocol udp -l $D --cpus 0,1" \
    "run_netperf 'UDP_RR 1B cross-CPU (0,1) vs netperf' rr -t UDP_RR -T 0,1 -- -r 1,1"
# The server only where its row runs (ONLY matches row names, not tool names).
if [[ -z ${ONLY:-} || "UDP_RR 14B same-CPU (0,0) vs sockperf" =~ $ONLY ]]; then sockperf_server 0; fi
pair "UDP_RR 14B same-CPU (0,0) vs sockperf" \
    "run_vp 'UDP_RR 14B same-CPU (0,0) vs sockperf' rr --protocol udp -r 14 -l $D --cpus 0,0" \
    "run_sockperf 'UDP_RR 14B same-CPU (0,0) vs sockperf' 0 14"
if [[ -z ${ONLY:-} || "UDP_RR 14B cross-CPU (0,1) vs sockperf" =~ $ONLY ]]; then sockperf_server 1; fi
pair "UDP_RR 14B cross-CPU (0,1) vs sockperf" \
    "run_vp 'UDP_RR 14B cross-CPU (0,1) vs sockperf' rr --protocol udp -r 14 -l $D --cpus 0,1" \
    "run_sockperf 'UDP_RR 14B cross-CPU (0,1) vs sockperf' 0 14"
for m in 64 1472; do
    pair "UDP_STREAM -m $m vs netperf" \
        "run_vp 'UDP_STREAM -m $m vs netperf' stream --protocol udp -l $D -m $m" \
        "run_netperf 'UDP_STREAM -m $m vs netperf' stream -t UDP_STREAM -- -m $m"
    pair "UDP_STREAM -m $m vs iperf3 -u -b 0" \
        "run_vp 'UDP_STREAM -m $m vs iperf3 -u -b 0' stream --protocol udp -l $D -m $m" \
        "run_iperf3 'UDP_STREAM -m $m vs iperf3 -u -b 0' $m"
done

echo "# virtperf UDP vs peers on loopback — $(date -u '+%Y-%m-%d %H:%M UTC') — $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $PAIRS interleaved pairs of ${DUR}s runs per row; medians; virtperf $("$VIRTPERF" --version | cut -d' ' -f2) ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
python3 - "$results" <<'PY'
import sys, statistics, collections, math
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    test, tool, metric, value = line.rstrip("\n").split("\t")
    if value:
        rows.setdefault(test, collections.defaultdict(list))[(tool, metric)].append(float(value))
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
def t95(df):
    return T95.get(df) or T95[min((k for k in T95 if k >= df), default=30)]
def med(m, k):
    return statistics.median(m[k]) if m.get(k) else None
print("| test | unit | virtperf | peer | ratio | pair ratio [95% CI] | p99 µs virtperf | p99 µs peer | loss % virtperf | loss % peer | verdict |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
bad = 0
for test, m in rows.items():
    v, p = m[("virtperf", "rate")], m[("peer", "rate")]
    vp, peer = statistics.median(v), statistics.median(p)
    unit = "Mbit/s" if "STREAM" in test else "trans/s"
    ratio = vp / peer if peer else float("nan")
    logs = [math.log(a / b) for a, b in zip(v, p) if a > 0 and b > 0]
    if len(logs) >= 2:
        g = statistics.mean(logs)
        h = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        lo, mid, hi = math.exp(g - h), math.exp(g), math.exp(g + h)
        ci = f"{mid:.3f} [{lo:.3f}, {hi:.3f}]"
    else:
        hi = ratio
        ci = ""
    state = "ok" if ratio >= 0.97 else ("within noise" if hi >= 0.97 else "MISSED")
    cells = []
    for k in ("p99_us", "loss_pct"):
        a, b = med(m, ("virtperf", k)), med(m, ("peer", k))
        cells += ["" if a is None else f"{a:.1f}" if k == "p99_us" else f"{a:.2f}",
                  "" if b is None else f"{b:.1f}" if k == "p99_us" else f"{b:.2f}"]
        # netperf reports whole microseconds: give it the benefit of its rounding.
        if k == "p99_us" and a is not None and b is not None and a > b + 1.0:
            state = "MISSED (p99)" if state == "ok" else state + ", p99"
    bad += state != "ok"
    print(f"| {test} | {unit} | {vp:.1f} | {peer:.1f} | {ratio:.3f} | {ci} | " + " | ".join(cells) + f" | {state} |")
print()
print("all targets met" if bad == 0 else f"{bad} row(s) not met (see verdicts)")
PY
