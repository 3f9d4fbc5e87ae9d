#!/usr/bin/env bash
# bench/unsampled.sh [SECS] [ROUNDS]: how busy each CPU of a cross-CPU round trip was, by
# four measures side by side in one run, to check virtperf's per-CPU busy (which counts
# the busy time the kernel's tick never sampled, `unsampled_pct`) against measurements it
# is not built from:
#   - cpuidle residency: the wall clock less the time the CPU spent in its cpuidle states
#     (/sys/devices/system/cpu/cpuN/cpuidle/state*/time, µs, timed by the driver), around
#     the whole command; it also counts the idle loop's own work (stopping and restarting
#     the tick) as busy, so it reads above the kernel's idle-timed figure;
#   - /proc/stat's busy fields over all its fields around the whole command (what netperf's
#     `-c -C` and top compute);
#   - virtperf `rr --cpus 0,1 --json`: its per-CPU busy over the measured interval, and the
#     threads pinned there (which a CPU's busy time must hold);
#   - netperf TCP_RR -T 0,1 -c -C: netperf's own local and remote CPU utilization.
# Loopback only; netperf from bench/install-peers.sh (its row is left out without it).
#   bench/unsampled.sh 5 3
set -euo pipefail
SECS=${1:-5}; ROUNDS=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if [[ -z ${VIRTPERF:-} ]]; then
    (cd "$root" && cargo build --release --quiet -p virtperf)
    export VIRTPERF=$root/target/release/virtperf
fi
if (($(nproc) < 2)); then
    echo "bench/unsampled.sh: needs two CPUs (a cross-CPU round trip); this machine has $(nproc)" >&2
    exit 2
fi
echo "# bench/unsampled.sh $SECS $ROUNDS — $(date -u '+%Y-%m-%d %H:%M UTC') — virtperf $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), cpuidle $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
netserver_pid=
if command -v netperf >/dev/null && command -v netserver >/dev/null; then
    netserver -D -L 127.0.0.1 -p 12865 >/dev/null 2>&1 &
    netserver_pid=$!
    trap 'kill "$netserver_pid" 2>/dev/null || true' EXIT
    sleep 0.5
fi
SECS=$SECS ROUNDS=$ROUNDS NETPERF=${netserver_pid:+1} python3 - <<'PY'
import glob, json, os, subprocess, time

secs, rounds = os.environ["SECS"], int(os.environ["ROUNDS"])

def idle_us(c):
    return sum(int(open(f).read()) for f in glob.glob(f"/sys/devices/system/cpu/cpu{c}/cpuidle/state*/time"))

def stat():
    r = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f[0] in ("cpu0", "cpu1"):
            r[int(f[0][3:])] = list(map(int, f[1:9]))
    return r

def around(cmd):
    """Runs cmd; per CPU: cpuidle-residency busy % and /proc/stat sampled busy %."""
    t0, i0, s0 = time.monotonic(), [idle_us(0), idle_us(1)], stat()
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    t1, i1, s1 = time.monotonic(), [idle_us(0), idle_us(1)], stat()
    wall, res = t1 - t0, []
    for c in (0, 1):
        d = [b - a for a, b in zip(s0[c], s1[c])]
        sampled = d[0] + d[1] + d[2] + d[5] + d[6]
        res.append((100 * (1 - (i1[c] - i0[c]) / 1e6 / wall), 100 * sampled / max(sum(d), 1)))
    return out, res

print(f"\n| round | CPU | cpuidle residency busy | /proc/stat sampled busy | virtperf busy (of it unsampled) | its threads there | netperf CPU util |")
print("|---|---|---|---|---|---|---|")
for n in range(1, rounds + 1):
    out, res = around([os.environ["VIRTPERF"], "rr", "--cpus", "0,1", "-l", f"{secs}s", "--json"])
    v = json.loads(out)
    npf = [None, None]
    if os.environ.get("NETPERF"):
        o = subprocess.run(["netperf", "-H", "127.0.0.1", "-t", "TCP_RR", "-l", secs, "-T", "0,1",
                            "-c", "-C", "-P", "0", "--", "-o", "LOCAL_CPU_UTIL,REMOTE_CPU_UTIL"],
                           capture_output=True, text=True).stdout.split()
        if o:
            npf = [float(x) for x in o[-1].split(",")]
    for c, side in ((0, "client"), (1, "server")):
        cpu = v["cpu"][side]
        busy = cpu["system"]["per_cpu_busy_pct"][c]
        uns = cpu["system"]["per_cpu"][c]["unsampled_pct"]
        # netperf's utilization is the machine's, averaged over its CPUs.
        np_ = "—" if npf[c] is None else f"{npf[c]:.1f}% (machine)"
        print(f"| {n} | {c} ({side}) | {res[c][0]:.1f}% | {res[c][1]:.1f}% | {busy:.1f}% ({uns:.1f}) | {cpu['threads_busy_pct']:.1f}% | {np_} |")
PY
