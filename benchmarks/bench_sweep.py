"""How long a class-count sweep takes on the bundled many-class demo set (600 classes, 3 609
items), and one slider move (metrics on C sampled classes + grouped recall); then on large data
(30 000 x 128, 300 classes of ~100, mid-difficulty) exactly and with the dashboard's query
sampling (points over 5 000 items rank a stratified sample of 1 000 queries), with the largest
difference of a sampled point from the exact one (the same classes drawn) beside the spread of
the exact points over their repeats.

Usage: ``python benchmarks/bench_sweep.py``. Prints seconds, measured in this process after one
warm-up (numba's cached kernels loaded)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from analysis_core import evaluate, load_files
from analysis_core.stats.class_sweep import class_count_sweep, default_class_counts

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ds = load_files([ROOT / "demo_data" / "many_classes.npz"])
    X, codes = ds.embeddings["epoch_10"], ds.label_codes
    evaluate(ds, max_classes=20, methods=["epoch_10"])  # warm-up
    counts = default_class_counts(ds.n_classes)
    for repeats in (1, 3):
        t = time.perf_counter()
        sweep = class_count_sweep(X, codes, counts=counts, repeats=repeats, group_size=10)
        dt = time.perf_counter() - t
        print(f"sweep over C = {counts}, {repeats} repeat(s): {len(sweep)} subsets in {dt:.2f} s")
    for c in (50, 300, 600):
        t = time.perf_counter()
        evaluate(ds, methods=["epoch_10"], max_classes=c, group_size=10, seed=1)
        print(f"one slider move, C = {c}: {time.perf_counter() - t:.3f} s")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 300, 30_000)
    X = (rng.standard_normal((300, 128))[y] + 1.5 * rng.standard_normal((30_000, 128))).astype(np.float32)
    runs = {}
    for name, kw in (("exact", {}), ("sampled", {"query_sample": 1000, "exact_up_to": 5000})):
        t = time.perf_counter()
        runs[name] = class_count_sweep(X, y, repeats=3, group_size=10, **kw)
        print(f"30 000 x 128, 300 classes, 3 repeats, {name}: {time.perf_counter() - t:.2f} s")
    cols = ["recall_at_1", "map_at_r", "map", "jsd"]
    diff = (runs["sampled"][cols] - runs["exact"][cols]).abs().max()  # the same classes drawn: query sampling only
    spread = runs["exact"].groupby("n_classes")[cols].std().max()
    print("largest |sampled - exact| over the points: " + ", ".join(f"{c} {diff[c]:.4f}" for c in cols)
          + "; largest spread over the exact repeats: " + ", ".join(f"{c} {spread[c]:.4f}" for c in cols))


if __name__ == "__main__":
    main()
