"""Collapsed embeddings: time and peak memory of ``evaluate`` when many items share one vector.

A collapsed checkpoint (every item mapped to one point, or to a few) is common early in training
and in failed runs. Every query's gallery is then one large tie block (or a few). The engine ranks
one query per item group (items of one vector with one class and the same roles) and visits the
pairs of two groups once, weighted by their counts, so the cost is that of the number of groups,
not of the items, squared (before: 10 000 identical rows took 0.39 GB, 30 000 took 1.96 GB and 44
s, 250 000 asked for 116 GiB).

Each case runs in a fresh process: it makes the data, calls ``analysis_core.evaluate`` (Python
API, default options: cosine, leave-one-out, every metric, PR curves, pair histograms) and reports
the evaluate call's wall time, the whole process's wall time and its peak RSS
(``resource.getrusage``). For identical rows the mAP is checked against the closed form of one tie
block holding the whole gallery (McSherry & Najork, ECIR 2008): a query with R positives among M
gallery items has ``E[AP] = s + (1 - s) H_M / M`` with ``s = (R - 1)/(M - 1)`` and ``H_M`` the
M-th harmonic number (from ``E[AP] = (1/R) sum_{j=1..M} (R/M)(1 + (j-1)s)/j``).

Usage: ``python benchmarks/bench_collapsed.py [--sizes 10000,30000,250000] [--points 5]
[--half 20000]``. ``--half N``: also N items of which half are distinct and half one point (distinct
queries each seeing a large tie block: the case still linear in the block per query).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
t_start = time.perf_counter()
import numpy as np
import analysis_core as ac
kind, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
y = np.arange(n) % 2
if kind == "identical":
    X = np.ones((n, 16), np.float32)
elif kind == "points":
    X = rng.standard_normal((k, 16)).astype(np.float32)[rng.integers(0, k, n)]
else:  # half: half the items distinct, half one point
    X = rng.standard_normal((n, 16)).astype(np.float32)
    X[n // 2:] = X[n // 2]
t0 = time.perf_counter()
ev = ac.evaluate(X, y)
t1 = time.perf_counter()
s = ev.to_dict()["methods"]["embeddings"]
print(json.dumps({"evaluate_s": t1 - t0, "process_s": t1 - t_start, "map": s["map"]["expected"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "warnings": ev.warnings()}))
"""


def closed_form_map(class_sizes: list[int]) -> float:
    """mAP of a leave-one-out evaluation of identical rows: every query's gallery (M = N - 1
    items, R = its class size - 1 positives) is one tie block; queries without a positive are
    left out."""
    M = sum(class_sizes) - 1
    H = math.fsum(1.0 / j for j in range(1, M + 1))
    total, count = 0.0, 0
    for size in class_sizes:
        R = size - 1
        if R < 1:
            continue
        s = (R - 1) / (M - 1)
        total += size * (s + (1 - s) * H / M)
        count += size
    return total / count


def run(kind: str, n: int, k: int) -> dict:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(k)], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{kind} {n}: failed\n{out.stderr}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,30000,250000", help="item counts of the identical-row cases")
    ap.add_argument("--points", type=int, default=5, help="distinct points of the few-point case (at the largest size)")
    ap.add_argument("--half", type=int, default=20000, help="items of the half-collapsed case (0: skip)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cases = [("identical", n, 1) for n in sizes] + [("points", max(sizes), args.points)]
    if args.half:
        cases.append(("half", args.half, 0))
    print(f"{'case':<28}{'evaluate s':>11}{'process s':>11}{'peak MB':>9}  mAP (closed form)")
    for kind, n, k in cases:
        r = run(kind, n, k)
        name = {"identical": f"{n:,} identical rows", "points": f"{n:,} items on {k} points",
                "half": f"{n:,} items, half on 1 point"}[kind]
        check = ""
        if kind == "identical":
            cf = closed_form_map([(n + 1) // 2, n // 2])
            check = f"  ({cf:.12f}, |diff| {abs(cf - r['map']):.1e})"
        print(f"{name:<28}{r['evaluate_s']:>11.2f}{r['process_s']:>11.2f}{r['peak_mb']:>9.0f}  {r['map']:.12f}{check}")
        for w in r["warnings"]:
            print(f"{'':<28}warning: {w[:110]}")


if __name__ == "__main__":
    main()
