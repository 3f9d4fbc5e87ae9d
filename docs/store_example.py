"""Per-config p50 latency of the newest run in a virtperf results database.

Usage: python3 store_example.py results.db
"""
import json
import sqlite3
import sys

import pandas as pd

db = sys.argv[1] if len(sys.argv) > 1 else "results.db"
# Read-only, so a run writing to the database is never disturbed.
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
run = con.execute("SELECT max(id) FROM runs").fetchone()[0]
trials = pd.read_sql_query(
    "SELECT seq, config, workload, point_json, repetition, result_json"
    " FROM trials WHERE run_id = ? AND status = 'ok' AND result_json IS NOT NULL",
    con,
    params=(run,),
)
# One column per field of the TestResult: outcome.latency.p50_us, cpu.client.…, env.…
results = pd.json_normalize([json.loads(r) for r in trials["result_json"]])
points = pd.json_normalize([json.loads(p) for p in trials["point_json"]])
df = pd.concat([trials.drop(columns=["result_json", "point_json"]), points, results], axis=1)

rr = df[df["outcome.kind"].isin(["rr", "crr"])]
# Sweep parameters (e.g. size) and the config make a cell; a cell's tries are its rows.
cell = [c for c in points.columns] + ["config"]
p50 = rr.groupby(cell, dropna=False)["outcome.latency.p50_us"].agg(["count", "median", "min", "max"])
print(f"run {run}: p50 latency (µs) per point and config, over its tries")
print(p50.round(2).to_string())

# The percentiles of a cell over all its tries come from merging the tries' histograms
# (as `virtperf show` does), not from averaging percentiles: `pip install hdrhistogram`.
try:
    from hdrh.histogram import HdrHistogram
except ImportError:
    HdrHistogram = None
if HdrHistogram is not None:
    print("merged over the tries: p50, p99 (µs)")
    for key, g in rr.groupby(cell, dropna=False):
        merged = None
        for encoded in g["outcome.histogram"]:
            h = HdrHistogram.decode(encoded)  # base64, V2 + deflate, nanoseconds
            if merged is None:
                merged = h
            else:
                merged.add(h)
        p50_us = merged.get_value_at_percentile(50) / 1000
        p99_us = merged.get_value_at_percentile(99) / 1000
        print(f"  {key}: {p50_us:.2f} {p99_us:.2f} ({merged.get_total_count()} transactions)")
