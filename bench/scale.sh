#!/usr/bin/env bash
# How virtperf scales with flows against the tools people compare it with (issue 26):
# stream and rr with 1, 2, 4, 8, 16 flows, virtperf with a thread per flow and multiplexed
# (--threads N), against N netperf processes side by side (netperf has one flow per
# process) and, for streams, iperf3 -P N. Runs are interleaved round by round, in an order
# that rotates every round, so drift hits every tool alike; each ratio is virtperf over N
# netperf processes, its 95% CI over the rounds' ratios (Student t on the logs). Prints a
# Markdown table and writes an SVG plot of throughput and rate against flows.
#
#   bench/scale.sh [ROUNDS] [DURATION_S]        (defaults: 3 rounds, 5 s)
#   FLOWS="1 2 4 8 16 32" bench/scale.sh …       (the flow counts; any machine size)
#   PLOT=scale.svg bench/scale.sh …              (where the plot goes; default bench-scale.svg)
#
# Installs netperf and iperf3 when missing (bench/install-peers.sh). All traffic stays on
# 127.0.0.1; every server and client this script starts is killed by its PID on exit.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-5}
FLOWS=${FLOWS:-1 2 4 8 16}
PLOT=${PLOT:-bench-scale.svg}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

bash "$here/install-peers.sh"
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet)
    VIRTPERF=$root/target/release/virtperf
fi

tmp=$(mktemp -d /tmp/vp-scale.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

NETPERF_PORT=12866
IPERF_PORT=5298
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
sleep 0.5

results=$tmp/results.tsv
: >"$results"
# record KIND FLOWS TOOL ROUND VALUE [CLIENT_BUSY SERVER_BUSY]
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6:-}" "${7:-}" >>"$results"; }

vp() { # KIND FLOWS ROUND NAME ARGS...
    local kind=$1 n=$2 r=$3 name=$4; shift 4
    local out
    out=$("$VIRTPERF" "$kind" -P "$n" "$@" -l "${DUR}s" --host 127.0.0.1 --port "$VP_PORT" --json)
    python3 - "$out" <<'PY' >"$tmp/vp.line"
import json, sys
v = json.loads(sys.argv[1]); o = v["outcome"]
value = o.get("mbps") if "mbps" in o else o["rate_per_s"]
busy = lambda s: "" if s is None or s.get("threads_busy_pct") is None else "%.0f" % s["threads_busy_pct"]
print(value, busy(v["cpu"]["client"]), busy(v["cpu"].get("server")))
PY
    read -r value cb sb <"$tmp/vp.line"
    record "$kind" "$n" "$name" "$r" "$value" "$cb" "$sb"
}

netperf_n() { # KIND FLOWS ROUND: N netperf processes at once, their sum
    local kind=$1 n=$2 r=$3 test opts ps=()
    if [[ $kind == stream ]]; then test=TCP_STREAM; opts="-m 16384"; else test=TCP_RR; opts="-r 1,1"; fi
    for i in $(seq "$n"); do
        netperf -H 127.0.0.1 -p "$NETPERF_PORT" -l "$DUR" -t "$test" -P 0 -- $opts -o THROUGHPUT \
            >"$tmp/np.$i" 2>&1 &
        ps+=($!)
        pids+=($!)
    done
    wait "${ps[@]}"
    record "$kind" "$n" "netperf" "$r" "$(cat "$tmp"/np.* | awk '/^[0-9.]+$/ {s += $1} END {print s}')"
    rm -f "$tmp"/np.*
}

iperf3_n() { # FLOWS ROUND
    local out
    out=$(iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -t "$DUR" -P "$1" -l 16K -J)
    record stream "$1" iperf3 "$2" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["end"]["sum_received"]["bits_per_second"]/1e6)' "$out")"
}

