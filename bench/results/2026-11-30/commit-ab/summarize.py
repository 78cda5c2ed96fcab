#!/usr/bin/env python3
"""Medians (and ranges) per commit and writer count of run.sh's JSON lines.

    summarize.py results-quiet.jsonl [results-pebble-keys.jsonl ...]   # the full table
    summarize.py --rate results-loaded.jsonl                          # commits/s only
    summarize.py --ratios results-quiet.jsonl                         # paired, round by round
"""
import json, statistics, sys
from collections import defaultdict

NAMES = {
    "store:0:0": "bbolt, the store's create, as it is",
    "store:1:0": "bbolt, the store's create, NoFreelistSync",
    "store:0:1": "bbolt, the store's create, NoGrowSync",
    "store:1:1": "bbolt, the store's create, both",
    "shape:0:0": "bbolt, 3 writes in 3 buckets",
    "shape:1:1": "bbolt, 3 writes in 3 buckets, both",
    "shape1:0:0": "bbolt, 3 writes in 1 bucket",
    "pebble": "Pebble, 3 writes, Sync",
    "pebble5": "Pebble, 3 writes + 5 index keys, Sync",
}
args = sys.argv[1:]
mode = args[0] if args and args[0].startswith("--") else ""
rate_only = mode == "--rate"
if mode:
    args = args[1:]
runs = defaultdict(list)
loads = []
for path in args:
    for line in open(path):
        r = json.loads(line)
        runs[(r["variant"], r["writers"])].append(r)
        loads.append(r["load1"])

med = statistics.median
print(f"{len(loads)} runs; load average (1 min) before a run: median {med(loads):.2f}, range {min(loads):.2f}–{max(loads):.2f}\n")
if mode == "--ratios":
    # commits/s of one commit over another's in the same round and writers
    pairs = [("store:1:0", "store:0:0"), ("store:0:1", "store:0:0"), ("store:1:1", "store:0:0"),
             ("shape:0:0", "store:0:0"), ("shape1:0:0", "shape:0:0"), ("shape:1:1", "shape:0:0"),
             ("pebble", "shape:0:0"), ("pebble", "store:0:0")]
    by = defaultdict(dict)
    for (v, w), rs in runs.items():
        for r in rs:
            by[(r["round"], w)][v] = r["commits_per_s"]
    print("| commits/s, A over B, median of the rounds (range) | 1 writer | 10 writers | 50 writers |\n|---|--:|--:|--:|")
    for a, b in pairs:
        cells = []
        for w in (1, 10, 50):
            rs = [x[a] / x[b] for (rnd, ww), x in by.items() if ww == w and a in x and b in x]
            cells.append(f"{med(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})" if rs else "—")
        print(f"| {NAMES[a]} / {NAMES[b]} | " + " | ".join(cells) + " |")
    sys.exit()
if rate_only:
    print("| commits/s, median (range) | 1 writer | 10 writers | 50 writers |\n|---|--:|--:|--:|")
    for v, name in NAMES.items():
        cells = []
        for w in (1, 10, 50):
            cps = [r["commits_per_s"] for r in runs.get((v, w), [])]
            cells.append(f"{med(cps):,.0f} ({min(cps):,.0f}–{max(cps):,.0f})" if cps else "—")
        if any(c != "—" for c in cells):
            print(f"| {name} | " + " | ".join(cells) + " |")
    sys.exit()
print("| commit | writers | runs | commits/s, median (range) | p50 µs a commit | commits a sync group | pages a commit | fdatasync a commit | fsync a commit | pwrite64 / write a commit | CPU µs a commit (of it system) |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for w in (1, 10, 50):
    for v, name in NAMES.items():
        rs = runs.get((v, w))
        if not rs:
            continue
        per = lambda k: med(r["sys"][k] / r["commits"] for r in rs)
        cps = [r["commits_per_s"] for r in rs]
        if v.startswith("pebble"):
            grp = med(r["commits"] / r["sys"]["fdatasync"] for r in rs)
            pages, writes = "—", f"{per('write'):.2f} write"
        else:
            grp = med(r["commits_per_tx"] for r in rs)
            pages, writes = f"{med(r['pages_per_commit'] for r in rs):.1f}", f"{per('pwrite64'):.2f} pwrite64"
        print(f"| {name} | {w} | {len(rs)} | {med(cps):,.0f} ({min(cps):,.0f}–{max(cps):,.0f}) | {med(r['p50_us'] for r in rs):,.0f} "
              f"| {grp:.1f} | {pages} | {per('fdatasync'):.3f} | {per('fsync'):.4f} | {writes} "
              f"| {med(r['cpu_us_per_commit'] for r in rs):.0f} ({med(r['cpu_sys_us_per_commit'] for r in rs):.0f}) |")
