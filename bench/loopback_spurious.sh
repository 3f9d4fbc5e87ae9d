#!/bin/bash
# Loopback streams: how many of the retransmitted segments the receiver had already (D-SACK).
# bench/RESULTS.md "Spurious retransmissions on loopback". Run from the repository root after
# cargo build --release; 32 tries of 3 s.
set -euo pipefail
for cpus in "" "--cpus 0,1"; do for m in 1K 16K; do
  for i in $(seq 1 8); do ${VIRTPERF:-target/release/virtperf} stream -l 3s -m $m $cpus --json 2>/dev/null | python3 -c 'import json,sys; o=json.load(sys.stdin)["outcome"]; t=o["flows"][0]["tcp"]; print("'"$m $cpus"'", round(o["mbps"]), o.get("retransmits"), o.get("spurious_retransmits"), t.get("reord_seen_interval"))'; done
done; done