for r in $(seq "$ROUNDS"); do
    for n in $FLOWS; do
        runs=(
            "vp stream $n $r thread-per-flow --send-size 16KiB"
            "vp stream $n $r threads --threads $n --send-size 16KiB"
            "netperf_n stream $n $r"
            "iperf3_n $n $r"
            "vp rr $n $r thread-per-flow"
            "vp rr $n $r threads --threads $n"
            "netperf_n rr $n $r"
        )
        k=${#runs[@]}
        for j in $(seq 0 $((k - 1))); do
            run=${runs[$(((j + r) % k))]}
            printf '\rround %d/%d, %2d flows: %-60s' "$r" "$ROUNDS" "$n" "$run" >&2
            eval "$run"
        done
    done
done
printf '\r%-90s\r' '' >&2

# System calls per unit of work beside each virtperf row (issue 45): a separate 1 s run of
# each, under `perf stat -a` (both sides: the agent is another process), apart from the timed
# rounds so counting costs them nothing. Units: per transaction (rr), per MB (stream).
SYSCALLS="epoll_pwait epoll_wait sendto recvfrom read write ppoll poll"
sys_counts=$tmp/syscalls.tsv
: >"$sys_counts"
if command -v perf >/dev/null 2>&1 && perf stat -e syscalls:sys_enter_epoll_pwait -a true >/dev/null 2>&1; then
    events=$(for e in $SYSCALLS; do printf 'syscalls:sys_enter_%s,' "$e"; done)
    for n in $FLOWS; do
        for kind in rr stream; do
            for name in thread-per-flow threads; do
                extra=(); [[ $name == threads ]] && extra=(--threads "$n")
                [[ $kind == stream ]] && extra+=(--send-size 16KiB)
                out=$(perf stat -x, -e "${events%,}" -a -o "$tmp/perf.txt" -- \
                    "$VIRTPERF" "$kind" -P "$n" "${extra[@]}" -l 1s --host 127.0.0.1 --port "$VP_PORT" --json)
                units=$(python3 -c 'import json,sys; o=json.loads(sys.argv[1])["outcome"]; print(o["transactions"] if "transactions" in o else o["receiver_bytes"]/1e6)' "$out")
                awk -F, -v k="$kind" -v n="$n" -v t="$name" -v u="$units" \
                    '/syscalls:sys_enter_/ {sub("syscalls:sys_enter_", "", $3); printf "%s\t%s\t%s\t%s\t%.3f\n", k, n, t, $3, $1 / u}' \
                    "$tmp/perf.txt" >>"$sys_counts"
            done
        done
    done
fi

echo "# virtperf vs N netperf processes and iperf3 -P N — $(date -u '+%Y-%m-%d %H:%M UTC') — $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $ROUNDS interleaved rounds of ${DUR}s runs; virtperf $("$VIRTPERF" --version | cut -d' ' -f2) ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?')); \`bench/scale.sh $ROUNDS $DUR\`, FLOWS=\"$FLOWS\""
python3 - "$results" "$PLOT" <<'PY'
import sys, math, statistics, collections
rows = collections.defaultdict(dict)   # (kind, flows, tool) -> {round: (value, cb, sb)}
for line in open(sys.argv[1]):
    kind, n, tool, r, value, cb, sb = line.rstrip("\n").split("\t")
    rows[(kind, int(n), tool)][int(r)] = (float(value), cb, sb)
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
def ci(a, b):
    logs = [math.log(a[r][0] / b[r][0]) for r in a if r in b and a[r][0] > 0 and b[r][0] > 0]
    if len(logs) < 2:
        return None
    g = statistics.mean(logs)
    h = T95.get(len(logs) - 1, 2.0) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(g - h), math.exp(g), math.exp(g + h)
print("| test | flows | tool | median | vs N netperf: ratio [95% CI] | busy % client / server (of its threads' CPU) | verdict |")
print("|---|---:|---|---:|---:|---:|---|")
for kind, unit in (("stream", "Mbit/s"), ("rr", "trans/s")):
    for n in sorted({k[1] for k in rows if k[0] == kind}):
        peer = rows.get((kind, n, "netperf"), {})
        for tool in ("thread-per-flow", "threads", "netperf", "iperf3"):
            cell = rows.get((kind, n, tool))
            if not cell:
                continue
            med = statistics.median(v[0] for v in cell.values())
            ratio = verdict = busy = ""
            if tool in ("thread-per-flow", "threads", "iperf3") and peer:
                c = ci(cell, peer)
                if c:
                    ratio = "%.3f [%.3f, %.3f]" % (c[1], c[0], c[2])
                    if tool != "iperf3":
                        verdict = "ok" if c[2] >= 0.97 else "below 0.97"
            if tool in ("thread-per-flow", "threads"):
                cbs = [v[1] for v in cell.values() if v[1]]
                sbs = [v[2] for v in cell.values() if v[2]]
                busy = "%s / %s" % (max(cbs, default="—", key=float), max(sbs, default="—", key=float))
                if verdict == "below 0.97" and any(float(x) >= 90 for x in cbs + sbs):
                    verdict = "below 0.97, CPU-bound (a side's threads ≥ 90% busy)"
            label = {"thread-per-flow": "virtperf, a thread per flow", "threads": "virtperf --threads N",
                     "netperf": "N netperf processes", "iperf3": "iperf3 -P N"}[tool]
            print(f"| {kind} | {n} | {label} | {med:,.0f} {unit} | {ratio} | {busy} | {verdict} |")
import os
sysfile = os.path.join(os.path.dirname(sys.argv[1]), "syscalls.tsv")
calls = collections.defaultdict(dict)
for line in open(sysfile) if os.path.exists(sysfile) else []:
    k, n, t, call, per = line.rstrip("\n").split("\t")
    calls[(k, int(n), t)][call] = float(per)
if calls:
    # epoll waits always shown (what issue 45 is about), the rest where some row makes them.
    names = ["epoll_pwait", "epoll_wait"] + sorted({c for v in calls.values() for c in v if c not in ("epoll_pwait", "epoll_wait") and any(x.get(c, 0) >= 0.005 for x in calls.values())})
    print("\nSystem calls per transaction (rr) or per MB (stream), both sides (`perf stat -a`, a 1 s run of each apart from the rounds):\n")
    print("| test | flows | virtperf | " + " | ".join(names) + " |")
    print("|---|---:|---|" + "---:|" * len(names))
    for (k, n, t), v in sorted(calls.items()):
        print(f"| {k} | {n} | {t} | " + " | ".join("%.2f" % v.get(c, 0) for c in names) + " |")
else:
    print("\nSystem calls per unit: not measured (perf with syscall tracepoints unavailable: install linux-perf, run as root)")
# The plot: one panel per kind, median against flows, one line per tool.
W, H, L, B, T, R = 460, 300, 70, 40, 30, 130
colors = {"thread-per-flow": "#1f77b4", "threads": "#2ca02c", "netperf": "#d62728", "iperf3": "#9467bd"}
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H}" font-family="sans-serif" font-size="11">']
for p, (kind, unit) in enumerate((("stream", "Mbit/s"), ("rr", "trans/s"))):
    x0 = p * W
    ns = sorted({k[1] for k in rows if k[0] == kind})
    if not ns:
        continue
    top = max(statistics.median(v[0] for v in c.values()) for k, c in rows.items() if k[0] == kind) * 1.1
    lx = lambda n: x0 + L + (W - L - R) * (math.log2(n) / max(math.log2(ns[-1]), 1))
    ly = lambda v: T + (H - T - B) * (1 - v / top)
    svg.append(f'<text x="{x0 + L}" y="18">{kind} ({unit}) against flows</text>')
    svg.append(f'<line x1="{x0 + L}" y1="{H - B}" x2="{x0 + W - R}" y2="{H - B}" stroke="#444"/>')
    svg.append(f'<line x1="{x0 + L}" y1="{T}" x2="{x0 + L}" y2="{H - B}" stroke="#444"/>')
    for n in ns:
        svg.append(f'<text x="{lx(n):.1f}" y="{H - B + 14}" text-anchor="middle">{n}</text>')
    for f in (0, 0.5, 1):
        svg.append(f'<text x="{x0 + L - 4}" y="{ly(top * f / 1.1):.1f}" text-anchor="end">{top * f / 1.1:,.0f}</text>')
    for i, tool in enumerate(("thread-per-flow", "threads", "netperf", "iperf3")):
        pts = [(n, statistics.median(v[0] for v in rows[(kind, n, tool)].values())) for n in ns if (kind, n, tool) in rows]
        if not pts:
            continue
        path = " ".join(f"{lx(n):.1f},{ly(v):.1f}" for n, v in pts)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{colors[tool]}" stroke-width="2"/>')
        svg.append(f'<text x="{x0 + W - R + 8}" y="{T + 14 * i + 10}" fill="{colors[tool]}">{tool}</text>')
svg.append("</svg>")
open(sys.argv[2], "w").write("\n".join(svg))
print(f"\nplot: {sys.argv[2]}")
PY
